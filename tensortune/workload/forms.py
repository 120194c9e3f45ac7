"""The spec forms tensortune knows (matmul, conv2d, softmax...): keys, defaults, the DSL program
each builds from ``tensortune.ops`` and its FLOP count."""

from __future__ import annotations

import math

from .. import ops, te
from ..te import Tensor
from .spec import Built, Param, Params, _Bad, _Key, _Op

EPILOGUES = ("bias+relu", "bias+gelu", "relu")


def _ints(*names: str) -> tuple[_Key, ...]:
    return tuple(_Key(n) for n in names)


_BATCH = _Key("N", 1)
_STRIDE, _PAD, _DILATION = _Key("stride", 1), _Key("pad", 0, minimum=0), _Key("dilation", 1)
_LAYOUT = _Key("layout", "NCHW", choices=("NCHW", "NHWC"))
_EPILOGUE = _Key("epilogue", choices=EPILOGUES, optional=True)


def _epilogue(
    inputs: tuple[Tensor, ...], out: Tensor, kind: Param | None, axis: int
) -> tuple[tuple[Tensor, ...], tuple[Tensor, ...]]:
    """Append the optional bias (a trailing input, one value per ``axis`` entry) and activation."""
    if kind is None:
        return inputs, (out,)
    if str(kind).startswith("bias+"):
        bias = te.placeholder((out.shape[axis],), out.dtype, "bias")
        out = ops.bias_add(out, bias, axis=axis)
        inputs = (*inputs, bias)
    out = ops.relu(out) if str(kind).endswith("relu") else ops.gelu(out)
    return inputs, (out,)


def _matmul(p: dict) -> Built:
    a = te.placeholder((p["M"], p["K"]), name="A")
    b = te.placeholder((p["K"], p["N"]), name="B")
    return (*_epilogue((a, b), ops.matmul(a, b), p["epilogue"], 1), 2.0 * p["M"] * p["N"] * p["K"])


def _batch_matmul(p: dict) -> Built:
    a = te.placeholder((p["B"], p["M"], p["K"]), name="A")
    b = te.placeholder((p["B"], p["K"], p["N"]), name="B")
    out = ops.batch_matmul(a, b)
    flops = 2.0 * p["B"] * p["M"] * p["N"] * p["K"]
    return (*_epilogue((a, b), out, p["epilogue"], 2), flops)


def _dense(p: dict) -> Built:
    x = te.placeholder((p["M"], p["K"]), name="X")
    w = te.placeholder((p["N"], p["K"]), name="W")
    return (*_epilogue((x, w), ops.dense(x, w), p["epilogue"], 1), 2.0 * p["M"] * p["N"] * p["K"])


def _check_output_size(p: dict) -> None:
    """Reject windows that do not fit, in the spec's own terms."""
    for extent, window, out in (("H", "R", "P"), ("W", "S", "Q")):
        dilated = p.get("dilation", 1) * (p[window] - 1) + 1
        size = (p[extent] + 2 * p["pad"] - dilated) // p["stride"] + 1
        if size <= 0:
            raise _Bad(
                f"output {out} would be {size}: {extent} + 2*pad = {p[extent] + 2 * p['pad']} is "
                f"smaller than the {'dilated ' if dilated != p[window] else ''}window {dilated}"
            )


def _conv2d(p: dict) -> Built:
    n, c, k, g = p["N"], p["C"], p["K"], p["groups"]
    if c % g or k % g:
        raise _Bad(f"groups={g} must divide both C={c} and K={k}")
    _check_output_size(p)
    if p["layout"] == "NCHW":
        x = te.placeholder((n, c, p["H"], p["W"]), name="X")
        w = te.placeholder((k, c // g, p["R"], p["S"]), name="W")
    else:
        x = te.placeholder((n, p["H"], p["W"], c), name="X")
        w = te.placeholder((p["R"], p["S"], c // g, k), name="W")
    out = ops.conv2d(x, w, p["stride"], p["pad"], p["dilation"], g, p["layout"])
    # every output element is a dot product of length (C/groups)*R*S
    flops = 2.0 * math.prod(out.shape) * (c // g) * p["R"] * p["S"]
    channel_axis = 1 if p["layout"] == "NCHW" else 3
    return (*_epilogue((x, w), out, p["epilogue"], channel_axis), flops)


def _maxpool2d(p: dict) -> Built:
    if p["pad"] >= min(p["R"], p["S"]):
        raise _Bad(f"pad={p['pad']} must be smaller than the window R={p['R']}, S={p['S']}")
    _check_output_size(p)
    n, c, h, w = p["N"], p["C"], p["H"], p["W"]
    x = te.placeholder((n, c, h, w) if p["layout"] == "NCHW" else (n, h, w, c), name="X")
    out = ops.max_pool2d(x, (p["R"], p["S"]), p["stride"], p["pad"], p["layout"])
    return (x,), (out,), float(math.prod(out.shape) * p["R"] * p["S"])


def _softmax(p: dict) -> Built:
    x = te.placeholder((p["rows"], p["cols"]), name="X")
    # max, subtract, exp, sum, divide: 5 operations per element
    return (x,), (ops.softmax(x),), 5.0 * p["rows"] * p["cols"]


def _layernorm(p: dict) -> Built:
    x = te.placeholder((p["rows"], p["cols"]), name="X")
    gamma = te.placeholder((p["cols"],), name="gamma")
    beta = te.placeholder((p["cols"],), name="beta")
    # mean 2 (scale, add), variance 4 (sub, square, scale, add), normalise 4 per element
    return (x, gamma, beta), (ops.layer_norm(x, gamma, beta, 1e-5),), 10.0 * p["rows"] * p["cols"]


def _depthwise(p: Params) -> Params:
    """A depthwise spec as the conv2d params it abbreviates (one group per channel)."""
    full = {**p, "K": p["C"], "groups": p["C"]}
    return {k.name: full[k.name] for k in _CONV_KEYS}


_CONV_KEYS = (
    _BATCH,
    *_ints("C", "H", "W", "K", "R", "S"),
    _STRIDE,
    _PAD,
    _DILATION,
    _Key("groups", 1),
    _LAYOUT,
    _EPILOGUE,
)
_OPS = {
    op.name: op
    for op in (
        _Op("matmul", (*_ints("M", "N", "K"), _EPILOGUE), _matmul),
        _Op("batch_matmul", (*_ints("B", "M", "N", "K"), _EPILOGUE), _batch_matmul),
        _Op("dense", (*_ints("M", "N", "K"), _EPILOGUE), _dense),
        _Op("conv2d", _CONV_KEYS, _conv2d),
        _Op(
            "depthwise_conv2d",
            (_BATCH, *_ints("C", "H", "W", "R", "S"), _STRIDE, _PAD, _DILATION, _LAYOUT, _EPILOGUE),
            _conv2d,
            alias_of="conv2d",
            resolve=_depthwise,
        ),
        _Op(
            "maxpool2d",
            (_BATCH, *_ints("C", "H", "W", "R", "S"), _STRIDE, _PAD, _LAYOUT),
            _maxpool2d,
        ),
        _Op("softmax", _ints("rows", "cols"), _softmax),
        _Op("layernorm", _ints("rows", "cols"), _layernorm),
    )
}
