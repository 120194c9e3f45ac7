"""softmax and layer_norm against plain NumPy formulas, and their stage structure."""

import numpy as np
import pytest

from tensortune import ops, te
from tensortune.errors import DSLError
from tensortune.pipeline import compile
from tensortune.space.registry import design_space
from tensortune.target import Target, supported_isas
from tensortune.te.reference import evaluate
from tensortune.workload import workload


def softmax_numpy(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def layer_norm_numpy(x, gamma, beta, eps):
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


@pytest.mark.parametrize("shape", [(1,), (7,), (3, 5), (2, 3, 17)])
def test_softmax(rand, shape):
    a = te.placeholder(shape, name="X")
    x = rand(*shape) * 5
    np.testing.assert_allclose(
        evaluate(ops.softmax(a), {a: x}), softmax_numpy(x.astype(np.float64)), rtol=1e-5, atol=1e-7
    )


def test_softmax_is_stable_for_large_inputs():
    a = te.placeholder((2, 3), name="X")
    x = np.array([[1000, 1001, 1002], [-1000, -1000, -1000]], np.float32)
    got = evaluate(ops.softmax(a), {a: x})
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, softmax_numpy(x.astype(np.float64)), rtol=1e-6)


def test_softmax_stages():
    a = te.placeholder((4, 6), name="X")
    out = ops.softmax(a)
    ex, total = out.inputs
    (mx,) = [t for t in ex.inputs if t is not a]
    assert [t.name for t in (mx, ex, total, out)] == [
        "softmax_max",
        "softmax_exp",
        "softmax_sum",
        "softmax",
    ]
    assert {t.tag for t in (mx, ex, total, out)} == {"softmax"}
    assert mx.body.combiner == "max" and total.body.combiner == "sum"
    assert mx.shape == total.shape == (4,)
    assert ex.body.func == "exp_nonpos"  # of x - max(x) <= 0: the cheaper vector exp


@pytest.mark.parametrize("isa", supported_isas())
def test_compiled_softmax_of_masked_rows(isa: str):
    """Rows with -inf (masked attention scores): exactly 0 there, as NumPy; a row all masked
    gives NaN; a row spanning [-100, 100] has exps that underflow (exp_nonpos flushes them to 0
    below exp(-87.68), NumPy below exp(-103.97))."""
    target = Target.detect(num_threads=2, isa=isa)
    wl = workload("softmax:rows=7,cols=37")  # 4 vectors and a tail of 5 per row on AVX2
    (x,) = wl.random_inputs()
    x[0, [0, 5, 36]] = -np.inf
    x[1, :-1] = -np.inf  # all but the last: that one is 1
    x[2, :] = -np.inf
    x[3, 9:] = -np.inf  # a causal mask: whole vectors and the tail
    x[4] *= 100
    x[5, 3] = np.nan
    with np.errstate(all="ignore"):
        want = softmax_numpy(x.astype(np.float64))
    ds = design_space(wl, target)
    for schedule in (None, ds.schedule(ds.default)):
        got = compile(wl.outputs[0], schedule, target)(x)
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        assert (got[np.isneginf(x) & ~np.isnan(want)] == 0).all()
        assert got[1, -1] == 1
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("shape", [(1,), (9,), (4, 16), (2, 3, 5)])
def test_layer_norm(rand, shape):
    a = te.placeholder(shape, name="X")
    g, b = te.placeholder(shape[-1:], name="gamma"), te.placeholder(shape[-1:], name="beta")
    x, gv, bv = rand(*shape) * 3 + 1, rand(shape[-1]), rand(shape[-1])
    got = evaluate(ops.layer_norm(a, g, b, eps=1e-5), {a: x, g: gv, b: bv})
    want = layer_norm_numpy(x.astype(np.float64), gv, bv, 1e-5)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_layer_norm_stages():
    a = te.placeholder((3, 8), name="X")
    out = ops.layer_norm(a, te.placeholder((8,), name="g"), te.placeholder((8,), name="b"))
    names = {t.name: t for t in out.inputs}
    assert {"layer_norm_mean", "layer_norm_var"} <= set(names)
    assert names["layer_norm_var"].inputs == (a, names["layer_norm_mean"])
    assert out.tag == names["layer_norm_mean"].tag == "layernorm"
    assert out.attrs == {"eps": 1e-5}


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: ops.softmax(te.placeholder((2, 3), name="X").name), "x must be a Tensor"),
        (
            lambda: ops.layer_norm(
                te.placeholder((2, 3)), te.placeholder((4,)), te.placeholder((3,))
            ),
            r"gamma must have shape \(3,\), got \(4,\)",
        ),
        (
            lambda: ops.layer_norm(
                te.placeholder((2, 3)), te.placeholder((3,)), te.placeholder((3, 1))
            ),
            "beta must be 1-D",
        ),
        (
            lambda: ops.layer_norm(
                te.placeholder((2, 3)), te.placeholder((3,)), te.placeholder((3,)), eps=-1
            ),
            "eps must be a number >= 0",
        ),
        (
            lambda: ops.layer_norm(
                te.placeholder((2, 3), "int32"), te.placeholder((3,)), te.placeholder((3,))
            ),
            "x must be float32 or float64",
        ),
    ],
)
def test_nn_errors(call, message):
    with pytest.raises(DSLError, match=message):
        call()
