"""Workload spec parsing: every form, defaults, canonical names, epilogues and error messages."""

import math

import numpy as np
import pytest

from tensortune.errors import SpecError, TensorTuneError
from tensortune.workload import EPILOGUES, Workload, workload

ERF = np.vectorize(math.erf)
MATMUL_FORM = "matmul:M=<int>,N=<int>,K=<int>[,epilogue=bias+relu|bias+gelu|relu]"


def conv_numpy(x, w, stride, pad, groups):
    """NCHW direct convolution in float64 (dilation 1)."""
    n, _, h, wd = x.shape
    k, cg, r, s = w.shape
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    p, q = (h + 2 * pad - r) // stride + 1, (wd + 2 * pad - s) // stride + 1
    out = np.zeros((n, k, p, q))
    for ko in range(k):
        g = ko // (k // groups)
        for i in range(r):
            for j in range(s):
                patch = xp[:, g * cg : (g + 1) * cg, i : i + stride * (p - 1) + 1 : stride]
                patch = patch[..., j : j + stride * (q - 1) + 1 : stride]
                out[:, ko] += np.einsum("ncpq,c->npq", patch, w[ko, :, i, j])
    return out


@pytest.mark.parametrize(
    ("spec", "name", "in_shapes", "out_shape", "flops"),
    [
        ("matmul:M=12,N=4,K=8", "matmul:M=12,N=4,K=8", [(12, 8), (8, 4)], (12, 4), 2 * 12 * 4 * 8),
        (
            "batch_matmul:B=3,M=5,N=2,K=7",
            "batch_matmul:B=3,M=5,N=2,K=7",
            [(3, 5, 7), (3, 7, 2)],
            (3, 5, 2),
            2 * 3 * 5 * 2 * 7,
        ),
        ("dense:M=4,N=6,K=5", "dense:M=4,N=6,K=5", [(4, 5), (6, 5)], (4, 6), 2 * 4 * 6 * 5),
        (
            "conv2d:C=4,H=9,W=9,K=6,R=3,S=3",
            "conv2d:N=1,C=4,H=9,W=9,K=6,R=3,S=3,stride=1,pad=0,dilation=1,groups=1,layout=NCHW",
            [(1, 4, 9, 9), (6, 4, 3, 3)],
            (1, 6, 7, 7),
            2 * 6 * 7 * 7 * 4 * 9,
        ),
        (
            "conv2d:N=2,C=4,H=9,W=8,K=6,R=3,S=1,stride=2,pad=1,dilation=1,groups=2,layout=NHWC",
            "conv2d:N=2,C=4,H=9,W=8,K=6,R=3,S=1,stride=2,pad=1,dilation=1,groups=2,layout=NHWC",
            [(2, 9, 8, 4), (3, 1, 2, 6)],
            (2, 5, 5, 6),
            2 * 2 * 5 * 5 * 6 * 2 * 3,
        ),
        (
            "conv2d:C=3,H=9,W=9,K=3,R=3,S=3,dilation=2,pad=2",
            "conv2d:N=1,C=3,H=9,W=9,K=3,R=3,S=3,stride=1,pad=2,dilation=2,groups=1,layout=NCHW",
            [(1, 3, 9, 9), (3, 3, 3, 3)],
            (1, 3, 9, 9),
            2 * 3 * 81 * 27,
        ),
        (
            "maxpool2d:C=3,H=8,W=8,R=3,S=3,stride=2,pad=1",
            "maxpool2d:N=1,C=3,H=8,W=8,R=3,S=3,stride=2,pad=1,layout=NCHW",
            [(1, 3, 8, 8)],
            (1, 3, 4, 4),
            3 * 16 * 9,
        ),
        ("softmax:rows=3,cols=10", "softmax:rows=3,cols=10", [(3, 10)], (3, 10), 5 * 30),
        (
            "layernorm:rows=3,cols=10",
            "layernorm:rows=3,cols=10",
            [(3, 10), (10,), (10,)],
            (3, 10),
            10 * 30,
        ),
    ],
)
def test_spec_forms(spec, name, in_shapes, out_shape, flops):
    w = workload(spec)
    assert w.name == name and str(w) == name
    assert w.op == name.split(":")[0]
    assert list(w.input_shapes) == in_shapes and w.output_shapes == (out_shape,)
    assert w.flops == flops
    assert workload(w.name) == w  # the canonical name parses back to itself


