"""conv2d design space (NCHW, NHWC; plain, strided, grouped, depthwise).

A register tile is ``vectors`` vector accumulators wide and ``rows`` deep: each reduction step
loads ``vectors`` vectors and broadcasts ``rows`` scalars, ``rows*vectors`` FMAs per
``rows+vectors`` loads. Knob ``vector_axis`` picks what the vectors run along:

* ``columns``: output columns (NCHW; stride 1 makes the input loads contiguous) and the rows are
  output channels (broadcast weights). For NHWC the vectors run along the output channels,
  read from the weights as given (``W[R, S, C, K]``: a tile's rows K floats apart) or
  (``pack_weights``) from panels ``W_pack[K/w, R, S, C, w]`` in the reduce loops' order, one
  contiguous stream a tile.
  Narrow output rows waste lanes; strides 2 to 4 make each input vector a few contiguous
  loads and shuffles, larger strides a gather. In a depthwise NCHW conv (``row_axis``) the
  rows are either output channels, each reading its own input plane, or (``pixels``) one
  channel's output rows, which share the input rows their windows overlap on: with the
  window's rows unrolled, each input vector is loaded once for all the FMAs that use it.
* ``channels`` (NCHW, ungrouped): an implicit GEMM, as in oneDNN's NCHWc kernels. The vectors
  run along output channels, read from weights packed into ``W_pack[K/w, C, R, S, w]``
  (``w = vectors*lanes``), and the rows are ``pixel_rows x rows`` output pixels whose input
  scalars are broadcast (any stride: scalar loads). The NCHW write-back scatters across
  channels, once per C*R*S FMAs.

The pad stage is either materialised once, or (``pad_at="tile"``) per iteration of the parallel
loop, just the rows it reads, or inlined (its tests are then loop-invariant in the channel loop
when that loop is innermost, ``reduce_order="rsc"``). A copy made once is written split one way
and read split another, half of it passing between the cores on every call; on a Zen 5 VM that
slowed for minutes at a time (the C=3 stem's copy 0.10 -> 0.18 ms, per tile 0.10 -> 0.11).

An epilogue (bias, activation, residual add: the output stage after the conv) either runs as a
pass of its own over the conv's output, or (``fuse_epilogue``) writes each tile as the conv
finishes it: the tiles then run in the epilogue's loops, and the conv's output never makes a
round trip through memory.
"""

from __future__ import annotations

import math

from ..dtype import dtype
from ..schedule import Schedule
from ..schedule.stage import Stage
from ..target import Target
from ..te.tensor import Tensor
from ..workload import Workload
from .conv_tiles import (
    channel_default,
    channel_opt_level,
    depthwise_default,
    nhwc_default,
    scattered_column_tile,
    tile_width,
    wide_depthwise_default,
)
from .space import Config, Constraint, Knob, SearchSpace
from .template import (
    DesignSpace,
    column_operand,
    common_knobs,
    finish,
    lanes_for,
    split_vectorize,
    vector_columns,
    window_stage,
)

ROWS = (1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16, 28)
C_BLOCKS = (0, 32, 128, 256)


