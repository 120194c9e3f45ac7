"""Elementwise ops and broadcasting against NumPy formulas."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tensortune import ops, te
from tensortune.errors import DSLError
from tensortune.te.reference import evaluate

ERF = np.vectorize(math.erf)


@pytest.mark.parametrize(
    ("a_shape", "b_shape"),
    [((3, 4), (3, 4)), ((3, 4), (4,)), ((3, 1), (1, 4)), ((2, 3, 4), (3, 1)), ((4,), (2, 3, 4))],
)
@pytest.mark.parametrize(
    ("op", "numpy_op"),
    [(ops.add, np.add), (ops.sub, np.subtract), (ops.mul, np.multiply), (ops.div, np.divide)],
)
def test_broadcasting_binary_ops(rand, a_shape, b_shape, op, numpy_op):
    a, b = te.placeholder(a_shape, name="a"), te.placeholder(b_shape, name="b")
    out = op(a, b)
    x, y = rand(*a_shape), rand(*b_shape) + 3
    assert out.shape == np.broadcast_shapes(a_shape, b_shape) and out.tag == "elementwise"
    np.testing.assert_allclose(evaluate(out, {a: x, b: y}), numpy_op(x, y), rtol=1e-6)


def test_scalar_operands_take_the_tensor_dtype(rand):
    a = te.placeholder((5,), name="a")
    x = rand(5)
    np.testing.assert_allclose(evaluate(ops.mul(a, 2), {a: x}), x * 2)
    out = ops.sub(1.5, a)
    assert out.dtype == "float32"
    np.testing.assert_allclose(evaluate(out, {a: x}), 1.5 - x)


def test_bias_add_on_the_channel_axis(rand):
    data, bias = te.placeholder((2, 3, 4, 5), name="x"), te.placeholder((3,), name="bias")
    out = ops.bias_add(data, bias, axis=1)
    x, b = rand(2, 3, 4, 5), rand(3)
    np.testing.assert_allclose(evaluate(out, {data: x, bias: b}), x + b[:, None, None])


@pytest.mark.parametrize(
    ("op", "formula"),
    [
        (ops.relu, lambda x: np.maximum(x, 0)),
        (ops.gelu, lambda x: 0.5 * x * (1 + ERF(x / np.sqrt(2)))),
        (ops.sigmoid, lambda x: 1 / (1 + np.exp(-x))),
        (ops.tanh, np.tanh),
        (lambda t: ops.clip(t, -0.25, 0.5), lambda x: np.clip(x, -0.25, 0.5)),
    ],
)
def test_activations(rand, op, formula):
    a = te.placeholder((4, 6), name="a")
    x = rand(4, 6) * 4
    out = op(a)
    assert out.tag == "elementwise" and out.dtype == "float32"
    np.testing.assert_allclose(evaluate(out, {a: x}), formula(x.astype(np.float64)), atol=1e-6)


def test_relu_keeps_integer_dtype():
    a = te.placeholder((4,), "int32", name="a")
    out = ops.relu(a)
    assert out.dtype == "int32"
    np.testing.assert_array_equal(
        evaluate(out, {a: np.array([-2, 0, 3, -1], np.int32)}), [0, 0, 3, 0]
    )


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda a: ops.add(a, te.placeholder((3,))), r"add: shapes \(4, 6\) and \(3,\) do not"),
        (lambda a: ops.mul(2, 3), "at least one operand must be a Tensor"),
        (lambda a: ops.add(a, "x"), "b must be a Tensor or a number, got str"),
        (lambda a: ops.add(a, True), "b must be a Tensor or a number, got bool"),
        (lambda a: ops.clip(a, 1, 0), "a_min must be <= a_max"),
        (lambda a: ops.clip(a, float("nan"), 0), "a_min must be a number"),
        (lambda a: ops.bias_add(a, te.placeholder((4,)), axis=1), "bias has 4 entries"),
        (lambda a: ops.bias_add(a, te.placeholder((4,)), axis=2), r"axis must be an int in \[-2"),
        (lambda a: ops.relu([1, 2]), "relu: x must be a Tensor, got list"),
    ],
)
def test_elementwise_errors(call, message):
    with pytest.raises(DSLError, match=message):
        call(te.placeholder((4, 6), name="a"))


UNARY = {
    "relu": (ops.relu, lambda x: np.maximum(x, 0)),
    "gelu": (ops.gelu, lambda x: 0.5 * x * (1 + ERF(x / np.sqrt(2)))),
    "sigmoid": (ops.sigmoid, lambda x: 1 / (1 + np.exp(-x))),
    "tanh": (ops.tanh, np.tanh),
    "clip": (lambda t: ops.clip(t, -0.5, 0.5), lambda x: np.clip(x, -0.5, 0.5)),
}


@settings(max_examples=30, deadline=None)
@given(
    rows=st.sampled_from([1, 2, 3, 7, 13]),
    cols=st.sampled_from([1, 2, 5, 11]),
    chain=st.lists(st.sampled_from([*UNARY, "add_bias", "mul_bias"]), min_size=1, max_size=5),
    seed=st.integers(0, 2**16),
)
def test_property_elementwise_chains(rows, cols, chain, seed):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-2, 2, (rows, cols)).astype(np.float32)
    bias = rng.uniform(-1, 1, (cols,)).astype(np.float32)
    a, b = te.placeholder(x.shape, name="a"), te.placeholder(bias.shape, name="bias")
    t, want, inputs = a, x.astype(np.float64), {a: x}
    for step in chain:
        if step in UNARY:
            op, formula = UNARY[step]
            t, want = op(t), formula(want)
            continue
        inputs[b] = bias
        if step == "add_bias":
            t, want = ops.add(t, b), want + bias
        else:
            t, want = ops.mul(t, b), want * bias
    np.testing.assert_allclose(evaluate(t, inputs), want, rtol=1e-5, atol=1e-5)