def test_params_are_frozen_and_hashable():
    w = workload("conv2d:C=4,H=9,W=9,K=6,R=3,S=3")
    assert isinstance(w.params, tuple) and dict(w.params)["stride"] == 1
    assert w.param("layout") == "NCHW" and w.param("N") == 1
    with pytest.raises(KeyError, match="no parameter 'epilogue'"):
        w.param("epilogue")
    assert len({w, workload(w.name), workload("matmul:M=1,N=1,K=1")}) == 2


def test_order_whitespace_and_case_insensitive():
    a = workload("matmul:M=12,N=4,K=8")
    assert workload("  matmul : K = 8 , M=12,\tN=4 ,") == a
    assert workload("MatMul:m=12,n=4,k=8") == a
    assert workload("conv2d:C=4,H=9,W=9,K=6,R=3,S=3,layout=nhwc").param("layout") == "NHWC"


def test_depthwise_is_a_conv2d_with_one_group_per_channel():
    w = workload("depthwise_conv2d:C=8,H=10,W=10,R=3,S=3,stride=2,pad=1")
    assert w.op == "conv2d"
    assert w.name == (
        "conv2d:N=1,C=8,H=10,W=10,K=8,R=3,S=3,stride=2,pad=1,dilation=1,groups=8,layout=NCHW"
    )
    assert w == workload(w.name)
    assert w.input_shapes == ((1, 8, 10, 10), (8, 1, 3, 3))
    x, k = w.random_inputs()
    np.testing.assert_allclose(w.reference([x, k]), conv_numpy(x, k, 2, 1, 8), rtol=1e-5, atol=1e-5)


def test_conv2d_reference_matches_numpy():
    w = workload("conv2d:N=2,C=6,H=7,W=6,K=4,R=3,S=2,stride=2,pad=1,groups=2")
    x, k = w.random_inputs(seed=3)
    np.testing.assert_allclose(w.reference([x, k]), conv_numpy(x, k, 2, 1, 2), rtol=1e-5, atol=1e-5)


ACTIVATIONS = {
    "relu": lambda y: np.maximum(y, 0),
    "gelu": lambda y: 0.5 * y * (1 + ERF(y / 2**0.5)),
}