def conv_space(wl: Workload, target: Target) -> DesignSpace:
    lanes = lanes_for(target)
    regs = target.vector_registers
    main, layout, (n_, a1, a2, a3), ext = window_stage(wl, "conv2d")
    # (row-tile axis, vector axis): NCHW tiles channels x columns, NHWC columns x channels
    row, col = (a1, a3) if layout == "NCHW" else (a2, a3)
    lane_choices = tuple(x for x in (8, 16) if x <= lanes) or (lanes,)
    # vectors over output channels: in a depthwise conv every lane reads its own input plane
    # (Zen 5: 3-4x slower than column tiles), but groups of 8+ channels share inputs (ResNeXt-50's
    # 32-group 3x3 convs: 16 x 7 channel tiles 3.1x the column tiles' speed at 14x14 and stride 2)
    groups = main.tensor.attrs.get("groups", 1)
    grouped = groups > 1
    by_channel = layout == "NCHW" and ext[a1] // groups >= 8
    stages = Schedule(wl.outputs).stages
    padded = any(st.tensor.tag == "pad" for st in stages)
    # an epilogue (bias, activation, residual add) is its own output stage after the conv
    epilogue = any(st.is_output and st.tensor.tag != "conv2d" for st in stages)
    # a depthwise NCHW conv's column tile can instead run down one channel's output rows,
    # which then share their input rows (a window of R rows slides by the stride)
    depthwise = layout == "NCHW" and grouped and ext[main.reduce_axes[0].name] == 1
    # channel tiles of a conv of many input channels can run them a block at a time outside the
    # tiles, so the input block stays in L2 for every channel tile (Zen 3, tuned tiles: 1.13x at
    # 1024 -> 256 1x1 on 14x14; 1.2x the default 3x3 at 512 -> 512 on 7x7; 0.5-0.8x at 128-480);
    # or, 32 channels a block, so a tile's weight panel (32 x R x S x 16 floats: 18 KB at 3x3)
    # stays in L1 for the tiles of a row, where a whole panel of a long reduction streams from
    # L2 for every tile (AVX2 Zen 3, Inception's 288 -> 384 3x3/2 at 35x35, reduction 2592:
    # the tuned 6x2 tile 1.22x +- 9%; ResNet-50's 128 -> 128 3x3/2, reduction 1152: 0.95x)
    reduction = math.prod(ext[a.name] for a in main.reduce_axes)
    many = ext[main.reduce_axes[0].name] >= 512 or reduction >= 2048
    # a block splits the channels in two or more (rfactor refuses one block of them all)
    c_blocks = tuple(b for b in C_BLOCKS if b < ext[main.reduce_axes[0].name])
    blockable = by_channel and not grouped and many
    # per variant: (axis of the broadcast rows, axis of the vectors)
    tile_axes = {"columns": (row, col), "channels": (a3, a1), "pixels": (a2, col)}

    def tile_axes_of(c: Config) -> tuple[str, str]:
        return tile_axes["pixels" if c.get("row_axis") == "pixels" else c["vector_axis"]]

    knobs = [
        Knob("vector_axis", ("columns", "channels") if by_channel else ("columns",)),
        Knob("rows", tuple(x for x in ROWS if x <= max(ext[row], ext[a3], depthwise * ext[a2]))),
        Knob("vectors", (1, 2, 3, 4, 5, 6, 7, 8)),
        Knob("lanes", lane_choices),
        Knob("pixel_rows", tuple(x for x in (1, 2, 4) if x <= ext[a2])),
        Knob("inline_pad", (False, True)),
        # padded convs only (an inlined pad ignores it), absent from configs recorded before it
        *([Knob("pad_at", ("root", "tile"), absent_means="root")] if padded else []),
        Knob("reduce_order", ("crs", "rsc")),
        Knob("parallel_fuse", (False, True)),
        # only where there is an epilogue: the configs of every other conv, and those recorded
        # before the knob existed, stay points of the space
        *([Knob("fuse_epilogue", (True, False))] if epilogue else []),
        # NHWC only (no NCHW record lacks it): channel blocks outside the pixel loops
        *([Knob("channels_outer", (False, True))] if layout == "NHWC" else []),
        # NHWC only, and absent from the configs recorded before it: a tile's weights read as
        # one contiguous stream from output-channel panels instead of rows K floats apart
        *([Knob("pack_weights", (False, True), absent_means=False)] if layout == "NHWC" else []),
        # depthwise NCHW only, and absent from the configs recorded before it
        *([Knob("row_axis", ("channels", "pixels"), absent_means="channels")] if depthwise else []),
        # channel tiles only, and absent from the configs recorded before it: input channels
        # a block at a time outside the tiles (GotoBLAS's kc)
        *([Knob("c_block", c_blocks, absent_means=0)] if blockable else []),
        *common_knobs(),
    ]
    constraints = [
        Constraint(
            "register_tile_fits",
            lambda c: c["rows"] * c["pixel_rows"] * c["vectors"] + c["vectors"] + 1 <= regs,
        ),
        Constraint("rows_within_output", lambda c: c["rows"] <= ext[tile_axes_of(c)[0]]),
        Constraint(
            "tile_not_wider_than_output",
            lambda c: (
                c["vectors"] == 1 or (c["vectors"] - 1) * c["lanes"] < ext[tile_axes_of(c)[1]]
            ),
        ),
        Constraint(
            "pixel_rows_only_tile_channels",
            lambda c: c["vector_axis"] == "channels" or c["pixel_rows"] == 1,
        ),
        Constraint(
            "c_block_splits_the_channels_of_unfused_channel_tiles",
            lambda c: (
                not c.get("c_block")
                or (c["vector_axis"] == "channels" and not c.get("fuse_epilogue"))
            ),
        ),
    ]

    def build(config: Config) -> Schedule:
        s = Schedule(wl.outputs)
        st = next(x for x in s.stages if x.tensor.tag == "conv2d")
        name = st.name
        for other in list(s.stages):
            padding = other.tensor.tag == "pad"
            producer = other.attach == ("root",) and not other.is_output and other is not st
            if (padding and config["inline_pad"]) or (producer and not padding):
                s.compute_inline(other.name)
        host = name  # the stage whose loops run the tiles: the conv, or its fused epilogue
        if config.get("fuse_epilogue", False):
            host = next(x.name for x in s.stages if x.is_output)
        if config["vector_axis"] == "channels":
            _channels(s, name, host, (n_, a1, a2, a3), config)
        else:
            pixels = config.get("row_axis") == "pixels"
            tile_row, middle = (a2, a1) if pixels else (row, a2 if layout == "NCHW" else a1)
            _columns(s, name, host, layout, (n_, a1, a2, a3), (tile_row, middle, col), config)
        # the loop the threads share (a block loop of input channels stays outside, serial)
        leaves = [lp.name for lp in s[host].leaves if lp.kind == "spatial"]
        outer = leaves[1] if ext[n_] == 1 else leaves[0]
        if target.num_threads > 1:
            if config["parallel_fuse"]:
                outer = s.fuse(host, leaves[1], leaves[2])
            s.parallel(host, outer)
        if config.get("pad_at") == "tile" and not config["inline_pad"]:
            _pad_per_tile(s, host, outer, config["lanes"])
        return finish(s, config, config["lanes"], target.num_threads > 1, (name, host))

    lanes_d, vectors_d = tile_width(ext[col], lane_choices)
    # channels of a grouped NCHW conv (each its own input plane) per tile: at least 14 vector
    # accumulators on narrow rows (Zen 5, MobileNetV2's depthwise convs: 7 channels x 2
    # vectors ran 1.2-1.3x faster than 3 x 2 at 14x14; as fast at 28x28 and 7x7)
    depth = max(3, min(7, -(-14 // vectors_d))) if grouped and layout == "NCHW" else 3
    default = {
        "vector_axis": "columns",
        "rows": max(
            x
            for x in knobs[1].int_choices
            if x <= max(1, (regs - vectors_d - 1) // vectors_d) and x <= min(depth, ext[row])
        ),
        "vectors": vectors_d,
        "lanes": lanes_d,
        "pixel_rows": 1,
        # a grouped (depthwise) conv reads each input element R*S times: a padded copy is a
        # pass as long as the conv's own (inlined, 1.3-1.5x faster on Zen 4 at 112x112..28x28)
        "inline_pad": grouped,
        "reduce_order": "crs",
        "parallel_fuse": False,
        "opt_level": "O3",
    } | ({"fuse_epilogue": True} if epilogue else {})
    if depthwise and regs < 32:  # measured on AVX2 (see depthwise_default)
        window = ext[main.reduce_axes[1].name]
        default |= depthwise_default(
            ext[col], ext[a2], window, knobs[1].int_choices, lane_choices, regs
        )
    elif depthwise:
        default |= wide_depthwise_default(ext[col], ext[a2], knobs[1].int_choices, lane_choices)
    if layout == "NHWC":
        # weight panels: the tile reads one contiguous stream, packed once with the model. Zen
        # 5, 2 threads, in ResNet-18: 3x3 convs 1.07x faster at 28x28, 1.3-1.4x at 14x14,
        # 2.0x at 7x7 (the model 10.1 -> 7.5 ms); as AVX2 1.04x at 56x56, 1.3-1.5x at 28x28,
        # 1.9-3.4x from 14x14 (38 -> 20 ms); MobileNetV2's 1x1 convs up to 1.4x at 7x7 (2.15
        # -> 1.98 ms). A depthwise conv's few weights ran as fast either way.
        default |= {"channels_outer": False, "pack_weights": not grouped}
    # a short reduction leaves a channel tile's scattered NCHW stores the main cost (Zen 5,
    # MobileNetV2's 16->96 1x1 at 112x112: columns 1.5x faster; 32 registers: see the function)
    stride = main.tensor.attrs.get("stride", (1, 1))[1]
    plane = ext[a2] * ext[a3] * dtype(main.tensor.dtype).size
    scattered = scattered_column_tile(plane, reduction, stride, ext[col], ext[a1], lanes, regs)
    if by_channel and not grouped and scattered is not None:  # (all measured ungrouped)
        default |= scattered
    elif by_channel and not (reduction <= lanes and stride == 1 and ext[col] >= 2 * lanes):
        default |= channel_default(ext[a1], ext[a3], knobs[1].int_choices, lanes, regs)
        window_cols = ext[main.reduce_axes[-1].name]  # NCHW reduces over (c, r, s)
        default["opt_level"] = channel_opt_level(
            default, regs, window_cols, stride, ext[a1] // groups
        )
        # vectors along channels reach a fused epilogue through a strided tile: it pays where a
        # short reduction makes the conv memory-bound and the output is large (Zen 4: 1x1
        # convs 1.6x faster at 16x112x112, 1.3x at 24x56x56 and 128x28x28, as fast at
        # 192x28x28, 0.6-0.9x at 14x14 and 7x7; 3x3 convs of 64-128 channels 0.75-1.0x)
        if epilogue:
            default["fuse_epilogue"] = ext[a2] * ext[a3] >= 28 * 28 and reduction <= 256
        # an input past half of L2 is read again for every block of output channels: a block
        # of input channels that fits stays there for all of them, its weights in L1 (Zen 3,
        # ResNet-50's 1024 -> 256 1x1 at 14x14, 2x5 tiles: 256-channel blocks 1.11x faster,
        # 128 1.09x; 32 0.78x, each block reading and writing the output once more)
        if blockable:  # (an epilogue of such a long reduction runs apart: see above)
            default["c_block"] = _input_block(main, c_blocks, target.l2_bytes // 2)
    elif epilogue and layout == "NCHW":
        # an output row narrower than a vector makes the fused tile's every store masked
        # (Zen 5, depthwise 576x7x7 and 960x7x7: 1.6-2.3x slower fused than apart)
        default["fuse_epilogue"] = ext[col] >= lane_choices[0]
    if layout == "NHWC" and regs >= 32:
        group_channels = ext[main.reduce_axes[-1].name]  # NHWC reduces over (r, s, c)
        default |= nhwc_default(ext[a3], ext[a2], knobs[1].int_choices, lane_choices[-1], regs)
        default["reduce_order"] = "rsc" if group_channels >= lane_choices[-1] else "crs"
        # weights past twice L2 stay hot while a channel block runs over all its pixels
        # (Zen 5, ResNet-18's 512-channel 3x3 convs, 9.4 MB each: 0.9x the time in the model;
        # the 37 KB stem 1.3x slower so)
        weight_bytes = reduction * ext[a3] * 4
        default["channels_outer"] = default["parallel_fuse"] = weight_bytes > 2 * target.l2_bytes
    if padded:  # an NCHW first conv (C <= 4) does little work per padded element, so the
        # copy's handoff between threads weighs (Zen 5, 3x3/2 stem at 224: 0.099 ms median per
        # tile, 0.103 copied once; 90th percentile 0.103 and 0.133; 7x7/2: 0.58 and 0.62 ms).
        # Wide convs ran 0-6% slower per tile, re-padding each iteration's halo rows.
        first = layout == "NCHW" and not grouped and ext[main.reduce_axes[0].name] <= 4
        default["pad_at"] = "tile" if first and not default["inline_pad"] else "root"
    return DesignSpace(wl, target, SearchSpace(knobs, constraints), build, default)


def _pad_per_tile(s: Schedule, host: str, loop: str, lanes: int) -> None:
    """The pad stage computed in ``host``'s ``loop`` (the one the threads share): each
    iteration pads the input rows it reads, vectorized along the innermost."""
    pad = next(st.name for st in s.stages if st.tensor.tag == "pad")
    s.compute_at(pad, host, loop)
    inner = s[pad].leaves[-1].name
    split_vectorize(s, pad, inner, s[pad].extents()[inner], lanes)


def _input_block(main: Stage, blocks: tuple[int, ...], budget: int) -> int:
    """The most input channels, 128 or more, a block whose input planes fit ``budget`` bytes,
    where all of them do not (else 0: no blocks). The planes are the conv's NCHW input's, read
    through its pad stage if it has one (a model's conv task has no C, H, W parameters)."""
    x = _data_input(main.tensor)
    channels, plane = x.shape[1], x.shape[2] * x.shape[3] * 4
    if channels * plane <= budget:
        return 0
    return max((b for b in blocks if b >= 128 and b * plane <= budget), default=0)


def _data_input(conv: Tensor) -> Tensor:
    """The placeholder a conv reads its data from, through its pad stage: its body's first read
    (the weights are read second)."""
    data = conv.inputs[0]
    return data if data.is_placeholder else _data_input(data)


def _columns(s: Schedule, name: str, host: str, layout: str, axes, tile_axes, config) -> None:
    """Tile channels (NCHW) or columns (NHWC), or (``row_axis="pixels"``, depthwise NCHW) one
    channel's output rows, x a vector-wide run of the innermost axis; ``tile_axes`` is (the
    tile's row axis, the axis between the tiles, the vector axis). The tiles run in ``host``'s
    loops (the conv's, or its epilogue's: ``_place_tile``).

    A tile of output rows unrolls the window's rows as well: output row ``p`` reads input row
    ``p*stride + r``, so each input row's vectors are loaded once for every (p, r) reading them
    (gcc merges the identical loads of the unrolled block), and each weight is broadcast once
    for the tile's rows: a 7x7 window on 4 rows loads 10 rows x 7 vectors for 196 FMAs."""
    row, _, col = tile_axes
    pixels = config.get("row_axis") == "pixels"
    rows, lanes = config["rows"], config["lanes"]
    width = config["vectors"] * lanes
    packed = column_operand(s[name], col) if config.get("pack_weights", False) else None
    cache = s.cache_write(name, "register")
    hosted = _host_axes(s, name, host, axes)
    h_row, middle, h_col = (hosted[axes.index(a)] for a in tile_axes)
    ro, ri = s.split(host, h_row, rows)
    co, ci = s.split(host, h_col, width)
    if config.get("channels_outer", False):  # NHWC: a channel block's weights reused while hot
        s.reorder(host, [hosted[0], co, middle, ro, ri, ci])
    elif layout == "NCHW" and not pixels:
        s.reorder(host, [hosted[0], ro, middle, co, ri, ci])
    else:  # NHWC, or a depthwise channel's plane, its rows in tiles
        s.reorder(host, [hosted[0], middle, ro, co, ri, ci])
    _place_tile(s, name, host, cache, ro if config.get("channels_outer", False) else co)
    c, r, sk = (lp.name for lp in s[cache].leaves if lp.kind == "reduce")
    if layout == "NHWC":
        r, sk, c = c, r, sk  # NHWC reduce axes are (r, s, c)
    # output rows: each column offset's window rows unrolled, for their shared loads
    red = [c, sk, r] if pixels else [c, r, sk] if config["reduce_order"] == "crs" else [r, sk, c]
    s.reorder(cache, [*red, row, col])
    if pixels:
        s.unroll(cache, r)
    s.unroll(cache, row)
    vector_columns(s, cache, col, width, lanes)
    if host != name:  # the conv's own loops copy the registers to the tile
        s.unroll(name, row)
        vector_columns(s, name, col, width, lanes)
    s.unroll(host, ri)
    vector_columns(s, host, ci, width, lanes)
    if packed is not None:
        # W[R, S, C, K] -> W_pack[K/width, R, S, C, width] (crs: [K/width, C, R, S, width]):
        # the panel in the reduce loops' order, so the tile's weight loads run contiguously
        panel = (2, 0, 1) if config["reduce_order"] == "crs" else (0, 1, 2)
        s.pack(packed[0], cache, packed[1], width, (3, *panel, 4))


def _channels(s: Schedule, name: str, host: str, axes, config) -> None:
    """``vectors`` x ``lanes`` output channels x ``pixel_rows`` x ``rows`` output pixels."""
    _, k, p, q = axes
    lanes = config["lanes"]
    width = config["vectors"] * lanes
    weights, _ = column_operand(s[name], k)
    if config.get("c_block"):  # tiles sum one block of input channels, the conv the blocks
        cache = s.rfactor(name, s[name].reduce_axes[0].name, config["c_block"], "register")
    else:
        cache = s.cache_write(name, "register")
    blocks = [lp.name for lp in s[name].leaves if lp.kind == "reduce"]
    h_n, h_k, h_p, h_q = _host_axes(s, name, host, axes)
    ko, ki = s.split(host, h_k, width)
    po, pi = s.split(host, h_p, config["pixel_rows"])
    qo, qi = s.split(host, h_q, config["rows"])
    s.reorder(host, [h_n, *blocks, ko, po, qo, pi, qi, ki])
    _place_tile(s, name, host, cache, qo)
    c, r, sk = (lp.name for lp in s[cache].leaves if lp.kind == "reduce")
    red = [c, r, sk] if config["reduce_order"] == "crs" else [r, sk, c]
    s.reorder(cache, [*red, p, q, k])
    s.unroll(cache, p)
    s.unroll(cache, q)
    vector_columns(s, cache, k, width, lanes)
    if host != name:  # the conv's own loops copy the registers to the tile
        s.reorder(name, [p, q, k])
        s.unroll(name, p)
        s.unroll(name, q)
        vector_columns(s, name, k, width, lanes)
    s.unroll(host, pi)
    s.unroll(host, qi)
    vector_columns(s, host, ki, width, lanes)
    s.pack(weights, cache, 0, width)  # W_pack[K/width, C, R, S, width]


def _host_axes(s: Schedule, name: str, host: str, axes) -> tuple[str, ...]:
    """The names of the conv's four output axes in ``host``'s loops."""
    return tuple(axes) if host == name else tuple(lp.name for lp in s[host].roots)


def _place_tile(s: Schedule, name: str, host: str, cache: str, loop: str) -> None:
    """One tile's register sums (``cache``) computed at the conv's tile ``loop``; or, with the
    epilogue as ``host``, the conv's tile computed inside the epilogue's tile loop, so the
    epilogue writes each tile at once: the conv's output makes no round trip through memory
    and takes no parallel region of its own.

        for tiles: conv[tile] = sums             for tiles: conv_tile = sums
        for all:   y = clip(conv + bias)   ->               y[tile] = clip(conv_tile + bias)
    """
    if host == name:
        s.compute_at(cache, name, loop)
        return
    s.compute_at(name, host, loop)
    s.compute_at(cache, name, s[name].leaves[0].name)
