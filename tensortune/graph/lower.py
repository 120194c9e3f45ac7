"""Each fused group as one DSL program: the anchor from ``tensortune.ops`` and its epilogue as
elementwise computes on the anchor's result, so the generated C computes them in one kernel."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

import numpy as np

from .. import ops, te
from ..te import Expr, Tensor
from ..te.expr import as_expr
from .attributes import optional_ints, pool_geometry
from .errors import ModelError
from .ir import Graph, Node
from .layout import nchw_shape

Arg = Tensor | float
Args = list[Arg | None]  # a node's operands; None for an omitted optional input
ARITHMETIC: dict[str, Callable[..., Expr]] = {
    "Add": lambda p, q: p + q,
    "Sub": lambda p, q: p - q,
    "Mul": lambda p, q: p * q,
    "Div": lambda p, q: p / q,
}
REDUCE: dict[str, Callable[..., Tensor]] = {
    "ReduceMean": ops.reduce_mean,
    "ReduceSum": ops.reduce_sum,
    "ReduceMax": ops.reduce_max,
    "ReduceMin": ops.reduce_min,
}
BIG = 3.0e38
"""Clip's missing bound: beyond every finite float32 (C has no portable inf literal here)."""


def te_dtype(dtype: str) -> str:
    """The kernel dtype holding an ONNX value (kernels index in int32)."""
    return {"int64": "int32", "int8": "int32", "uint8": "int32", "bool": "bool"}.get(dtype, dtype)


def _unsupported(node: Node, why: str) -> ModelError:
    return ModelError(f"cannot compile {node.op} node '{node.name}' yet: {why}")


def _read(v: Arg, idx: tuple[Expr, ...]) -> Expr | float:
    """``v`` at output index ``idx`` with NumPy broadcasting (trailing dimensions aligned)."""
    if not isinstance(v, Tensor):
        return v
    tail = idx[len(idx) - v.ndim :]
    return v[tuple(te.const(0) if n == 1 else i for i, n in zip(tail, v.shape, strict=True))]


def _given(node: Node, a: Args, i: int) -> Arg:
    """Operand ``i``, which the op requires."""
    v = a[i]
    if v is None:
        raise _unsupported(node, f"input {i} is missing")
    return v


def _tensor(node: Node, a: Args, i: int) -> Tensor:
    """Operand ``i``, which must be a tensor (not a constant folded to a scalar)."""
    v = a[i]
    if not isinstance(v, Tensor):
        raise _unsupported(node, f"input {i} must be a tensor")
    return v


def _elementwise(name: str, shape: tuple[int, ...], fn: Callable[..., Expr], *args: Arg) -> Tensor:
    def body(*i: Expr) -> Expr:
        return fn(*(_read(a, i) for a in args))

    return te.compute(shape, body, name=name, tag="elementwise")


def _scalar(node: Node, v: Arg, what: str) -> float:
    if isinstance(v, Tensor):
        raise _unsupported(node, f"{what} must be a constant")
    return float(v)


def _pow(name: str, shape: tuple[int, ...], x: Arg, y: Arg) -> Tensor:
    if not isinstance(y, Tensor):
        if y == 2.0:
            return _elementwise(name, shape, lambda a: a * a, x)
        if y == 3.0:
            return _elementwise(name, shape, lambda a: a * a * a, x)
        if y == 0.5:
            return _elementwise(name, shape, te.sqrt, x)
        if y == 1.0:
            return _elementwise(name, shape, lambda a: a * 1.0, x)
    return _elementwise(name, shape, lambda a, b: te.exp(te.log(a) * b), x, y)


def _hardsigmoid(v: Expr, alpha: float, beta: float) -> Expr:
    return te.min(te.max(v * alpha + beta, 0.0), 1.0)


def _gelu(node: Node, x: Tensor, name: str) -> Tensor:
    if node.attr("approximate", "none") != "tanh":
        return ops.gelu(x, name=f"{name}_gelu")
    c = math.sqrt(2 / math.pi)
    return te.compute(
        x.shape,
        lambda *i: 0.5 * x[i] * (1.0 + te.tanh(c * (x[i] + 0.044715 * x[i] * x[i] * x[i]))),
        name=f"{name}_gelu",
        tag="elementwise",
    )


