"""Tensors of the DSL: placeholders (inputs) and computes (a body expression over axes)."""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ..errors import DSLError
from .expr import (
    Expr,
    IterVar,
    Reduce,
    TensorRead,
    Var,
    as_expr,
    check_dtype,
    tensors_read,
    walk,
)

# what indexes a tensor along one dimension: an expression, an axis or a Python int
Index = Expr | IterVar | int

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Identifiers a kernel's C source already means something by: C keywords, the libc and libm names
# and macros it uses, and the ``tt_``/``TT_`` helpers and vector types of the codegen preamble.
C_RESERVED = frozenset(
    (
        "auto",
        "break",
        "case",
        "char",
        "const",
        "continue",
        "default",
        "do",
        "double",
        "else",
        "enum",
        "extern",
        "float",
        "for",
        "goto",
        "if",
        "inline",
        "int",
        "long",
        "register",
        "restrict",
        "return",
        "short",
        "signed",
        "sizeof",
        "static",
        "struct",
        "switch",
        "typedef",
        "union",
        "unsigned",
        "void",
        "volatile",
        "while",
        "asm",
        "typeof",
        "_Alignas",
        "_Alignof",
        "_Atomic",
        "_Bool",
        "_Complex",
        "_Generic",
        "_Imaginary",
        "_Noreturn",
        "_Static_assert",
        "_Thread_local",
        "bool",
        "true",
        "false",
        "NULL",
        "NAN",
        "INFINITY",
        "int8_t",
        "int16_t",
        "int32_t",
        "int64_t",
        "uint8_t",
        "uint16_t",
        "uint32_t",
        "uint64_t",
        "size_t",
        "free",
        "malloc",
        "aligned_alloc",
        "memcpy",
        "memset",
        "abs",
        "fabs",
        "fabsf",
        "floor",
        "floorf",
        "exp",
        "expf",
        "log",
        "logf",
        "tanh",
        "tanhf",
        "erf",
        "erff",
        "sqrt",
        "sqrtf",
    )
)
_RESERVED_FORM = re.compile(r"(tt_|TT_|__|_mm|[fi](32|64)x\d+$)")


def sanitize(name: str) -> str:
    """A C identifier derived from a user-given name (names reach generated C).

    ``my-tensor`` becomes ``my_tensor``, ``2x`` becomes ``t_2x``; a name the generated C already
    uses is renamed (``float`` becomes ``float_``, ``tt_alloc`` becomes ``t_tt_alloc``).
    """
    clean = re.sub(r"[^A-Za-z0-9_]", "_", name) or "t"
    if clean in C_RESERVED:
        return f"{clean}_"
    return clean if _NAME.fullmatch(clean) and not _RESERVED_FORM.match(clean) else f"t_{clean}"


@dataclass(frozen=True, eq=False)
class Tensor:
    """A named multi-dimensional value; compared by identity."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    axes: tuple[IterVar, ...] = ()
    body: Expr | None = None  # None for placeholders
    tag: str = ""
    attrs: dict = field(default_factory=dict)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def is_placeholder(self) -> bool:
        return self.body is None

    @property
    def reduce_axes(self) -> tuple[IterVar, ...]:
        return self.body.axes if isinstance(self.body, Reduce) else ()

    @property
    def inputs(self) -> tuple[Tensor, ...]:
        """Tensors read by the body, in first-read order."""
        return () if self.body is None else tensors_read(self.body)

    def __getitem__(self, idx: Index | tuple[Index, ...]) -> TensorRead:
        at = idx if isinstance(idx, tuple) else (idx,)
        if len(at) != self.ndim:
            raise DSLError(
                f"tensor '{self.name}' has {self.ndim} dimensions {self.shape}, "
                f"indexed with {len(at)}"
            )
        exprs = tuple(as_expr(i.var if isinstance(i, IterVar) else i, "int32") for i in at)
        for e in exprs:
            if e.dtype != "int32":
                raise DSLError(f"index of '{self.name}' must be int32, got {e.dtype}")
        return TensorRead(self, exprs)

    def __repr__(self) -> str:
        kind = "placeholder" if self.is_placeholder else "compute"
        return f"Tensor({self.name}, {kind}, shape={self.shape}, {self.dtype})"


def _shape(shape: Sequence[int] | int, what: str) -> tuple[int, ...]:
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    for d in shape:
        if not isinstance(d, int) or isinstance(d, bool) or d <= 0:
            raise DSLError(f"{what}: every dimension must be a positive int, got shape {shape}")
    return shape


def placeholder(shape: Sequence[int] | int, dtype: str = "float32", name: str = "X") -> Tensor:
    """An input tensor."""
    return Tensor(sanitize(name), _shape(shape, f"placeholder '{name}'"), check_dtype(dtype))


def reduce_axis(extent: int, name: str = "k") -> IterVar:
    if not isinstance(extent, int) or extent <= 0:
        raise DSLError(f"reduce_axis '{name}': extent must be a positive int, got {extent!r}")
    return IterVar(Var(sanitize(name)), extent, "reduce")


def compute(
    shape: Sequence[int] | int,
    fcompute: Callable[..., Expr],
    name: str = "C",
    tag: str = "",
    attrs: dict | None = None,
) -> Tensor:
    """A tensor whose element at each index is ``fcompute(*index)``."""
    shape = _shape(shape, f"compute '{name}'")
    parameters = inspect.signature(fcompute).parameters.values()
    if any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in parameters):
        params = [f"i{d}" for d in range(len(shape))]  # lambda *idx: one axis per dimension
    else:
        params = [p.name for p in parameters]
    if len(params) != len(shape):
        raise DSLError(
            f"compute '{name}': the lambda takes {len(params)} indices but the shape has "
            f"{len(shape)} dimensions"
        )
    axes = tuple(IterVar(Var(sanitize(p)), n) for p, n in zip(params, shape, strict=True))
    body = as_expr(fcompute(*(a.var for a in axes)))
    for node in walk(body):
        if isinstance(node, Reduce) and node is not body:
            raise DSLError(
                f"compute '{name}': a reduction must be the whole body; "
                "compute it as its own tensor"
            )
    return Tensor(sanitize(name), shape, body.dtype, axes, body, tag, dict(attrs or {}))


def _reduce(combiner: str, expr: Expr | float, axis: IterVar | Sequence[IterVar]) -> Reduce:
    axes = (axis,) if isinstance(axis, IterVar) else tuple(axis)
    if not axes or not all(isinstance(a, IterVar) and a.kind == "reduce" for a in axes):
        raise DSLError(f"{combiner}: axis must be one or more tt.reduce_axis(...)")
    value = as_expr(expr)
    if combiner == "sum" and value.dtype == "bool":
        raise DSLError("sum over a boolean expression: cast it to int32 or float32 first")
    return Reduce(combiner, value, axes, value.dtype)


def sum(expr: Expr | float, axis: IterVar | Sequence[IterVar]) -> Reduce:
    """Reduce ``expr`` with sum over the reduce axes ``axis``."""
    return _reduce("sum", expr, axis)


def max_reduce(expr: Expr | float, axis: IterVar | Sequence[IterVar]) -> Reduce:
    """Reduce ``expr`` with max over the reduce axes ``axis``."""
    return _reduce("max", expr, axis)


def min_reduce(expr: Expr | float, axis: IterVar | Sequence[IterVar]) -> Reduce:
    """Reduce ``expr`` with min over the reduce axes ``axis``."""
    return _reduce("min", expr, axis)


__all__ = [
    "Tensor",
    "compute",
    "max_reduce",
    "min_reduce",
    "placeholder",
    "reduce_axis",
    "sanitize",
    "sum",
]
