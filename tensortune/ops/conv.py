"""2-D convolution (NCHW and NHWC) with stride, padding, dilation and groups; depthwise is the
``groups == channels`` case. Padding is a separate "pad" stage a schedule may inline."""

from __future__ import annotations

from .. import te
from ..errors import DSLError
from ..te import Expr, Tensor, Var
from ._check import choice, int_arg, int_pair, tensor_arg
from ._window import LAYOUTS, Ints2, Padding, output_size, pad_spatial, padding4, window_index


def conv2d(
    data: Tensor,
    kernel: Tensor,
    stride: Ints2 = 1,
    padding: Padding = 0,
    dilation: Ints2 = 1,
    groups: int = 1,
    layout: str = "NCHW",
    name: str = "conv2d",
) -> Tensor:
    """Cross-correlation as in PyTorch/TVM.

    NCHW: data[N, C, H, W], kernel[K, C/groups, R, S] -> [N, K, P, Q].
    NHWC: data[N, H, W, C], kernel[R, S, C/groups, K] -> [N, P, Q, K].
    ``padding`` is an int, ``(pad_h, pad_w)`` or ``(top, left, bottom, right)``.
    """
    op = "conv2d"
    data = tensor_arg(op, "data", data, 4)
    kernel = tensor_arg(op, "kernel", kernel, 4)
    layout = choice(op, "layout", layout, LAYOUTS)
    sh, sw = int_pair(op, "stride", stride, 1)
    dh, dw = int_pair(op, "dilation", dilation, 1)
    pads = padding4(op, padding)
    groups = int_arg(op, "groups", groups)
    if layout == "NCHW":
        batch, channels, height, width = data.shape
        out_ch, group_ch, kh, kw = kernel.shape
        kernel_form = "[K, C/groups, R, S]"
    else:
        batch, height, width, channels = data.shape
        kh, kw, group_ch, out_ch = kernel.shape
        kernel_form = "[R, S, C/groups, K]"
    if channels % groups or out_ch % groups:
        raise DSLError(
            f"{op}: groups={groups} must divide both the input channels C={channels} and the "
            f"output channels K={out_ch}"
        )
    if group_ch != channels // groups:
        raise DSLError(
            f"{op}: {layout} kernel must be {kernel_form} = C/groups={channels // groups} input "
            f"channels per group, got kernel shape {kernel.shape}"
        )
    out_h = output_size(op, "H", height, kh, sh, pads[0] + pads[2], dh)
    out_w = output_size(op, "W", width, kw, sw, pads[1] + pads[3], dw)
    padded = pad_spatial(data, layout, pads)
    rc, rr, rs = te.reduce_axis(group_ch, "c"), te.reduce_axis(kh, "r"), te.reduce_axis(kw, "s")
    out_per_group = out_ch // groups

    def in_channel(k: Var) -> Expr:
        """Input channel read for output channel ``k``: ``c`` offset to ``k``'s group."""
        if groups == 1:
            return rc.var
        group = k // out_per_group if out_per_group != 1 else k
        return (group * group_ch if group_ch != 1 else group) + rc.var

    attrs = {
        "stride": (sh, sw),
        "padding": pads,
        "dilation": (dh, dw),
        "groups": groups,
        "layout": layout,
    }
    if layout == "NCHW":

        def nchw(n: Var, k: Var, p: Var, q: Var) -> Expr:
            h, w = window_index(p, sh, rr.var, dh), window_index(q, sw, rs.var, dw)
            return te.sum(padded[n, in_channel(k), h, w] * kernel[k, rc, rr, rs], axis=(rc, rr, rs))

        return te.compute((batch, out_ch, out_h, out_w), nchw, name=name, tag="conv2d", attrs=attrs)

    def nhwc(n: Var, p: Var, q: Var, k: Var) -> Expr:
        h, w = window_index(p, sh, rr.var, dh), window_index(q, sw, rs.var, dw)
        return te.sum(padded[n, h, w, in_channel(k)] * kernel[rr, rs, rc, k], axis=(rr, rs, rc))

    return te.compute((batch, out_h, out_w, out_ch), nhwc, name=name, tag="conv2d", attrs=attrs)


def depthwise_conv2d(
    data: Tensor,
    kernel: Tensor,
    stride: Ints2 = 1,
    padding: Padding = 0,
    dilation: Ints2 = 1,
    layout: str = "NCHW",
    name: str = "depthwise_conv2d",
) -> Tensor:
    """``conv2d`` with one group per input channel (kernel [C*m, 1, R, S] or [R, S, 1, C*m])."""
    data = tensor_arg("depthwise_conv2d", "data", data, 4)
    layout = choice("depthwise_conv2d", "layout", layout, LAYOUTS)
    channels = data.shape[1] if layout == "NCHW" else data.shape[3]
    return conv2d(data, kernel, stride, padding, dilation, channels, layout, name)