def lower_elementwise(node: Node, shape: tuple[int, ...], a: Args, dtype: str, name: str) -> Tensor:
    """An elementwise node over ``shape`` (broadcasting its operands)."""
    op = node.op
    if op in ARITHMETIC:
        if not any(isinstance(v, Tensor) for v in a[:2]):
            raise _unsupported(node, "both operands are constants")
        return _elementwise(name, shape, ARITHMETIC[op], _given(node, a, 0), _given(node, a, 1))
    simple: dict[str, Callable[[Expr], Expr]] = {
        "Relu": lambda v: te.max(v, te.const(0, v.dtype)),
        "Sigmoid": te.sigmoid,
        "Tanh": te.tanh,
        "Erf": te.erf,
        "Sqrt": te.sqrt,
        "Exp": te.exp,
        "Neg": lambda v: v * -1.0,
        "Reciprocal": lambda v: 1.0 / v,
        "Identity": lambda v: v + te.const(0, v.dtype),
        "Dropout": lambda v: v + te.const(0, v.dtype),  # inference: a copy
        "HardSwish": lambda v: v * _hardsigmoid(v, 1 / 6, 0.5),
        "Cast": lambda v: te.cast(v, dtype),
    }
    if op in simple:
        return _elementwise(name, shape, simple[op], _given(node, a, 0))
    if op == "HardSigmoid":
        alpha, beta = node.attr("alpha", 0.2), node.attr("beta", 0.5)
        return _elementwise(name, shape, lambda v: _hardsigmoid(v, alpha, beta), _given(node, a, 0))
    if op == "Clip":
        lo = _scalar(node, a[1], "min") if len(a) > 1 and a[1] is not None else -BIG
        hi = _scalar(node, a[2], "max") if len(a) > 2 and a[2] is not None else BIG
        return ops.clip(_tensor(node, a, 0), lo, hi, name=f"{name}_clip")
    if op == "Gelu":
        return _gelu(node, _tensor(node, a, 0), name)
    if op == "Pow":
        return _pow(name, shape, _given(node, a, 0), _given(node, a, 1))
    logical: dict[str, Callable[..., Expr]] = {
        "Equal": te.eq,
        "Less": lambda p, q: p < q,
        "Greater": lambda p, q: p > q,
        "LessOrEqual": lambda p, q: p <= q,
        "GreaterOrEqual": lambda p, q: p >= q,
        "And": lambda p, q: p & q,
        "Or": lambda p, q: p | q,
    }
    if op in logical:
        return _elementwise(name, shape, logical[op], _given(node, a, 0), _given(node, a, 1))
    if op == "Not":
        return _elementwise(name, shape, lambda v: ~v, _given(node, a, 0))
    if op == "Where":
        return _elementwise(
            name, shape, lambda c, x, y: te.select(c, x, y), *(_given(node, a, k) for k in range(3))
        )
    raise _unsupported(node, "no lowering")


