"""Reductions over a set of axes (sum, mean, max, min), with NumPy's ``axis``/``keepdims``."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from .. import te
from ..errors import DSLError
from ..te import Expr, IterVar, Tensor, Var
from ..te.expr import FLOAT_DTYPES
from ._check import axis_arg, tensor_arg

Axes = int | Sequence[int] | None


def reduce_sum(
    x: Tensor, axis: Axes = None, keepdims: bool = False, name: str = "reduce_sum"
) -> Tensor:
    """Sum over ``axis`` (all axes when None)."""
    return _reduce("reduce_sum", te.sum, x, axis, keepdims, name)


def reduce_mean(
    x: Tensor, axis: Axes = None, keepdims: bool = False, name: str = "reduce_mean"
) -> Tensor:
    """Mean over ``axis``: one stage summing ``x * (1/count)``."""
    return _reduce("reduce_mean", te.sum, x, axis, keepdims, name, mean=True)


def reduce_max(
    x: Tensor, axis: Axes = None, keepdims: bool = False, name: str = "reduce_max"
) -> Tensor:
    """Maximum over ``axis``."""
    return _reduce("reduce_max", te.max_reduce, x, axis, keepdims, name)


def reduce_min(
    x: Tensor, axis: Axes = None, keepdims: bool = False, name: str = "reduce_min"
) -> Tensor:
    """Minimum over ``axis``."""
    return _reduce("reduce_min", te.min_reduce, x, axis, keepdims, name)


def _reduce(
    op: str,
    reducer: Callable[..., Expr],
    x: Tensor,
    axis: Axes,
    keepdims: bool,
    name: str,
    mean: bool = False,
) -> Tensor:
    x = tensor_arg(op, "x", x)
    if axis is None:
        axes = tuple(range(x.ndim))
    else:
        given = (axis,) if isinstance(axis, int) else tuple(axis)
        axes = tuple(sorted(axis_arg(op, "axis", a, x.ndim) for a in given))
        if len(set(axes)) != len(axes):
            raise DSLError(f"{op}: axis repeats a dimension: {axis!r}")
    if not axes:
        raise DSLError(f"{op}: axis must name at least one dimension of {x.shape}")
    reduce_axes: dict[int, IterVar] = {d: te.reduce_axis(x.shape[d], f"r{d}") for d in axes}
    scale = None
    if mean:  # an integer mean is a float32 one
        dtype = x.dtype if x.dtype in FLOAT_DTYPES else "float32"
        scale = te.const(1.0 / math.prod(x.shape[d] for d in axes), dtype)
    shape = tuple(
        1 if d in reduce_axes else n
        for d, n in enumerate(x.shape)
        if keepdims or d not in reduce_axes
    )

    def body(*idx: Var) -> Expr:
        out = iter(idx)
        src = []
        for d in range(x.ndim):
            if d in reduce_axes:
                src.append(reduce_axes[d].var)
                if keepdims:
                    next(out)
            else:
                src.append(next(out))
        value = x[tuple(src)]
        return reducer(
            value * scale if scale is not None else value, axis=tuple(reduce_axes.values())
        )

    attrs = {"axis": axes, "keepdims": keepdims}
    return te.compute(shape, body, name=name, tag="reduction", attrs=attrs)
