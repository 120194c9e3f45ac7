"""Data movement ops: transpose, reshape, concat and constant padding (pure index remapping)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import reduce

from .. import te
from ..errors import DSLError
from ..te import Expr, Tensor
from ._check import axis_arg, int_tuple, is_int, tensor_arg


def transpose(x: Tensor, axes: Sequence[int] | None = None, name: str = "transpose") -> Tensor:
    """Permute dimensions like ``np.transpose``: output dim d is input dim ``axes[d]``."""
    x = tensor_arg("transpose", "x", x)
    perm = tuple(reversed(range(x.ndim))) if axes is None else tuple(axes)
    if not all(is_int(a) for a in perm) or sorted(perm) != list(range(x.ndim)):
        raise DSLError(f"transpose: axes must be a permutation of 0..{x.ndim - 1}, got {axes!r}")
    shape = tuple(x.shape[a] for a in perm)

    def body(*idx: Expr) -> Expr:
        src = {a: idx[d] for d, a in enumerate(perm)}
        return x[tuple(src[a] for a in range(x.ndim))]

    return te.compute(shape, body, name=name, tag="transform", attrs={"axes": perm})


def reshape(x: Tensor, shape: Sequence[int], name: str = "reshape") -> Tensor:
    """Reinterpret the row-major element order under a new shape; one entry may be -1."""
    x = tensor_arg("reshape", "x", x)
    shape = tuple(shape)
    if not all(is_int(d) and (d > 0 or d == -1) for d in shape) or shape.count(-1) > 1:
        raise DSLError(f"reshape: shape must be positive ints with at most one -1, got {shape}")
    size = math.prod(x.shape)
    known = math.prod(d for d in shape if d != -1)
    if -1 in shape:
        if size % known:
            raise DSLError(f"reshape: cannot infer -1 in {shape} for {size} elements")
        shape = tuple(size // known if d == -1 else d for d in shape)
    if math.prod(shape) != size:
        raise DSLError(f"reshape: shape {shape} has {math.prod(shape)} elements, x has {size}")

    def body(*idx: Expr) -> Expr:
        flat = _linear(idx, shape)
        src: list[Expr] = []
        for d, (extent, stride) in enumerate(zip(x.shape, _strides(x.shape), strict=True)):
            if extent == 1:
                src.append(te.const(0))
                continue
            e = flat // stride if stride != 1 else flat
            src.append(e % extent if d > 0 else e)
        return x[tuple(src)]

    return te.compute(shape, body, name=name, tag="transform")


def _strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(math.prod(shape[d + 1 :]) for d in range(len(shape)))


def _linear(idx: Sequence[Expr], shape: tuple[int, ...]) -> Expr:
    """Row-major flat offset of ``idx``, omitting the trivial terms."""
    terms = [
        i if s == 1 else i * s
        for i, s, n in zip(idx, _strides(shape), shape, strict=True)
        if n != 1
    ]
    return reduce(lambda a, b: a + b, terms) if terms else te.const(0)


def concat(tensors: Sequence[Tensor], axis: int = 0, name: str = "concat") -> Tensor:
    """Join tensors along ``axis``; all other dimensions and the dtype must agree."""
    tensors = tuple(tensor_arg("concat", f"tensors[{n}]", t) for n, t in enumerate(tensors))
    if not tensors:
        raise DSLError("concat: tensors must be a non-empty sequence of Tensors")
    first = tensors[0]
    axis = axis_arg("concat", "axis", axis, first.ndim)
    for t in tensors[1:]:
        other = t.shape[:axis] + t.shape[axis + 1 :]
        if (
            t.ndim != first.ndim
            or other != first.shape[:axis] + first.shape[axis + 1 :]
            or t.dtype != first.dtype
        ):
            raise DSLError(
                f"concat: '{t.name}' {t.shape} {t.dtype} does not match '{first.name}' "
                f"{first.shape} {first.dtype} outside axis {axis}"
            )
    offsets = [0]
    for t in tensors:
        offsets.append(offsets[-1] + t.shape[axis])
    shape = (*first.shape[:axis], offsets[-1], *first.shape[axis + 1 :])

    def body(*idx: Expr) -> Expr:
        def part(n: int) -> Expr:
            local = idx[axis] - offsets[n] if offsets[n] else idx[axis]
            at = (*idx[:axis], local, *idx[axis + 1 :])  # named: see ops/nn.py's softmax
            return tensors[n][at]

        expr = part(len(tensors) - 1)
        for n in reversed(range(len(tensors) - 1)):
            expr = te.select(idx[axis] < offsets[n + 1], part(n), expr)
        return expr

    return te.compute(shape, body, name=name, tag="transform", attrs={"axis": axis})


def pad(
    x: Tensor,
    pad_before: Sequence[int],
    pad_after: Sequence[int] | None = None,
    value: float = 0.0,
    name: str = "pad",
) -> Tensor:
    """Surround ``x`` with ``value``; a stage of its own (tag "pad") so schedules may inline it."""
    x = tensor_arg("pad", "x", x)
    before = int_tuple("pad", "pad_before", pad_before, x.ndim, 0)
    after = before if pad_after is None else int_tuple("pad", "pad_after", pad_after, x.ndim, 0)
    shape = tuple(n + b + a for n, b, a in zip(x.shape, before, after, strict=True))
    fill = te.const(value, x.dtype)

    def body(*idx: Expr) -> Expr:
        conds = []
        for i, b, a, n in zip(idx, before, after, x.shape, strict=True):
            if b:
                conds.append(i >= b)
            if a:
                conds.append(i < b + n)
        src = x[tuple(i - b if b else i for i, b in zip(idx, before, strict=True))]
        if not conds:
            return src
        return te.select(reduce(lambda p, q: p & q, conds), src, fill)

    attrs = {"pad_before": before, "pad_after": after, "value": value}
    return te.compute(shape, body, name=name, tag="pad", attrs=attrs)
