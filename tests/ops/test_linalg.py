"""matmul, batch_matmul and dense against NumPy products."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tensortune import ops, te
from tensortune.errors import DSLError
from tensortune.te.reference import evaluate


def test_matmul(rand):
    a, b = te.placeholder((5, 7), name="A"), te.placeholder((7, 3), name="B")
    c = ops.matmul(a, b)
    assert (c.name, c.tag, c.shape) == ("matmul", "matmul", (5, 3))
    assert [x.name for x in c.axes] == ["i", "j"] and [x.name for x in c.reduce_axes] == ["k"]
    x, y = rand(5, 7), rand(7, 3)
    np.testing.assert_allclose(evaluate(c, {a: x, b: y}), x @ y, rtol=1e-5, atol=1e-6)


def test_batch_matmul(rand):
    a, b = te.placeholder((3, 4, 5), name="A"), te.placeholder((3, 5, 2), name="B")
    c = ops.batch_matmul(a, b)
    assert c.shape == (3, 4, 2) and c.tag == "matmul"
    x, y = rand(3, 4, 5), rand(3, 5, 2)
    np.testing.assert_allclose(evaluate(c, {a: x, b: y}), x @ y, rtol=1e-5, atol=1e-6)


def test_dense_with_and_without_bias(rand):
    x, w, b = (
        te.placeholder((4, 6), name="X"),
        te.placeholder((3, 6), name="W"),
        te.placeholder((3,), name="bias"),
    )
    xv, wv, bv = rand(4, 6), rand(3, 6), rand(3)
    plain = ops.dense(x, w)
    np.testing.assert_allclose(evaluate(plain, {x: xv, w: wv}), xv @ wv.T, rtol=1e-5, atol=1e-6)
    biased = ops.dense(x, w, b)
    assert biased.tag == "elementwise" and biased.inputs[0].tag == "matmul"
    np.testing.assert_allclose(
        evaluate(biased, {x: xv, w: wv, b: bv}), xv @ wv.T + bv, rtol=1e-5, atol=1e-6
    )


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: ops.matmul(te.placeholder((2, 3)), te.placeholder((4, 2))), "extents differ"),
        (lambda: ops.matmul(te.placeholder((2, 3, 1)), te.placeholder((3, 2))), "a must be 2-D"),
        (lambda: ops.matmul(te.placeholder((2, 3)), 3.0), "b must be a Tensor, got float"),
        (
            lambda: ops.batch_matmul(te.placeholder((2, 3, 4)), te.placeholder((3, 4, 5))),
            "batch sizes differ",
        ),
        (
            lambda: ops.dense(te.placeholder((2, 3)), te.placeholder((4, 2))),
            "reduction extents differ",
        ),
        (
            lambda: ops.dense(te.placeholder((2, 3)), te.placeholder((4, 3)), te.placeholder((3,))),
            "bias has 3 entries",
        ),
    ],
)
def test_linalg_errors(call, message):
    with pytest.raises(DSLError, match=message):
        call()


@settings(max_examples=30, deadline=None)
@given(
    shape=st.tuples(*[st.sampled_from([1, 2, 3, 5, 11, 16]) for _ in range(4)]),
    seed=st.integers(0, 2**16),
)
def test_property_batch_matmul(shape, seed):
    nb, m, n, k = shape
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, (nb, m, k)).astype(np.float32)
    y = rng.uniform(-1, 1, (nb, k, n)).astype(np.float32)
    a, b = te.placeholder(x.shape, name="A"), te.placeholder(y.shape, name="B")
    got = evaluate(ops.batch_matmul(a, b), {a: x, b: y})
    np.testing.assert_allclose(got, x.astype(np.float64) @ y, rtol=1e-5, atol=1e-6)
