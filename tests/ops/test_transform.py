"""transpose, reshape, concat and pad against their NumPy namesakes."""

import numpy as np
import pytest

from tensortune import ops, te
from tensortune.errors import DSLError
from tensortune.te.reference import evaluate


@pytest.mark.parametrize("axes", [None, (0, 1, 2), (2, 0, 1), (1, 2, 0)])
def test_transpose(rand, axes):
    a = te.placeholder((2, 3, 4), name="X")
    x = rand(2, 3, 4)
    out = ops.transpose(a, axes)
    assert out.tag == "transform"
    np.testing.assert_array_equal(evaluate(out, {a: x}), np.transpose(x, axes))


@pytest.mark.parametrize(
    ("src", "dst"),
    [
        ((2, 3, 4), (6, 4)),
        ((2, 3, 4), (4, -1)),
        ((6,), (1, 2, 1, 3)),
        ((2, 1, 3), (3, 2)),
        ((5,), (5,)),
    ],
)
def test_reshape(rand, src, dst):
    a = te.placeholder(src, name="X")
    x = rand(*src)
    np.testing.assert_array_equal(evaluate(ops.reshape(a, dst), {a: x}), x.reshape(dst))


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_concat(rand, axis):
    shapes = [(2, 3, 4), (2, 3, 4), (2, 3, 4)]
    shapes = [
        tuple(n + extra if d == axis % 3 else n for d, n in enumerate(s))
        for s, extra in zip(shapes, (0, 2, 1), strict=True)
    ]
    ts = [te.placeholder(s, name=f"T{i}") for i, s in enumerate(shapes)]
    xs = [rand(*s) for s in shapes]
    out = ops.concat(ts, axis=axis)
    got = evaluate(out, dict(zip(ts, xs, strict=True)))
    np.testing.assert_array_equal(got, np.concatenate(xs, axis=axis))


def test_pad(rand):
    a = te.placeholder((2, 3, 4), name="X")
    x = rand(2, 3, 4)
    out = ops.pad(a, (0, 1, 2), (1, 0, 3), value=-2.5)
    assert out.tag == "pad" and out.shape == (3, 4, 9)
    want = np.pad(x, ((0, 1), (1, 0), (2, 3)), constant_values=-2.5)
    np.testing.assert_array_equal(evaluate(out, {a: x}), want)
    symmetric = ops.pad(a, (1, 1, 1))
    np.testing.assert_array_equal(evaluate(symmetric, {a: x}), np.pad(x, 1))
    copy = ops.pad(a, (0, 0, 0))
    np.testing.assert_array_equal(evaluate(copy, {a: x}), x)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda a: ops.transpose(a, (0, 0, 1)), r"permutation of 0..2"),
        (lambda a: ops.transpose(a, (0, 1)), r"permutation of 0..2"),
        (lambda a: ops.transpose(a, (0, 1, "2")), r"permutation of 0..2"),
        (lambda a: ops.reshape(a, (5, -1)), r"cannot infer -1 in \(5, -1\) for 24 elements"),
        (lambda a: ops.reshape(a, (-1, -1)), "at most one -1"),
        (lambda a: ops.reshape(a, (2, 12, 2)), "has 48 elements, x has 24"),
        (lambda a: ops.reshape(a, (0, 24)), "positive ints"),
        (lambda a: ops.concat([], axis=0), "non-empty"),
        (lambda a: ops.concat([a, te.placeholder((2, 4, 4))], axis=0), "does not match"),
        (lambda a: ops.concat([a, te.placeholder((2, 3, 4), "int32")], axis=0), "does not match"),
        (lambda a: ops.concat([a, a], axis=3), r"axis must be an int in \[-3, 2\]"),
        (lambda a: ops.pad(a, (1, 1)), "pad_before must be an int >= 0 or a sequence of 3"),
        (lambda a: ops.pad(a, (1, 1, 1), (0, -1, 0)), "pad_after must be"),
    ],
)
def test_transform_errors(call, message):
    with pytest.raises(DSLError, match=message):
        call(te.placeholder((2, 3, 4), name="X"))
