"""Index width: whether a kernel's index arithmetic needs 64 bits.

C evaluates ``p * 1800030000 + q`` in the type of ``p``: with ``int`` loop variables an offset past
INT32_MAX overflows (undefined behaviour; in practice a wrong address). A kernel whose buffers,
loops or index values can get that large declares its loop variables ``int64_t``, so every index
expression is evaluated in 64 bits; every other kernel keeps ``int``, which small kernels compile
to the same fast code as always.
"""

from __future__ import annotations

import math

from ..te.expr import Binary, Const, Expr, Select, TensorRead, Var, children
from .nodes import Allocate, Buffer, For, IfThen, PrimFunc, Store, walk_stmts

INT32_MAX = 2**31 - 1


def needs_64bit_indices(func: PrimFunc) -> bool:
    """Whether some buffer holds 2^31 elements or more, some loop runs that far, or some index
    (an offset into a buffer or a value on the way to it) may exceed INT32_MAX in magnitude."""
    buffers: list[Buffer] = [*func.params, *func.temporaries]
    extents: dict[Var, int] = {}
    exprs: list[tuple[Expr, bool]] = []  # (expression, whether its value is an index)
    for s in walk_stmts(func.body):
        match s:
            case For(var, extent):
                extents[var] = extent
            case Store(buf, idx, value):
                exprs += [(TensorRead(buf, idx), True), (value, False)]
            case IfThen(cond):
                exprs.append((cond, True))
            case Allocate(buf):
                buffers.append(buf)
    if any(b.size > INT32_MAX for b in buffers) or any(n > INT32_MAX for n in extents.values()):
        return True
    return any(_peak_index(e, is_index, extents) > INT32_MAX for e, is_index in exprs)


def _peak_index(e: Expr, is_index: bool, extents: dict[Var, int]) -> int:
    """A bound on the magnitude of every index value met evaluating ``e``: the flat offset of
    each buffer access and each integer value computed on the way to one."""
    peak = 0

    def bound(x: Expr, in_index: bool) -> int:
        nonlocal peak
        if isinstance(x, TensorRead):
            offset = sum(
                bound(i, True) * math.prod(x.tensor.shape[d + 1 :]) for d, i in enumerate(x.indices)
            )
            peak = max(peak, offset)
            return 0  # the value read is data, not an index
        kids = [bound(k, in_index) for k in children(x)]
        match x:
            case Var():
                b = extents.get(x, 1) - 1
            case Const(value=v) if x.dtype == "int32":
                b = abs(int(v))
            case Binary("add" | "sub"):
                b = kids[0] + kids[1]
            case Binary("mul"):
                b = kids[0] * kids[1]
            case Binary("floordiv"):
                b = kids[0]
            case Binary("mod"):
                b = kids[1]
            case Binary("max" | "min"):
                b = max(kids)
            case Select():
                b = max(kids[1:])
            case _:
                b = 0
        if in_index and x.dtype == "int32":
            peak = max(peak, b)
        return b

    bound(e, is_index)
    return peak
