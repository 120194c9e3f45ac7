"""Pass ``reciprocals``: under fast_math a divisor that a loop never changes is inverted once
before that loop, and the loop multiplies."""

from __future__ import annotations

import numpy as np
import pytest

import tensortune as tt
from tensortune.ir.nodes import Allocate, Buffer, For, Store, seq, walk_stmts
from tensortune.ir.visit import walk_exprs
from tensortune.lower.reciprocal import reciprocals
from tensortune.pipeline import build_source
from tensortune.space.registry import design_space
from tensortune.te.expr import Binary, TensorRead, Var, walk

X = Buffer("X", (4, 64), "float32")
S = Buffer("S", (4,), "float32")
Y = Buffer("Y", (4, 64), "float32")


def _ops(s) -> list[str]:
    return [e.op for top in walk_exprs(s) for e in walk(top) if isinstance(e, Binary)]


def test_an_invariant_divisor_is_inverted_once_before_the_outermost_loop_that_keeps_it():
    i, j = Var("i"), Var("j")
    value = Binary("div", TensorRead(X, (i, j)), TensorRead(S, (i,)), "float32")
    inner = For(j, 64, "vectorized", Store(Y, (i, j), value))
    out = reciprocals(For(i, 4, "serial", inner))
    # S[i] changes with i, not with j: inverted inside the i loop, before the j loop
    assert isinstance(out, For) and out.var == i
    alloc = out.body
    assert isinstance(alloc, Allocate) and alloc.buffer.name == "S_rcp"
    assert alloc.buffer.shape == (1,) and alloc.buffer.scope == "local"
    first, loop = alloc.body.stmts
    assert first.buffer is alloc.buffer and _ops(first) == ["div"]
    assert isinstance(loop, For) and loop.var == j and _ops(loop) == ["mul"]
    reads = [e for e in walk(loop.body.value) if isinstance(e, TensorRead)]
    assert [e.tensor for e in reads] == [X, alloc.buffer]


def test_divisors_the_loop_changes_stay_divisions():
    i, j = Var("i"), Var("j")
    varying = Binary("div", TensorRead(X, (i, j)), TensorRead(X, (i, j)), "float32")
    nest = For(i, 4, "serial", For(j, 64, "serial", Store(Y, (i, j), varying)))
    assert reciprocals(nest) == nest
    # S is written inside the j loop: the division reads a different S[i] on every iteration
    written = seq(
        [
            Store(S, (i,), TensorRead(X, (i, j))),
            Store(Y, (i, j), Binary("div", TensorRead(X, (i, j)), TensorRead(S, (i,)), "float32")),
        ]
    )
    out = reciprocals(For(i, 4, "serial", For(j, 64, "serial", written)))
    assert "mul" not in _ops(out) and not [s for s in walk_stmts(out) if isinstance(s, Allocate)]


def test_integer_division_is_never_inverted():
    i, j = Var("i"), Var("j")
    n = Buffer("N", (4,), "int32")
    value = Binary(
        "div", TensorRead(Buffer("M", (4, 64), "int32"), (i, j)), TensorRead(n, (i,)), "int32"
    )
    nest = For(
        i, 4, "serial", For(j, 64, "serial", Store(Buffer("Q", (4, 64), "int32"), (i, j), value))
    )
    assert reciprocals(nest) == nest


@pytest.mark.parametrize("fast_math", [True, False])
def test_softmax_multiplies_by_the_reciprocal_of_the_sum_only_under_fast_math(fast_math):
    target = tt.Target.cross("avx2", num_threads=2)
    ds = design_space(tt.workload("softmax:rows=8,cols=197"), target)
    config = {**ds.default, "fast_math": fast_math, "unroll": 1}
    source, _ = build_source(ds.schedule(config), "kernel", target)
    body = source[source.index("int kernel(") :]
    assert ("softmax_sum_rcp[0] = 1.0f / softmax_sum[" in body) == fast_math
    assert ("* tt_bcast_f32x8(&softmax_sum_rcp[0])" in body) == fast_math
    assert ("/ tt_bcast_f32x8(&softmax_sum[" in body) != fast_math


def test_softmax_with_reciprocals_matches_numpy(target):
    wl = tt.workload("softmax:rows=7,cols=197")
    ds = design_space(wl, target)
    inputs = wl.random_inputs(0)
    for recompute in (False, True):
        config = {**ds.default, "fast_math": True, "recompute": recompute}
        got = tt.compile(wl, schedule=ds.schedule(config), target=target)(*inputs)
        np.testing.assert_allclose(got, wl.reference(inputs), rtol=2e-6, atol=1e-7)