@pytest.mark.parametrize("epilogue", EPILOGUES)
def test_matmul_epilogues(epilogue):
    w = workload(f"matmul:M=5,N=6,K=7,epilogue={epilogue}")
    assert w.name == f"matmul:M=5,N=6,K=7,epilogue={epilogue}"
    assert w != workload("matmul:M=5,N=6,K=7")
    has_bias = epilogue.startswith("bias")
    assert w.input_shapes == ((5, 7), (7, 6), *([(6,)] if has_bias else []))
    assert w.flops == 2 * 5 * 6 * 7
    arrays = w.random_inputs()
    y = arrays[0].astype(np.float64) @ arrays[1]
    if has_bias:
        y = y + arrays[2]
    want = ACTIVATIONS[epilogue.rpartition("+")[2]](y)
    np.testing.assert_allclose(w.reference(arrays), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_conv2d_bias_epilogue_is_per_output_channel(layout):
    w = workload(f"conv2d:C=3,H=6,W=6,K=5,R=3,S=3,pad=1,layout={layout},epilogue=bias+relu")
    assert w.input_shapes[-1] == (5,)
    x, k, b = w.random_inputs()
    if layout == "NHWC":
        x, k = x.transpose(0, 3, 1, 2), k.transpose(3, 2, 0, 1)
    want = np.maximum(conv_numpy(x, k, 1, 1, 1) + b[:, None, None], 0)
    got = w.reference(w.random_inputs())
    got = got if layout == "NCHW" else got.transpose(0, 3, 1, 2)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_batch_matmul_and_dense_epilogues():
    w = workload("batch_matmul:B=2,M=3,N=4,K=5,epilogue=bias+gelu")
    a, b, bias = w.random_inputs()
    y = a.astype(np.float64) @ b + bias
    np.testing.assert_allclose(w.reference([a, b, bias]), ACTIVATIONS["gelu"](y), atol=1e-6)
    d = workload("dense:M=3,N=4,K=5,epilogue=relu")
    x, wt = d.random_inputs()
    np.testing.assert_allclose(d.reference([x, wt]), np.maximum(x @ wt.T, 0), atol=1e-6)


def test_softmax_layernorm_maxpool_references():
    s = workload("softmax:rows=4,cols=9")
    (x,) = s.random_inputs()
    e = np.exp(x - x.max(1, keepdims=True))
    np.testing.assert_allclose(s.reference([x]), e / e.sum(1, keepdims=True), rtol=1e-5)
    ln = workload("layernorm:rows=4,cols=9")
    x, g, b = ln.random_inputs()
    mu, var = x.mean(1, keepdims=True), x.var(1, keepdims=True)
    want = (x - mu) / np.sqrt(var + 1e-5) * g + b
    np.testing.assert_allclose(ln.reference([x, g, b]), want, rtol=1e-4, atol=1e-5)
    mp = workload("maxpool2d:C=2,H=5,W=5,R=2,S=2,stride=2")
    (x,) = mp.random_inputs()
    np.testing.assert_array_equal(
        mp.reference([x]), x[:, :, :4, :4].reshape(1, 2, 2, 2, 2, 2).max((3, 5))
    )


def test_random_inputs_are_deterministic_float32_in_range():
    w = workload("matmul:M=30,N=20,K=10,epilogue=bias+relu")
    first, again, other = w.random_inputs(), w.random_inputs(0), w.random_inputs(seed=1)
    assert [a.dtype for a in first] == [np.float32] * 3
    assert all(np.array_equal(a, b) for a, b in zip(first, again, strict=True))
    assert not np.array_equal(first[0], other[0])
    assert all(a.min() >= -1 and a.max() < 1 for a in first)


def test_reference_checks_the_number_of_inputs():
    w = workload("matmul:M=2,N=2,K=2")
    with pytest.raises(TensorTuneError, match=r"takes 2 inputs \(A, B\), got 1"):
        w.reference(w.random_inputs()[:1])
    by_name = dict(zip(["A", "B"], w.random_inputs(), strict=True))
    np.testing.assert_array_equal(w.reference(by_name), w.reference(w.random_inputs()))


def test_workload_is_a_frozen_dataclass():
    w = workload("softmax:rows=2,cols=3")
    assert isinstance(w, Workload)
    with pytest.raises(AttributeError):
        w.name = "other"  # type: ignore[misc]


CONV = "conv2d:C=8,H=9,W=9,K=4,R=3,S=3"


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        ("matmul:M=12,N=x,K=4", "N must be a positive integer, got 'x'"),
        ("matmul:M=0,N=4,K=4", "M must be a positive integer, got '0'"),
        ("matmul:M=-3,N=4,K=4", "M must be a positive integer, got '-3'"),
        ("matmul:M=1.5,N=4,K=4", "M must be a positive integer, got '1.5'"),
        ("matmul:M=,N=4,K=4", "M must be a positive integer, got ''"),
        ("matmul:M=2,K=4", "missing N"),
        ("matmul", "missing M, N, K"),
        ("matmul:M=2,N=2,K=2,Z=3", "unknown key 'Z'"),
        ("matmul:M=2,N=2,K=2,M=3", "M is given twice"),
        ("matmul:M=2,N2,K=2", "'N2' is not key=value"),
        ("matmul:M=2,N=2,K=2,epilogue=bias", "epilogue must be one of bias+relu, bias+gelu, relu"),
        (f"{CONV},pad=-1", "pad must be a non-negative integer, got '-1'"),
        (f"{CONV},stride=0", "stride must be a positive integer"),
        (f"{CONV},layout=NCWH", "layout must be one of NCHW, NHWC, got 'NCWH'"),
        (f"{CONV},groups=3", "groups=3 must divide both C=8 and K=4"),
        (f"{CONV},groups=8", "groups=8 must divide both C=8 and K=4"),
        (
            "conv2d:C=8,H=2,W=9,K=4,R=3,S=3",
            "output P would be 0: H + 2*pad = 2 is smaller than the window 3",
        ),
        (
            f"{CONV},dilation=5",
            "output P would be -1: H + 2*pad = 9 is smaller than the dilated window 11",
        ),
        ("conv2d:C=8,H=9,W=1,K=4,R=3,S=2,pad=0", "output Q would be 0: W + 2*pad = 1"),
        ("maxpool2d:C=3,H=1,W=8,R=3,S=3,stride=2", "output P would be 0"),
        ("depthwise_conv2d:C=8,H=9,W=9,R=3,S=3,K=8", "unknown key 'K'"),
        ("maxpool2d:C=3,H=8,W=8,R=2,S=2,pad=2", "pad=2 must be smaller than the window R=2, S=2"),
        ("maxpool2d:C=3,H=8,W=8,R=2,S=2,epilogue=relu", "unknown key 'epilogue'"),
        ("softmax:rows=3", "missing cols"),
        ("layernorm:rows=3,cols=4,eps=1", "unknown key 'eps'"),
    ],
)
def test_malformed_specs_raise_one_readable_spec_error(spec, problem):
    with pytest.raises(SpecError) as info:
        workload(spec)
    message = str(info.value)
    assert message.startswith(f"bad workload spec {spec!r}: {problem}"), message
    op = spec.partition(":")[0]
    assert f"; accepted form: {op}:" in message
    assert info.value.__cause__ is None and info.value.__suppress_context__


