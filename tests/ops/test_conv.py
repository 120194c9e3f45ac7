"""conv2d against an explicit NumPy einsum over padded, strided, dilated windows."""

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from tensortune import ops, te
from tensortune.errors import DSLError
from tensortune.te.reference import evaluate


def conv_nchw_numpy(x, w, stride=(1, 1), pads=(0, 0, 0, 0), dilation=(1, 1), groups=1):
    """Direct float64 convolution: gather every (r, s) window slice, then one einsum per group."""
    (sh, sw), (dh, dw), (top, left, bottom, right) = stride, dilation, pads
    n, c, _, _ = x.shape
    k, cg, r, s = w.shape
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (top, bottom), (left, right)))
    p = (xp.shape[2] - dh * (r - 1) - 1) // sh + 1
    q = (xp.shape[3] - dw * (s - 1) - 1) // sw + 1
    windows = np.empty((n, c, p, q, r, s))
    for i in range(r):
        for j in range(s):
            windows[..., i, j] = xp[
                :,
                :,
                i * dh : i * dh + sh * (p - 1) + 1 : sh,
                j * dw : j * dw + sw * (q - 1) + 1 : sw,
            ]
    windows = windows.reshape(n, groups, cg, p, q, r, s)
    kernel = w.astype(np.float64).reshape(groups, k // groups, cg, r, s)
    return np.einsum("ngcpqrs,gkcrs->ngkpq", windows, kernel).reshape(n, k, p, q)


def run_conv(rand, layout, n, c, h, w, k, r, s, **kw):
    groups = kw.get("groups", 1)
    x, wt = rand(n, c, h, w), rand(k, c // groups, r, s)
    if layout == "NCHW":
        xt, wtt = te.placeholder(x.shape, name="X"), te.placeholder(wt.shape, name="W")
        out = ops.conv2d(xt, wtt, layout=layout, **kw)
        got = evaluate(out, {xt: x, wtt: wt})
    else:
        x_nhwc, w_rsck = x.transpose(0, 2, 3, 1).copy(), wt.transpose(2, 3, 1, 0).copy()
        xt, wtt = te.placeholder(x_nhwc.shape, name="X"), te.placeholder(w_rsck.shape, name="W")
        out = ops.conv2d(xt, wtt, layout=layout, **kw)
        got = evaluate(out, {xt: x_nhwc, wtt: w_rsck}).transpose(0, 3, 1, 2)
    pads = kw.get("padding", 0)
    pads = (pads,) * 4 if isinstance(pads, int) else pads * 2 if len(pads) == 2 else pads
    pair = {key: (v, v) if isinstance(v, int) else v for key, v in kw.items()}
    want = conv_nchw_numpy(
        x, wt, pair.get("stride", (1, 1)), pads, pair.get("dilation", (1, 1)), groups
    )
    return out, got, want


CASES = [
    dict(),
    dict(stride=2),
    dict(padding=1),
    dict(stride=2, padding=1),
    dict(dilation=2, padding=2),
    dict(stride=(2, 1), padding=(1, 2, 0, 1), dilation=(1, 2)),
    dict(groups=2),
    dict(groups=4, stride=2, padding=1),  # depthwise: groups == C == K
]


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("kw", CASES, ids=lambda kw: ",".join(f"{k}={v}" for k, v in kw.items()))
def test_conv2d_matches_numpy(rand, layout, kw):
    out, got, want = run_conv(rand, layout, 2, 4, 7, 9, 4, 3, 3, **kw)
    assert out.dtype == "float32" and out.tag == "conv2d"
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_depthwise_with_channel_multiplier(rand):
    """groups == C with K = 2C: each input channel feeds two output channels."""
    _, got, want = run_conv(rand, "NCHW", 1, 3, 6, 6, 6, 3, 3, groups=3, padding=1)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_depthwise_conv2d_helper(rand):
    x, w = rand(1, 5, 8, 8), rand(5, 1, 3, 3)
    xt, wt = te.placeholder(x.shape, name="X"), te.placeholder(w.shape, name="W")
    out = ops.depthwise_conv2d(xt, wt, stride=2, padding=1)
    assert out.attrs["groups"] == 5
    want = conv_nchw_numpy(x, w, (2, 2), (1, 1, 1, 1), groups=5)
    np.testing.assert_allclose(evaluate(out, {xt: x, wt: w}), want, rtol=1e-5, atol=1e-5)


def test_pointwise_conv_is_a_matmul(rand):
    _, got, want = run_conv(rand, "NHWC", 1, 8, 5, 5, 3, 1, 1)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_stage_structure_and_names():
    x, w = te.placeholder((1, 4, 8, 8), name="X"), te.placeholder((6, 4, 3, 3), name="W")
    out = ops.conv2d(x, w, padding=1)
    assert [a.name for a in out.axes] == ["n", "k", "p", "q"]
    assert [a.name for a in out.reduce_axes] == ["c", "r", "s"]
    pad = out.inputs[0]
    assert pad.tag == "pad" and pad.name == "X_pad" and pad.shape == (1, 4, 10, 10)
    assert pad.inputs == (x,)
    assert out.attrs == {
        "stride": (1, 1),
        "padding": (1, 1, 1, 1),
        "dilation": (1, 1),
        "groups": 1,
        "layout": "NCHW",
    }
    unpadded = ops.conv2d(x, w)
    assert unpadded.inputs == (x, w) and unpadded.shape == (1, 6, 6, 6)
    nhwc = ops.conv2d(te.placeholder((1, 8, 8, 4)), te.placeholder((3, 3, 4, 6)), layout="NHWC")
    assert [a.name for a in nhwc.axes] == ["n", "p", "q", "k"]


@pytest.mark.parametrize(
    ("kernel_shape", "kw", "message"),
    [
        ((6, 4, 3, 3), dict(layout="NCWH"), "layout must be one of NCHW, NHWC"),
        ((6, 4, 3, 3), dict(stride=0), "stride must be an int >= 1"),
        ((6, 4, 3, 3), dict(dilation=(1, 2, 3)), "dilation must be an int >= 1 or a sequence"),
        ((6, 4, 3, 3), dict(padding=(1, 2, 3)), "padding must be an int >= 0, a"),
        ((6, 4, 3, 3), dict(padding=-1), "padding must be"),
        ((6, 2, 3, 3), dict(groups=3), "groups=3 must divide both the input channels C=4"),
        ((6, 2, 3, 3), dict(groups=0), "groups must be an int >= 1"),
        ((6, 3, 3, 3), dict(), r"kernel must be \[K, C/groups, R, S\] = C/groups=4"),
        ((6, 4, 9, 3), dict(), "window does not fit: input H=8"),
        ((6, 4, 3, 3), dict(dilation=4), "smaller than the dilated window 9"),
    ],
)
def test_conv2d_argument_errors(kernel_shape, kw, message):
    x = te.placeholder((1, 4, 8, 8), name="X")
    with pytest.raises(DSLError, match=message):
        ops.conv2d(x, te.placeholder(kernel_shape, name="W"), **kw)


def test_conv2d_rejects_non_tensors_and_wrong_rank():
    with pytest.raises(DSLError, match="conv2d: data must be a Tensor"):
        ops.conv2d(np.zeros((1, 1, 3, 3)), te.placeholder((1, 1, 1, 1)))
    with pytest.raises(DSLError, match="kernel must be 4-D"):
        ops.conv2d(te.placeholder((1, 1, 3, 3)), te.placeholder((1, 1)))


@settings(max_examples=25, deadline=None)
@given(
    data=st.data(),
    n=st.sampled_from([1, 2]),
    hw=st.tuples(st.sampled_from([1, 2, 3, 5, 7]), st.sampled_from([1, 2, 3, 5, 7])),
    groups=st.sampled_from([1, 2, 3]),
    layout=st.sampled_from(["NCHW", "NHWC"]),
    seed=st.integers(0, 2**16),
)
def test_property_conv2d(data, n, hw, groups, layout, seed):
    cg, kg = data.draw(st.sampled_from([1, 2])), data.draw(st.sampled_from([1, 2, 3]))
    r, s = data.draw(st.sampled_from([1, 2, 3])), data.draw(st.sampled_from([1, 3]))
    stride = data.draw(st.sampled_from([1, 2, 3]))
    dilation = data.draw(st.sampled_from([1, 2]))
    pad = data.draw(st.sampled_from([0, 1, 2]))
    h, w = hw
    # windows that do not fit are covered by the error tests
    assume(h + 2 * pad >= dilation * (r - 1) + 1 and w + 2 * pad >= dilation * (s - 1) + 1)
    rng = np.random.default_rng(seed)

    def draw(*shape):
        return rng.uniform(-1, 1, shape).astype(np.float32)

    _, got, want = run_conv(
        draw, layout, n, cg * groups, h, w, kg * groups, r, s,
        stride=stride, padding=pad, dilation=dilation, groups=groups,
    )  # fmt: skip
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
