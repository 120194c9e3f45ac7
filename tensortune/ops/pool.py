"""2-D pooling (NCHW or NHWC): max, average and global average. Padding is a separate "pad"
stage, as in conv2d."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .. import te
from ..errors import DSLError
from ..te import Expr, IterVar, Tensor, Var
from ._check import choice, int_pair, tensor_arg
from ._window import (
    HW_DIMS,
    LAYOUTS,
    Ints2,
    Padding,
    output_size,
    pad_spatial,
    padding4,
    window_index,
)

Reducer = Callable[[Expr, tuple[IterVar, ...]], Expr]


def max_pool2d(
    data: Tensor,
    kernel_size: Ints2,
    stride: Ints2 | None = None,
    padding: Padding = 0,
    layout: str = "NCHW",
    name: str = "max_pool2d",
) -> Tensor:
    """Window maximum; ``stride`` defaults to ``kernel_size``.

    Padding is filled with -inf (the lowest int for ints), which never wins over a real element:
    padding is smaller than the window, so every window holds one, and a window of -inf or NaN
    elements gives -inf or NaN as the maximum of its real elements does in NumPy.
    """
    op = "max_pool2d"
    data, window, strides, pads, layout = _window_args(
        op, data, kernel_size, stride, padding, layout
    )
    return _pool(op, data, window, strides, pads, layout, _lowest(data.dtype), te.max_reduce, name)


def avg_pool2d(
    data: Tensor,
    kernel_size: Ints2,
    stride: Ints2 | None = None,
    padding: Padding = 0,
    layout: str = "NCHW",
    name: str = "avg_pool2d",
) -> Tensor:
    """Window mean with ``count_include_pad=False`` semantics: padded elements are neither summed
    nor counted, so border windows divide by their number of real elements.

    Two stages: the window sum (tag "pool") and the division by the count (tag "elementwise").
    """
    op = "avg_pool2d"
    data, window, strides, pads, layout = _window_args(
        op, data, kernel_size, stride, padding, layout
    )
    if not data.dtype.startswith("float"):
        raise DSLError(f"{op}: data must be float32 or float64, got {data.dtype}")
    total = _pool(op, data, window, strides, pads, layout, 0.0, te.sum, f"{name}_sum")
    h_dim, w_dim = HW_DIMS[layout]
    height, width = data.shape[h_dim], data.shape[w_dim]

    def count(out: Var, stride: int, before: int, size: int, extent: int) -> Expr:
        """Real (unpadded) elements in the window starting at ``out * stride - before``."""
        start = out * stride - before if stride != 1 else out - before
        return te.min(start + size, extent) - te.max(start, 0)

    def body(*i: Var) -> Expr:
        if not any(pads):
            return total[i] / float(window[0] * window[1])
        n_h = count(i[h_dim], strides[0], pads[0], window[0], height)
        n_w = count(i[w_dim], strides[1], pads[1], window[1], width)
        return total[i] / te.cast(n_h * n_w, data.dtype)

    return te.compute(total.shape, body, name=name, tag="elementwise")


def global_avg_pool(data: Tensor, layout: str = "NCHW", name: str = "global_avg_pool") -> Tensor:
    """Mean over H and W keeping them as size-1 dimensions: [N, C, 1, 1] (or [N, 1, 1, C])."""
    op = "global_avg_pool"
    data = tensor_arg(op, "data", data, 4)
    layout = choice(op, "layout", layout, LAYOUTS)
    h_dim, w_dim = HW_DIMS[layout]
    height, width = data.shape[h_dim], data.shape[w_dim]
    rh, rw = te.reduce_axis(height, "rh"), te.reduce_axis(width, "rw")
    scale = te.const(1.0 / (height * width), data.dtype)
    shape = list(data.shape)
    shape[h_dim] = shape[w_dim] = 1

    def body(*i: Var) -> Expr:
        src = list(i)
        src[h_dim], src[w_dim] = rh.var, rw.var
        return te.sum(data[tuple(src)] * scale, axis=(rh, rw))

    return te.compute(shape, body, name=name, tag="pool", attrs={"layout": layout})


def _lowest(dtype: str) -> float:
    """The lowest value of ``dtype``: max-pool padding that never wins."""
    kind = np.dtype(dtype)
    if kind.kind == "f":
        return float("-inf")
    return int(np.iinfo(kind).min) if kind.kind == "i" else 0


def _window_args(
    op: str, data: Tensor, kernel_size: Ints2, stride: Ints2 | None, padding: Padding, layout: str
) -> tuple[Tensor, tuple[int, int], tuple[int, int], tuple[int, int, int, int], str]:
    """Validated pooling arguments; padding must be smaller than the window on every side so that
    no window sees only padding."""
    data = tensor_arg(op, "data", data, 4)
    window = int_pair(op, "kernel_size", kernel_size, 1)
    strides = window if stride is None else int_pair(op, "stride", stride, 1)
    pads = padding4(op, padding)
    if max(pads[0], pads[2]) >= window[0] or max(pads[1], pads[3]) >= window[1]:
        raise DSLError(
            f"{op}: padding {pads} must be smaller than the window {window} on every side"
        )
    return data, window, strides, pads, choice(op, "layout", layout, LAYOUTS)


def _pool(
    op: str,
    data: Tensor,
    window: tuple[int, int],
    strides: tuple[int, int],
    pads: tuple[int, int, int, int],
    layout: str,
    pad_value: float,
    reducer: Reducer,
    name: str,
) -> Tensor:
    """The window reduction over ``data`` padded with ``pad_value``."""
    h_dim, w_dim = HW_DIMS[layout]
    out_h = output_size(op, "H", data.shape[h_dim], window[0], strides[0], pads[0] + pads[2])
    out_w = output_size(op, "W", data.shape[w_dim], window[1], strides[1], pads[1] + pads[3])
    padded = pad_spatial(data, layout, pads, pad_value)
    rr, rs = te.reduce_axis(window[0], "r"), te.reduce_axis(window[1], "s")
    attrs = {"kernel_size": window, "stride": strides, "padding": pads, "layout": layout}
    if layout == "NCHW":

        def nchw(n: Var, c: Var, p: Var, q: Var) -> Expr:
            h, w = window_index(p, strides[0], rr.var), window_index(q, strides[1], rs.var)
            return reducer(padded[n, c, h, w], (rr, rs))

        shape = (data.shape[0], data.shape[1], out_h, out_w)
        return te.compute(shape, nchw, name=name, tag="pool", attrs=attrs)

    def nhwc(n: Var, p: Var, q: Var, c: Var) -> Expr:
        h, w = window_index(p, strides[0], rr.var), window_index(q, strides[1], rs.var)
        return reducer(padded[n, h, w, c], (rr, rs))

    shape = (data.shape[0], out_h, out_w, data.shape[3])
    return te.compute(shape, nhwc, name=name, tag="pool", attrs=attrs)
