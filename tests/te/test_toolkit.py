"""The DSL's shared toolkit: one dtype table, one topological sort, one expression rewrite."""

from __future__ import annotations

import numpy as np
import pytest

import tensortune.te as te
from tensortune import dtype as dtypes
from tensortune.errors import DSLError
from tensortune.schedule import Schedule
from tensortune.te import expr, reference
from tensortune.te.expr import Var, free_vars, promote, rewrite, substitute, tensors_read
from tensortune.te.graph import topological_order
from tensortune.te.reference import evaluate


def test_dtypes_come_from_the_one_table():
    for name in ("DTYPES", "_RANK"):
        assert not hasattr(expr, name), f"te.expr keeps its own {name}"
    assert expr.FLOAT_DTYPES is dtypes.FLOAT_DTYPES
    assert {n: dtypes.dtype(n).numpy for n in dtypes.TENSOR_DTYPES} == reference.NUMPY_DTYPES
    assert promote("int32", "float32") == promote("float32", "int32") == "float32"
    assert promote("bool", "int32") == "int32" and promote("float64", "float32") == "float64"
    with pytest.raises(DSLError, match="unknown dtype 'int64'"):  # an index type only
        te.placeholder((4,), "int64")
    with pytest.raises(DSLError, match="unknown dtype 'float16'"):
        te.cast(te.const(1.0), "float16")


def test_topological_order_puts_producers_first_in_first_read_order():
    A = te.placeholder((4,), name="A")
    B = te.placeholder((4,), name="B")
    P = te.compute((4,), lambda i: A[i] * 2.0, name="P")
    Q = te.compute((4,), lambda i: B[i] + P[i], name="Q")
    R = te.compute((4,), lambda i: P[i] + Q[i], name="R")
    assert [t.name for t in topological_order([R])] == ["A", "P", "B", "Q", "R"]
    assert [st.name for st in Schedule(R).stages] == ["P", "Q", "R"]  # the same sort


def plus_one(t: te.Tensor):
    return lambda i: t[i] + 1.0


def test_a_deep_chain_needs_no_recursion():
    """Both the reference and a schedule walk a chain deeper than Python's recursion limit."""
    X = te.placeholder((3,), name="X")
    t = X
    for n in range(3000):
        t = te.compute((3,), plus_one(t), name=f"T{n}")
    order = topological_order([t])
    assert len(order) == 3001 and order[0] is X and order[-1] is t
    assert len(Schedule(t).stages) == 3000
    x = np.zeros(3, np.float32)
    np.testing.assert_array_equal(evaluate(t, {X: x}), x + 3000)


def test_rewrite_is_post_order_and_shares_what_it_leaves():
    A = te.placeholder((8,), name="A")
    i, j = Var("i"), Var("j")
    e = A[i] * 2.0 + A[i + 1]
    seen = []
    out = rewrite(e, lambda n: seen.append(type(n).__name__) or None)
    assert out is e and seen[-1] == "Binary" and seen.index("Var") < seen.index("TensorRead")
    moved = substitute(e, {i: j})
    assert free_vars(moved) == {j} and tensors_read(moved) == (A,)
    assert substitute(e, {}) is e