def lower_anchor(
    graph: Graph, node: Node, a: Args, consts: Mapping[str, np.ndarray], name: str
) -> Tensor:
    """The anchor of a group (anything but an elementwise op) as DSL computes."""
    op, out = node.op, graph.values[node.outputs[0]].shape
    if op == "Concat":
        return ops.concat(
            [v for v in a if isinstance(v, Tensor)], node.attr("axis"), name=f"{name}_concat"
        )
    if op == "Expand":
        v = _given(node, a, 0)  # may be a scalar constant
        return te.compute(
            out, lambda *i: as_expr(_read(v, i)), name=f"{name}_expand", tag="transform"
        )
    x = _tensor(node, a, 0)
    layout = node.attr("layout", "NCHW")  # NHWC: the layout planner's form (graph.layout)
    if op == "Conv":
        w = _tensor(node, a, 1)
        kernel = w.shape[2:] if layout == "NCHW" else w.shape[:2]
        strides, dil, begin, end = pool_geometry(node, nchw_shape(x.shape, layout), kernel)
        pads = (begin[0], begin[1], end[0], end[1])
        y = ops.conv2d(
            x,
            w,
            (strides[0], strides[1]),
            pads,
            (dil[0], dil[1]),
            node.attr("group", 1),
            layout,
            name=f"{name}_conv",
        )
        axis = 1 if layout == "NCHW" else 3
        return (
            ops.bias_add(y, _tensor(node, a, 2), axis=axis, name=f"{name}_bias")
            if len(a) > 2 and a[2] is not None
            else y
        )
    if op == "Gemm":
        if node.attr("transA", 0):
            x = ops.transpose(x, name=f"{name}_a_t")
        y = (
            ops.dense(x, _tensor(node, a, 1), name=f"{name}_dense")
            if node.attr("transB", 0)
            else ops.matmul(x, _tensor(node, a, 1), name=f"{name}_matmul")
        )
        if node.attr("alpha", 1.0) != 1.0:
            y = ops.mul(y, float(node.attr("alpha")), name=f"{name}_alpha")
        if len(a) > 2 and a[2] is not None:
            c = a[2]
            beta = float(node.attr("beta", 1.0))
            if beta != 1.0:
                y = _elementwise(name, y.shape, lambda p, q: p + q * beta, y, c)
            else:
                y = ops.add(y, c, name=f"{name}_bias")
        return y
    if op == "MatMul":
        b = _tensor(node, a, 1)
        if x.ndim == 2 and b.ndim == 2:
            return ops.matmul(x, b, name=f"{name}_matmul")
        if x.ndim == 3 and b.ndim == 3 and x.shape[0] == b.shape[0]:
            return ops.batch_matmul(x, b, name=f"{name}_bmm")
        raise _unsupported(node, f"operand shapes {x.shape} x {b.shape}")
    if op in ("MaxPool", "AveragePool"):
        kernel = node.attr("kernel_shape")
        strides, dil, begin, end = pool_geometry(node, nchw_shape(x.shape, layout), kernel)
        if any(d != 1 for d in dil):
            raise _unsupported(node, "dilated pooling")
        pads = (begin[0], begin[1], end[0], end[1])
        if op == "MaxPool":
            return ops.max_pool2d(
                x, tuple(kernel), (strides[0], strides[1]), pads, layout, f"{name}_maxpool"
            )
        if node.attr("count_include_pad", 0) and any(pads):
            if node.attr("ceil_mode", 0):
                raise _unsupported(node, "count_include_pad with ceil_mode")
            x = ops.pad(x, (0, 0, pads[0], pads[1]), (0, 0, pads[2], pads[3]), name=f"{name}_pad")
            pads = (0, 0, 0, 0)
        return ops.avg_pool2d(
            x, tuple(kernel), (strides[0], strides[1]), pads, layout, f"{name}_avgpool"
        )
    if op == "GlobalAveragePool":
        return ops.global_avg_pool(x, layout, name=f"{name}_gap")
    if op in REDUCE:
        axes = optional_ints(node, "axes", [consts.get(i) for i in node.inputs], 1) or None
        if axes is None and node.attr("noop_with_empty_axes", 0):
            return _elementwise(f"{name}_noop", x.shape, lambda v: v + te.const(0, v.dtype), x)
        keep = bool(node.attr("keepdims", 1))
        return REDUCE[op](x, axes, keep, name=f"{name}_{op[6:].lower()}")
    if op in ("Softmax", "LogSoftmax"):
        norm = ops.softmax if op == "Softmax" else _log_softmax
        axis = node.attr("axis", -1) % x.ndim
        if axis == x.ndim - 1:
            return norm(x, name=f"{name}_softmax")
        perm = [d for d in range(x.ndim) if d != axis] + [axis]  # the axis moved last and back
        y = norm(ops.transpose(x, perm, name=f"{name}_in"), name=f"{name}_softmax")
        return ops.transpose(y, [int(d) for d in np.argsort(perm)], name=f"{name}_out")
    if op == "Trilu":
        return _trilu(node, x, a, name)
    if op == "LayerNormalization":  # over the last axis of x (several axes arrive as one)
        if len([o for o in node.outputs if o]) > 1:
            raise _unsupported(node, "the Mean / InvStdDev outputs")
        gamma, shift = a[1], a[2]
        if not isinstance(gamma, Tensor) or not isinstance(shift, Tensor) or shift.ndim != 1:
            raise _unsupported(node, "scale and bias must be 1-D tensors")
        return ops.layer_norm(x, gamma, shift, node.attr("epsilon", 1e-5), name=f"{name}_ln")
    if op == "BatchNormalization":
        return _batchnorm(node, x, [_given(node, a, k) for k in range(1, 5)], name)
    if op == "Transpose":
        return ops.transpose(x, node.attr("perm"), name=f"{name}_transpose")
    if op == "Slice":
        return _slice(graph, node, x, consts, name)
    if op == "Gather":
        return _gather(node, x, _given(node, a, 1), out, name)
    raise _unsupported(node, "no lowering")