def test_spec_error_message_shows_the_form_exactly():
    with pytest.raises(SpecError) as info:
        workload("matmul:M=12,N=x,K=4")
    assert str(info.value) == (
        "bad workload spec 'matmul:M=12,N=x,K=4': N must be a positive integer, got 'x'; "
        f"accepted form: {MATMUL_FORM}"
    )


def test_conv_form_lists_optional_keys_and_defaults():
    with pytest.raises(SpecError) as info:
        workload("conv2d:C=1")
    assert str(info.value).endswith(
        "accepted form: conv2d:C=<int>,H=<int>,W=<int>,K=<int>,R=<int>,S=<int>[,N=<int>]"
        "[,stride=<int>][,pad=<int>][,dilation=<int>][,groups=<int>][,layout=NCHW|NHWC]"
        "[,epilogue=bias+relu|bias+gelu|relu] "
        "(defaults: N=1, stride=1, pad=0, dilation=1, groups=1, layout=NCHW)"
    )


@pytest.mark.parametrize("spec", ["conv3d:C=1", "", ":M=1", "mat mul:M=1"])
def test_unknown_op_lists_known_ops(spec):
    with pytest.raises(
        SpecError,
        match=r"unknown op .*; known ops: batch_matmul, conv2d, dense, "
        r"depthwise_conv2d, layernorm, matmul, maxpool2d, softmax$",
    ):
        workload(spec)


def test_spec_must_be_a_string():
    with pytest.raises(SpecError, match="must be a string, got int"):
        workload(3)  # type: ignore[arg-type]
    assert issubclass(SpecError, ValueError)


def test_the_docstring_names_every_spec_form():
    """``help(tt.workload)`` is where a user learns the forms: a new one must be listed there."""
    from tensortune.workload import _OPS

    for op in _OPS:
        assert f"``{op}:" in workload.__doc__, op
    for epilogue in EPILOGUES:
        assert epilogue in workload.__doc__
