"""NumPy semantics of every supported operator: the oracle for compiled models and the
evaluator constant folding runs (one definition of what an op means, used by both)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from .attributes import optional_ints, pool_geometry
from .errors import ModelError
from .ir import Graph, Node

Arrays = list[np.ndarray | None]
OpFn = Callable[[Node, Arrays], list[np.ndarray]]

try:  # scipy's erf is vectorised; math.erf per element is the fallback
    from scipy.special import erf as _erf
except ImportError:  # pragma: no cover
    _erf = np.vectorize(math.erf, otypes=[np.float64])


def _req(a: Arrays, i: int) -> np.ndarray:
    """Input ``i``, which the op requires (run_node reports a missing one as a ModelError)."""
    x = a[i]
    if x is None:
        raise TypeError(f"required input {i} is missing")
    return x


def erf(x: np.ndarray) -> np.ndarray:
    return np.asarray(_erf(x)).astype(x.dtype)


def _windows(
    x: np.ndarray,
    kernel: Sequence[int],
    strides: Sequence[int],
    dilations: Sequence[int],
    begin: Sequence[int],
    end: Sequence[int],
    fill: float,
) -> np.ndarray:
    """[N, C, P, Q, R, S] view of the (padded) windows of ``x``."""
    width = [(0, 0), (0, 0), *zip(begin, end, strict=True)]
    x = np.pad(x, width, constant_values=fill)
    span = [d * (k - 1) + 1 for k, d in zip(kernel, dilations, strict=True)]
    w = sliding_window_view(x, span, axis=(2, 3))
    return w[:, :, :: strides[0], :: strides[1], :: dilations[0], :: dilations[1]]


def _conv(node: Node, a: Arrays) -> list[np.ndarray]:
    x, w, b = _req(a, 0), _req(a, 1), a[2] if len(a) > 2 else None
    if x.ndim != 4:
        raise ModelError(
            f"Conv '{node.name}': only 2-D convolutions are supported, got {x.ndim - 2}-D"
        )
    group = int(node.attr("group", 1))
    strides, dil, begin, end = pool_geometry(node, x.shape, w.shape[2:])
    win = _windows(x, w.shape[2:], strides, dil, begin, end, 0.0)
    cg, kg = x.shape[1] // group, w.shape[0] // group
    outs = [
        np.einsum("ncpqrs,kcrs->nkpq", win[:, g * cg : (g + 1) * cg], w[g * kg : (g + 1) * kg])
        for g in range(group)
    ]
    y = np.concatenate(outs, axis=1)
    if b is not None:
        y = y + b.reshape(1, -1, 1, 1)
    return [y.astype(x.dtype)]


def _maxpool(node: Node, a: Arrays) -> list[np.ndarray]:
    x, kernel = _req(a, 0), node.attr("kernel_shape")
    strides, dil, begin, end = pool_geometry(node, x.shape, kernel)
    lowest = -np.inf if x.dtype.kind == "f" else np.iinfo(x.dtype).min
    return [_windows(x, kernel, strides, dil, begin, end, lowest).max(axis=(-2, -1))]


def _avgpool(node: Node, a: Arrays) -> list[np.ndarray]:
    x, kernel = _req(a, 0), node.attr("kernel_shape")
    strides, dil, begin, end = pool_geometry(node, x.shape, kernel)
    total = _windows(x, kernel, strides, dil, begin, end, 0.0).sum(axis=(-2, -1))
    real = np.ones((1, 1, *x.shape[2:]), x.dtype)
    if node.attr("count_include_pad", 0):  # explicit padding counts, a ceil-mode overhang not
        real = np.pad(real, [(0, 0), (0, 0), *zip(begin, end, strict=True)], constant_values=1)
        nominal = list(node.attr("pads") or [0] * 4)[2:]
        extra = [e - n for e, n in zip(end, nominal, strict=True)]
        real = real[:, :, : real.shape[2] - extra[0], : real.shape[3] - extra[1]]
        begin, end = [0, 0], extra
    count = _windows(real, kernel, strides, dil, begin, end, 0.0).sum(axis=(-2, -1))
    return [(total / count).astype(x.dtype)]


def _gemm(node: Node, a: Arrays) -> list[np.ndarray]:
    x, w = _req(a, 0), _req(a, 1)
    x = x.T if node.attr("transA", 0) else x
    w = w.T if node.attr("transB", 0) else w
    y = node.attr("alpha", 1.0) * (x @ w)
    if len(a) > 2 and a[2] is not None:
        y = y + node.attr("beta", 1.0) * a[2]
    return [y.astype(x.dtype)]


def _batchnorm(node: Node, a: Arrays) -> list[np.ndarray]:
    x, scale, bias, mean, var = (_req(a, i) for i in range(5))
    shape = (1, -1) + (1,) * (x.ndim - 2)
    inv = scale / np.sqrt(var + node.attr("epsilon", 1e-5))
    return [(x * inv.reshape(shape) + (bias - mean * inv).reshape(shape)).astype(x.dtype)]


def _softmax(node: Node, a: Arrays) -> list[np.ndarray]:
    x = _req(a, 0)
    axis = node.attr("axis", -1)
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return [e / e.sum(axis=axis, keepdims=True)]


def _log_softmax(node: Node, a: Arrays) -> list[np.ndarray]:
    x = _req(a, 0)
    axis = node.attr("axis", -1)
    shifted = x - x.max(axis=axis, keepdims=True)
    return [shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))]


def _trilu(node: Node, a: Arrays) -> list[np.ndarray]:
    k = int(np.asarray(a[1]).reshape(-1)[0]) if len(a) > 1 and a[1] is not None else 0
    keep = np.triu if node.attr("upper", 1) else np.tril
    return [keep(_req(a, 0), k)]


def _layernorm(node: Node, a: Arrays) -> list[np.ndarray]:
    """Y, and the Mean and InvStdDev outputs (float32, reduced axes kept as size 1)."""
    x, scale = _req(a, 0), _req(a, 1)
    axis = node.attr("axis", -1) % x.ndim
    axes = tuple(range(axis, x.ndim))
    mean = x.mean(axis=axes, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
    inv = 1 / np.sqrt(var + node.attr("epsilon", 1e-5))
    y = (x - mean) * inv * scale
    if len(a) > 2 and a[2] is not None:
        y = y + a[2]
    return [y.astype(x.dtype), mean.astype(np.float32), inv.astype(np.float32)]


def _clip(node: Node, a: Arrays) -> list[np.ndarray]:
    lo = node.attr("min", a[1] if len(a) > 1 and a[1] is not None else -np.inf)
    hi = node.attr("max", a[2] if len(a) > 2 and a[2] is not None else np.inf)
    x = _req(a, 0)
    return [np.clip(x, lo, hi).astype(x.dtype)]


def _gelu(node: Node, a: Arrays) -> list[np.ndarray]:
    x = _req(a, 0)
    if node.attr("approximate", "none") == "tanh":
        inner = math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)
        return [(0.5 * x * (1 + np.tanh(inner))).astype(x.dtype)]
    return [(0.5 * x * (1 + erf(np.asarray(x / math.sqrt(2))))).astype(x.dtype)]


def _hardsigmoid(x: np.ndarray, alpha: float, beta: float) -> np.ndarray:
    return np.clip(alpha * x + beta, 0, 1).astype(x.dtype)


def _reduce(fn: Callable[..., Any]) -> OpFn:
    def op(node: Node, a: Arrays) -> list[np.ndarray]:
        axes = optional_ints(node, "axes", a, 1) or None  # empty: every axis
        keep = bool(node.attr("keepdims", 1))
        x = _req(a, 0)
        if axes is None and node.attr("noop_with_empty_axes", 0):
            return [x]
        axis = None if axes is None else tuple(axes)
        return [np.asarray(fn(x, axis=axis, keepdims=keep)).astype(x.dtype)]

    return op


REDUCTIONS: dict[str, Callable[..., Any]] = {
    "ReduceMean": np.mean,
    "ReduceSum": np.sum,
    "ReduceMax": np.max,
    "ReduceMin": np.min,
}
"""The ONNX reductions over an ``axes`` attribute or input (the input form from opset 18,
ReduceSum's from 13), by their NumPy definition."""


def _reshape(node: Node, a: Arrays) -> list[np.ndarray]:
    x, shape = _req(a, 0), [int(v) for v in _req(a, 1)]
    if not node.attr("allowzero", 0):
        shape = [x.shape[d] if v == 0 else v for d, v in enumerate(shape)]
    return [x.reshape(shape)]


def _flatten(node: Node, a: Arrays) -> list[np.ndarray]:
    x, axis = _req(a, 0), node.attr("axis", 1)
    axis = axis + x.ndim if axis < 0 else axis
    return [x.reshape(int(np.prod(x.shape[:axis])), -1)]


def _split(node: Node, a: Arrays) -> list[np.ndarray]:
    x, axis = _req(a, 0), node.attr("axis", 0)
    sizes = optional_ints(node, "split", a, 1)
    if sizes is None:
        n = len(node.outputs)
        each = -(-x.shape[axis] // n)
        sizes = [min(each, x.shape[axis] - each * i) for i in range(n)]
    return list(np.split(x, np.cumsum(sizes)[:-1], axis=axis))


def _slice(node: Node, a: Arrays) -> list[np.ndarray]:
    x = _req(a, 0)
    starts, ends = optional_ints(node, "starts", a, 1), optional_ints(node, "ends", a, 2)
    if starts is None or ends is None:
        raise TypeError("Slice needs starts and ends")
    axes = optional_ints(node, "axes", a, 3) or list(range(len(starts)))
    steps = optional_ints(node, "steps", a, 4) or [1] * len(starts)
    index: list[slice] = [slice(None)] * x.ndim
    for s, e, ax, st in zip(starts, ends, axes, steps, strict=True):
        index[ax] = slice(s, e, st)
    return [x[tuple(index)]]


def _squeeze(node: Node, a: Arrays) -> list[np.ndarray]:
    axes = optional_ints(node, "axes", a, 1)
    return [np.squeeze(_req(a, 0), axis=None if axes is None else tuple(axes))]


def _unsqueeze(node: Node, a: Arrays) -> list[np.ndarray]:
    axes = optional_ints(node, "axes", a, 1)
    if axes is None:
        raise TypeError("Unsqueeze needs axes")
    x = _req(a, 0)
    rank = x.ndim + len(axes)
    return [np.expand_dims(x, tuple(sorted(ax % rank for ax in axes)))]


def _shape(node: Node, a: Arrays) -> list[np.ndarray]:
    dims = _req(a, 0).shape[node.attr("start", 0) : node.attr("end", None)]
    return [np.array(dims, dtype=np.int64)]


def _cast(node: Node, a: Arrays) -> list[np.ndarray]:
    from .onnx_import import onnx_dtype

    return [_req(a, 0).astype(onnx_dtype(node.attr("to")))]


def _constant_of_shape(node: Node, a: Arrays) -> list[np.ndarray]:
    value = node.attr("value")
    value = np.zeros(1, np.float32) if value is None else np.asarray(value)
    return [np.full([int(v) for v in _req(a, 0)], value.reshape(-1)[0], dtype=value.dtype)]


def _unary(fn: Callable[[np.ndarray], np.ndarray]) -> OpFn:
    def op(node: Node, a: Arrays) -> list[np.ndarray]:
        x = _req(a, 0)
        return [np.asarray(fn(x)).astype(x.dtype)]

    return op


def _binary(fn: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> OpFn:
    def op(node: Node, a: Arrays) -> list[np.ndarray]:
        x, y = _req(a, 0), _req(a, 1)
        return [np.asarray(fn(x, y)).astype(np.result_type(x, y))]

    return op


def _div(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    if x.dtype.kind in "iu" and y.dtype.kind in "iu":
        return np.trunc(x / y).astype(x.dtype)
    return x / y


OPS: dict[str, OpFn] = {
    "Conv": _conv,
    "Gemm": _gemm,
    "MatMul": lambda n, a: [np.matmul(_req(a, 0), _req(a, 1))],
    "Add": _binary(np.add),
    "Sub": _binary(np.subtract),
    "Mul": _binary(np.multiply),
    "Div": _binary(_div),
    "Pow": lambda n, a: [np.power(_req(a, 0), _req(a, 1)).astype(_req(a, 0).dtype)],
    "Relu": _unary(lambda x: np.maximum(x, 0)),
    "Clip": _clip,
    "Sigmoid": _unary(lambda x: 1 / (1 + np.exp(-x))),
    "Tanh": _unary(np.tanh),
    "Erf": _unary(erf),
    "Gelu": _gelu,
    "HardSigmoid": lambda n, a: [
        _hardsigmoid(_req(a, 0), n.attr("alpha", 0.2), n.attr("beta", 0.5))
    ],
    "HardSwish": lambda n, a: [_req(a, 0) * _hardsigmoid(_req(a, 0), 1 / 6, 0.5)],
    "Sqrt": _unary(np.sqrt),
    "Exp": _unary(np.exp),
    "Neg": _unary(np.negative),
    "Reciprocal": _unary(lambda x: 1 / x),
    "Where": lambda n, a: [np.where(_req(a, 0), _req(a, 1), _req(a, 2))],
    "Equal": lambda n, a: [np.equal(_req(a, 0), _req(a, 1))],
    "Less": lambda n, a: [np.less(_req(a, 0), _req(a, 1))],
    "Greater": lambda n, a: [np.greater(_req(a, 0), _req(a, 1))],
    "LessOrEqual": lambda n, a: [np.less_equal(_req(a, 0), _req(a, 1))],
    "GreaterOrEqual": lambda n, a: [np.greater_equal(_req(a, 0), _req(a, 1))],
    "Not": lambda n, a: [np.logical_not(_req(a, 0))],
    "And": lambda n, a: [np.logical_and(_req(a, 0), _req(a, 1))],
    "Or": lambda n, a: [np.logical_or(_req(a, 0), _req(a, 1))],
    "Expand": lambda n, a: [
        np.broadcast_to(
            _req(a, 0), np.broadcast_shapes(_req(a, 0).shape, tuple(int(v) for v in _req(a, 1)))
        ).copy()
    ],
    "Cast": _cast,
    "Identity": lambda n, a: [np.asarray(a[0])],
    "Dropout": lambda n, a: [_req(a, 0), np.ones(_req(a, 0).shape, bool)],  # inference: all kept
    "BatchNormalization": _batchnorm,
    "MaxPool": _maxpool,
    "AveragePool": _avgpool,
    "GlobalAveragePool": lambda n, a: [_req(a, 0).mean(axis=(2, 3), keepdims=True)],
    **{op: _reduce(fn) for op, fn in REDUCTIONS.items()},
    "Flatten": _flatten,
    "Reshape": _reshape,
    "Transpose": lambda n, a: [np.transpose(_req(a, 0), n.attr("perm"))],
    "Softmax": _softmax,
    "LogSoftmax": _log_softmax,
    "LayerNormalization": _layernorm,
    "Concat": lambda n, a: [
        np.concatenate([_req(a, i) for i in range(len(a))], axis=n.attr("axis"))
    ],
    "Split": _split,
    "Slice": _slice,
    "Squeeze": _squeeze,
    "Unsqueeze": _unsqueeze,
    "Gather": lambda n, a: [
        np.take(_req(a, 0), _req(a, 1).astype(np.int64), axis=n.attr("axis", 0))
    ],
    "Shape": _shape,
    "ConstantOfShape": _constant_of_shape,
    "Trilu": _trilu,
}


def _nhwc(node: Node, args: Arrays) -> list[np.ndarray]:
    """A windowed op in the layout planner's NHWC form (``layout="NHWC"``): its NCHW
    definition on the inputs transposed back (a conv's weights from ``[R, S, C/g, K]``)."""
    back = [(0, 3, 1, 2), (3, 2, 0, 1)]
    moved = [
        None if v is None else v.transpose(back[k]) if k < 2 and v.ndim == 4 else v
        for k, v in enumerate(args)
    ]
    return [v.transpose(0, 2, 3, 1) for v in OPS[node.op](node, moved)]


def run_node(node: Node, args: Arrays) -> list[np.ndarray]:
    """The outputs of one node on NumPy arrays."""
    try:
        if node.attr("layout") == "NHWC":
            return _nhwc(node, args)
        return [np.asarray(v) for v in OPS[node.op](node, args)]
    except ModelError:
        raise
    except Exception as exc:
        raise ModelError(
            f"{node.op} '{node.name}' failed on inputs of shapes "
            f"{[None if x is None else x.shape for x in args]}: {exc}"
        ) from exc


def run_graph(graph: Graph, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Every graph output, evaluated node by node in NumPy."""
    env: dict[str, np.ndarray] = dict(graph.initializers)
    for info in graph.inputs:
        if info.name not in inputs:
            raise ModelError(f"missing input '{info.name}' {info.shape} {info.dtype}")
        value = np.asarray(inputs[info.name])
        if value.shape != info.shape:
            raise ModelError(f"input '{info.name}' must have shape {info.shape}, got {value.shape}")
        env[info.name] = value.astype(info.dtype, copy=False)
    for node in graph.nodes:
        outs = run_node(node, [env[i] if i else None for i in node.inputs])
        for name, value in zip(node.outputs, outs, strict=False):
            if name:
                env[name] = value
    return {v.name: env[v.name] for v in graph.outputs}


__all__ = ["OPS", "REDUCTIONS", "erf", "optional_ints", "pool_geometry", "run_graph", "run_node"]
