"""Pooling against NumPy sliding windows (avg: count_include_pad=False)."""

import numpy as np
import pytest
from numpy.lib.stride_tricks import sliding_window_view

from tensortune import ops, te
from tensortune.errors import DSLError
from tensortune.te.reference import evaluate


def windows(x, window, stride, pads, fill):
    """[N, C, P, Q, R, S] windows of NCHW ``x`` padded with ``fill``."""
    top, left, bottom, right = pads
    xp = np.pad(x, ((0, 0), (0, 0), (top, bottom), (left, right)), constant_values=fill)
    return sliding_window_view(xp, window, axis=(2, 3))[:, :, :: stride[0], :: stride[1]]


def max_pool_numpy(x, window, stride, pads):
    return windows(x, window, stride, pads, -np.inf).max(axis=(4, 5))


def avg_pool_numpy(x, window, stride, pads):
    total = windows(x.astype(np.float64), window, stride, pads, 0).sum(axis=(4, 5))
    count = windows(np.ones_like(x, np.float64), window, stride, pads, 0).sum(axis=(4, 5))
    return total / count


def pool(op, x, layout, **kw):
    data = x if layout == "NCHW" else x.transpose(0, 2, 3, 1).copy()
    t = te.placeholder(data.shape, name="X")
    out = op(t, layout=layout, **kw)
    got = evaluate(out, {t: data})
    return out, (got if layout == "NCHW" else got.transpose(0, 3, 1, 2))


CASES = [
    dict(kernel_size=2),
    dict(kernel_size=3, stride=2, padding=1),
    dict(kernel_size=(3, 2), stride=(1, 2), padding=(1, 0, 2, 1)),
    dict(kernel_size=3, stride=1, padding=2),
]


def _args(kw):
    window = kw["kernel_size"]
    window = (window, window) if isinstance(window, int) else window
    stride = kw.get("stride", window)
    stride = (stride, stride) if isinstance(stride, int) else stride
    pads = kw.get("padding", 0)
    pads = (pads,) * 4 if isinstance(pads, int) else pads
    return window, stride, pads


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("kw", CASES, ids=str)
def test_max_pool2d(rand, layout, kw):
    x = rand(2, 3, 7, 8)
    out, got = pool(ops.max_pool2d, x, layout, **kw)
    assert out.tag == "pool"
    np.testing.assert_array_equal(got, max_pool_numpy(x, *_args(kw)))


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("kw", CASES, ids=str)
def test_avg_pool2d_excludes_padding_from_the_count(rand, layout, kw):
    x = rand(2, 3, 7, 8)
    _, got = pool(ops.avg_pool2d, x, layout, **kw)
    np.testing.assert_allclose(got, avg_pool_numpy(x, *_args(kw)), rtol=1e-5, atol=1e-6)


def test_max_pool_of_negative_values_ignores_padding():
    x = -np.ones((1, 1, 3, 3), np.float32) * 5
    _, got = pool(ops.max_pool2d, x, "NCHW", kernel_size=3, stride=1, padding=1)
    np.testing.assert_array_equal(got, np.full((1, 1, 3, 3), -5))


def test_pool_stage_structure():
    x = te.placeholder((1, 2, 6, 6), name="X")
    mp = ops.max_pool2d(x, 3, 2, 1)
    assert [a.name for a in mp.axes] == ["n", "c", "p", "q"]
    assert [a.name for a in mp.reduce_axes] == ["r", "s"]
    assert mp.inputs[0].tag == "pad" and mp.inputs[0].inputs == (x,)
    ap = ops.avg_pool2d(x, 2)
    (total,) = ap.inputs
    assert total.name == "avg_pool2d_sum" and total.tag == "pool" and total.inputs == (x,)
    assert ap.tag == "elementwise"


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_global_avg_pool(rand, layout):
    x = rand(2, 3, 5, 4)
    out, got = pool(ops.global_avg_pool, x, layout)
    assert out.tag == "pool"
    assert out.shape == ((2, 3, 1, 1) if layout == "NCHW" else (2, 1, 1, 3))
    np.testing.assert_allclose(got, x.mean(axis=(2, 3), keepdims=True), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    ("op", "kw", "message"),
    [
        (ops.max_pool2d, dict(kernel_size=0), "max_pool2d: kernel_size must be an int >= 1"),
        (ops.max_pool2d, dict(kernel_size=2, padding=2), r"padding \(2, 2, 2, 2\) must be smaller"),
        (ops.avg_pool2d, dict(kernel_size=3, padding=(0, 3)), "must be smaller than the window"),
        (ops.avg_pool2d, dict(kernel_size=2, stride=0), "stride must be an int >= 1"),
        (ops.max_pool2d, dict(kernel_size=9), "window does not fit: input H=6"),
        (ops.max_pool2d, dict(kernel_size=2, layout="HWCN"), "layout must be one of NCHW"),
        (ops.global_avg_pool, dict(layout="nchw"), "layout must be one of NCHW"),
    ],
)
def test_pool_argument_errors(op, kw, message):
    with pytest.raises(DSLError, match=message):
        op(te.placeholder((1, 2, 6, 6), name="X"), **kw)


def test_avg_pool_needs_floats():
    with pytest.raises(DSLError, match="avg_pool2d: data must be float32 or float64"):
        ops.avg_pool2d(te.placeholder((1, 1, 4, 4), "int32"), 2)
