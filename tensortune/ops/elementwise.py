"""Elementwise ops: arithmetic with NumPy broadcasting, bias addition and activations.

Every op is one compute tagged "elementwise", the stages a scheduler fuses into their producer.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from .. import te
from ..errors import DSLError
from ..te import Expr, Tensor
from ..te.expr import as_expr
from ._check import axis_arg, tensor_arg

Operand = Tensor | int | float


def _broadcast_shape(op: str, a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    """NumPy broadcasting: align trailing dimensions; a dimension of 1 stretches."""
    shape = []
    for d in range(-max(len(a), len(b)), 0):
        x = a[d] if -d <= len(a) else 1
        y = b[d] if -d <= len(b) else 1
        if x != y and 1 not in (x, y):
            raise DSLError(f"{op}: shapes {a} and {b} do not broadcast (dimension {d}: {x} vs {y})")
        shape.append(max(x, y))
    return tuple(shape)


def _broadcast_read(v: Operand, idx: tuple[Expr, ...], like: str) -> Expr:
    if not isinstance(v, Tensor):
        return as_expr(v, like)  # a bare number takes the dtype of the tensor it meets
    tail = idx[len(idx) - v.ndim :]
    return v[tuple(te.const(0) if n == 1 else i for i, n in zip(tail, v.shape, strict=True))]


def _binary(op: str, a: Operand, b: Operand, fn: Callable[[Expr, Expr], Expr], name: str) -> Tensor:
    for arg, v in (("a", a), ("b", b)):
        if not isinstance(v, Tensor | int | float) or isinstance(v, bool):
            raise DSLError(f"{op}: {arg} must be a Tensor or a number, got {type(v).__name__}")
    tensor = a if isinstance(a, Tensor) else b
    if not isinstance(tensor, Tensor):
        raise DSLError(f"{op}: at least one operand must be a Tensor")
    shape = _broadcast_shape(op, getattr(a, "shape", ()), getattr(b, "shape", ()))
    like = tensor.dtype
    return te.compute(
        shape,
        lambda *i: fn(_broadcast_read(a, i, like), _broadcast_read(b, i, like)),
        name=name,
        tag="elementwise",
    )


def add(a: Operand, b: Operand, name: str = "add") -> Tensor:
    """``a + b`` with NumPy broadcasting (e.g. a 1-D bias over the last axis)."""
    return _binary("add", a, b, lambda x, y: x + y, name)


def sub(a: Operand, b: Operand, name: str = "sub") -> Tensor:
    """``a - b`` with NumPy broadcasting."""
    return _binary("sub", a, b, lambda x, y: x - y, name)


def mul(a: Operand, b: Operand, name: str = "mul") -> Tensor:
    """``a * b`` with NumPy broadcasting (e.g. a per-column scale)."""
    return _binary("mul", a, b, lambda x, y: x * y, name)


def div(a: Operand, b: Operand, name: str = "div") -> Tensor:
    """``a / b`` with NumPy broadcasting (floats only, as in the DSL)."""
    return _binary("div", a, b, lambda x, y: x / y, name)


def bias_add(data: Tensor, bias: Tensor, axis: int = -1, name: str = "bias_add") -> Tensor:
    """Add a 1-D ``bias`` along ``axis`` of ``data`` (axis=1 for NCHW channels)."""
    data = tensor_arg("bias_add", "data", data)
    bias = tensor_arg("bias_add", "bias", bias, 1)
    axis = axis_arg("bias_add", "axis", axis, data.ndim)
    if bias.shape[0] != data.shape[axis]:
        raise DSLError(
            f"bias_add: bias has {bias.shape[0]} entries but data {data.shape} has "
            f"{data.shape[axis]} along axis {axis}"
        )
    return te.compute(data.shape, lambda *i: data[i] + bias[i[axis]], name=name, tag="elementwise")


def _unary(
    op: str, x: Tensor, fn: Callable[[Expr], Expr], name: str, attrs: dict | None = None
) -> Tensor:
    x = tensor_arg(op, "x", x)
    return te.compute(x.shape, lambda *i: fn(x[i]), name=name, tag="elementwise", attrs=attrs)


def relu(x: Tensor, name: str = "relu") -> Tensor:
    """``max(x, 0)``."""
    return _unary("relu", x, lambda v: te.max(v, te.const(0, v.dtype)), name)


_INV_SQRT2 = 1.0 / math.sqrt(2.0)


def gelu(x: Tensor, name: str = "gelu") -> Tensor:
    """Exact GELU, ``x * Phi(x)`` in its erf form (not the tanh approximation)."""
    return _unary("gelu", x, lambda v: 0.5 * v * (1.0 + te.erf(v * _INV_SQRT2)), name)


def sigmoid(x: Tensor, name: str = "sigmoid") -> Tensor:
    """``1 / (1 + exp(-x))``."""
    return _unary("sigmoid", x, te.sigmoid, name)


def tanh(x: Tensor, name: str = "tanh") -> Tensor:
    """Hyperbolic tangent."""
    return _unary("tanh", x, te.tanh, name)


def clip(x: Tensor, a_min: float, a_max: float, name: str = "clip") -> Tensor:
    """Clamp into ``[a_min, a_max]`` (relu6 is ``clip(x, 0, 6)``)."""
    for arg, v in (("a_min", a_min), ("a_max", a_max)):
        if not isinstance(v, int | float) or isinstance(v, bool) or math.isnan(v):
            raise DSLError(f"clip: {arg} must be a number, got {v!r}")
    if a_min > a_max:
        raise DSLError(f"clip: a_min must be <= a_max, got a_min={a_min} > a_max={a_max}")

    def fn(v: Expr) -> Expr:
        return te.min(te.max(v, te.const(a_min, v.dtype)), te.const(a_max, v.dtype))

    return _unary("clip", x, fn, name, attrs={"a_min": a_min, "a_max": a_max})
