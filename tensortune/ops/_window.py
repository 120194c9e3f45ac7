"""Sliding-window geometry shared by conv2d and pooling: layouts, padding, output sizes and the
separate pad stage."""

from __future__ import annotations

from ..errors import DSLError
from ..te import Expr, Tensor, Var
from ._check import int_pair, int_tuple, is_int
from .transform import pad

Ints2 = int | tuple[int, int]
Padding = int | tuple[int, int] | tuple[int, int, int, int]

LAYOUTS = ("NCHW", "NHWC")
HW_DIMS = {"NCHW": (2, 3), "NHWC": (1, 2)}


def padding4(op: str, value: object) -> tuple[int, int, int, int]:
    """``(top, left, bottom, right)`` from an int, an ``(h, w)`` pair or four ints."""
    if is_int(value) or (isinstance(value, tuple | list) and len(value) == 2):
        h, w = int_pair(op, "padding", value, 0)
        return (h, w, h, w)
    try:
        top, left, bottom, right = int_tuple(op, "padding", value, 4, 0)
    except DSLError:
        raise DSLError(
            f"{op}: padding must be an int >= 0, a (pad_h, pad_w) pair or "
            f"(top, left, bottom, right), got {value!r}"
        ) from None
    return top, left, bottom, right


def output_size(
    op: str, dim: str, extent: int, window: int, stride: int, pads: int, dilation: int = 1
) -> int:
    """Number of window positions along one spatial dimension (``pads`` is both sides' sum)."""
    size = (extent + pads - dilation * (window - 1) - 1) // stride + 1
    if size <= 0:
        raise DSLError(
            f"{op}: the window does not fit: input {dim}={extent} with padding {pads} is smaller "
            f"than the dilated window {dilation * (window - 1) + 1}"
        )
    return size


def window_index(out: Var, stride: int, red: Var, dilation: int = 1) -> Expr:
    """``out * stride + red * dilation``, leaving out multiplications by 1."""
    return (out * stride if stride != 1 else out) + (red * dilation if dilation != 1 else red)


def pad_spatial(
    data: Tensor, layout: str, pads: tuple[int, int, int, int], value: float = 0.0
) -> Tensor:
    """``data`` padded in H and W as its own stage; ``data`` itself when there is no padding."""
    if not any(pads):
        return data
    top, left, bottom, right = pads
    before, after = [0] * data.ndim, [0] * data.ndim
    h, w = HW_DIMS[layout]
    before[h], before[w], after[h], after[w] = top, left, bottom, right
    return pad(data, before, after, value, name=f"{data.name}_pad")