def _log_softmax(x: Tensor, name: str) -> Tensor:
    """``x - max - log(sum(exp(x - max)))`` over the last axis: finite where softmax
    underflows to 0, as a log of ``ops.softmax`` would not be."""
    top = ops.reduce_max(x, -1, keepdims=True, name=f"{name}_max")
    shifted = _elementwise(f"{name}_shift", x.shape, lambda p, q: p - q, x, top)
    exp = _elementwise(f"{name}_exp", x.shape, te.exp_nonpos, shifted)
    total = ops.reduce_sum(exp, -1, keepdims=True, name=f"{name}_sum")
    return _elementwise(name, x.shape, lambda p, q: p - te.log(q), shifted, total)


def _trilu(node: Node, x: Tensor, a: Args, name: str) -> Tensor:
    """The upper (or lower) triangle of the last two axes from diagonal ``k``, zeros elsewhere."""
    k = int(_scalar(node, a[1], "k")) if len(a) > 1 and a[1] is not None else 0
    upper = bool(node.attr("upper", 1))

    def body(*i: Expr) -> Expr:
        above = i[-1] - i[-2]  # column - row: the diagonal it is on
        keep = above >= k if upper else above <= k
        return te.select(keep, x[i], te.const(0, x.dtype))

    return te.compute(x.shape, body, name=f"{name}_trilu", tag="transform")


def _batchnorm(node: Node, x: Tensor, params: list[Arg], name: str) -> Tensor:
    """Inference batch norm with statistics given at run time, per channel (axis 1)."""
    scale, bias, mean, var = params
    eps = float(node.attr("epsilon", 1e-5))

    def at(v: Arg, c: Expr) -> Expr | float:
        return v[c] if isinstance(v, Tensor) else v

    def body(*i: Expr) -> Expr:
        c = i[1]
        return (x[i] - at(mean, c)) * te.rsqrt(at(var, c) + eps) * at(scale, c) + at(bias, c)

    return te.compute(x.shape, body, name=f"{name}_bn", tag="elementwise")


def _slice(
    graph: Graph, node: Node, x: Tensor, consts: Mapping[str, np.ndarray], name: str
) -> Tensor:
    args = [consts.get(i) if i else None for i in node.inputs]
    starts, ends = optional_ints(node, "starts", args, 1), optional_ints(node, "ends", args, 2)
    if starts is None or ends is None:
        raise _unsupported(node, "starts and ends must be constants")
    axes = optional_ints(node, "axes", args, 3) or list(range(len(starts)))
    steps = optional_ints(node, "steps", args, 4) or [1] * len(starts)
    first, step = [0] * x.ndim, [1] * x.ndim
    for s, e, ax, st in zip(starts, ends, axes, steps, strict=True):
        first[ax % x.ndim], _, step[ax % x.ndim] = slice(s, e, st).indices(x.shape[ax % x.ndim])
    out = graph.values[node.outputs[0]].shape

    def body(*i: Expr) -> Expr:
        return x[
            tuple(
                k * st + f if st != 1 else k + f if f else k
                for k, f, st in zip(i, first, step, strict=True)
            )
        ]

    return te.compute(out, body, name=f"{name}_slice", tag="transform")


def _gather(node: Node, x: Tensor, index: Arg, out: tuple[int, ...], name: str) -> Tensor:
    axis = node.attr("axis", 0) % x.ndim
    if not isinstance(index, Tensor):  # a scalar index: that slice, the axis dropped
        k = int(index) % x.shape[axis]

        def pick(*i: Expr) -> Expr:
            at = (*i[:axis], te.const(k), *i[axis:])
            return x[at]

        return te.compute(out, pick, name=f"{name}_gather", tag="transform")
    n = index.ndim

    def body(*i: Expr) -> Expr:
        raw = index[i[axis : axis + n]]
        j = te.select(raw < 0, raw + x.shape[axis], raw)
        at = (*i[:axis], j, *i[axis + n :])
        return x[at]

    return te.compute(out, body, name=f"{name}_gather", tag="transform")


__all__ = ["lower_anchor", "lower_elementwise", "te_dtype"]
