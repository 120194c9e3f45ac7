"""sum/mean/max/min over axis tuples against NumPy."""

import numpy as np
import pytest

from tensortune import ops, te
from tensortune.errors import DSLError
from tensortune.te.reference import evaluate

REDUCTIONS = [
    (ops.reduce_sum, np.sum),
    (ops.reduce_mean, np.mean),
    (ops.reduce_max, np.max),
    (ops.reduce_min, np.min),
]


@pytest.mark.parametrize(("op", "numpy_op"), REDUCTIONS, ids=lambda v: getattr(v, "__name__", v))
@pytest.mark.parametrize("axis", [None, 0, -1, (0, 2), (2, 1), (0, 1, 2)])
@pytest.mark.parametrize("keepdims", [False, True])
def test_reductions_match_numpy(rand, op, numpy_op, axis, keepdims):
    a = te.placeholder((3, 4, 5), name="X")
    x = rand(3, 4, 5)
    out = op(a, axis=axis, keepdims=keepdims)
    want = numpy_op(x.astype(np.float64), axis=axis, keepdims=keepdims)
    assert out.shape == np.shape(want) and out.tag == "reduction"
    np.testing.assert_allclose(evaluate(out, {a: x}), want, rtol=1e-5, atol=1e-6)


def test_reduce_axes_are_named_after_input_dims():
    out = ops.reduce_sum(te.placeholder((3, 4, 5)), axis=(0, 2))
    assert [a.name for a in out.reduce_axes] == ["r0", "r2"]
    assert out.name == "reduce_sum" and out.attrs == {"axis": (0, 2), "keepdims": False}


def test_integer_mean_is_float():
    a = te.placeholder((2, 3), "int32", name="X")
    out = ops.reduce_mean(a, axis=1)
    assert out.dtype == "float32"
    x = np.arange(6, dtype=np.int32).reshape(2, 3)
    np.testing.assert_allclose(evaluate(out, {a: x}), [1, 4], rtol=1e-6)


@pytest.mark.parametrize(
    ("axis", "message"),
    [
        (3, r"axis must be an int in \[-3, 2\], got 3"),
        ((0, -3), "axis repeats a dimension"),
        ((), "axis must name at least one dimension"),
        ("0", "axis must be an int"),
    ],
)
def test_reduction_errors(axis, message):
    with pytest.raises(DSLError, match=message):
        ops.reduce_sum(te.placeholder((3, 4, 5)), axis=axis)
