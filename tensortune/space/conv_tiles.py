"""The default register tiles of the conv design space, as measured: which tile shape each
register file, layout and window gets when nothing has been tuned (``space/conv.py`` holds the
space and its schedules; this module only picks sizes from the measurements in its docstrings)."""

from __future__ import annotations

from .space import Config


def nhwc_default(
    channels: int, width: int, pixels: tuple[int, ...], lanes: int, regs: int
) -> Config:
    """NHWC on 32 registers: ``vectors`` x ``lanes`` output channels (contiguous weight rows
    and stores) x ``rows`` pixels of an output row, as ``_wide_tile`` cuts them, preferring 3
    vectors to 1 where 2 do not cover the channels evenly; the channel loop innermost, so each
    pixel's reads run along contiguous input channels and weight rows (where there are a
    vector's worth of them: the ResNet stem's 3 channels ran as fast or faster outermost).

    Measured on Zen 5 (AVX-512, one thread) on MobileNetV2's and ResNet-18's convs: 2x7 tiles
    against the old default (the widest even vector run x 3 pixels): 1x1 convs 1.5-2.5x faster
    (24->144 at 56x56: 202 -> 91 us; NCHW's default 172), depthwise 3x3 0.85-1.8x (144 at 56x56:
    109 -> 60 us; NCHW 131; 384 at 14x14: 10.6 -> 12.7), dense 3x3 1.4-2.6x (512 at 7x7: 2695
    -> 1035 us; NCHW 1356).
    """
    vectors, rows = _wide_tile(channels, width, pixels, lanes, regs, (2, 3, 1))
    return {"vectors": vectors, "lanes": lanes, "rows": rows}


def channel_default(
    channels: int, width: int, pixels: tuple[int, ...], lanes: int, regs: int
) -> Config:
    """The channel tile of the default: ``vectors`` x ``lanes`` output channels x ``rows``
    pixels of an output row. The pad is materialised and the channel loop outermost: on Zen 3
    (AVX2) 2x6 tiles ran 1.6x faster than 1x14 ones, and the same tile with the pad inlined and
    the channel loop innermost ran at half speed."""
    if regs >= 32:
        vectors, rows = _wide_tile(channels, width, pixels, lanes, regs)
    else:
        vectors, rows = _narrow_tile(channels, width, pixels, lanes, regs)
    return {
        "vector_axis": "channels",
        "rows": rows,
        "vectors": vectors,
        "lanes": lanes,
        "inline_pad": False,
        "reduce_order": "crs",
        "parallel_fuse": True,  # (channel blocks x output rows) chunks for the threads
    }


def scattered_column_tile(
    plane_bytes: int, reduction: int, stride: int, width: int, channels: int, lanes: int, regs: int
) -> Config | None:
    """NCHW on 32 registers: the column tile (8 output channels x 2 vectors of output columns,
    channel blocks and rows shared out together) where a channel tile's write-back, each vector
    scattered over ``lanes`` channel planes, costs more than its FMAs: the planes are a
    multiple of 4 KB apart (the lanes then share one L1 set, past its ways), or the reduction is
    two vectors or less at stride 1 or 2 (27 FMAs per scattered element at a 3x3 stem); else
    None. Only where a row holds the two vectors.

    Measured on Zen 5 (AVX-512, 2 threads; ``benchmarks/conv_ab.py --zoo``, training families'
    layers only), against the channel tile: YOLOv5s' 1x1 convs at 160x160 0.06-0.11x the time
    (2.3-4.8 -> 0.14-0.55 ms), its 3x3 convs there 0.41x (stride 1) and 0.46x (stride 2), its
    6x6/2 stem at 640 0.20x (9.7 -> 1.9 ms); Inception's 3x3/2 stem at 299 0.70x, ShuffleNetV2's
    at 224 0.85x (1.09x with the rows alone shared out); 1x1 convs of 16-32 input channels
    (EfficientNet-B0, ShuffleNetV2) 0.60-0.89x. Kept on channel tiles, where this tile ran
    1.08-1.57x slower: 7x7/2, 4x4/4 and 11x11/4 stems, 3x3 convs of 32 channels at 147x147
    (planes not a multiple of 4 KB, reductions of 147-363); ViT's 16x16/16 patches (33x). Timed
    again with the operands placed afresh per block of calls (one fixed placement had put two
    builds of one config up to 1.27x apart): the ten faster layers 0.06-0.82x, none slower.

    A row of an odd number of vectors leaves a two-vector tile's last column block half empty:
    there 16 channels x 1 vector, where the channels divide into 16. Measured the same way
    (operands placed afresh per block of calls; ``--spec`` shapes of no held-out family), against
    8 x 2: rows of 48, 80, 112 and 144 columns 0.40-0.87x the time (C=3 3x3/2 stems of K=16-64,
    1x1 convs of 16-32 input channels; 0.40x at 80x80, where 8 x 2 swung 17-42 us with the
    operands' placement and 16 x 1 held 16-17); ShuffleNetV2's stem (K=24: 16 x 1 1.16x, 12 x 1
    0.96x) and rows of 104 and 149 columns (1.11x, 1.16x) keep 8 x 2. With 16 x 1, the padding
    tested inline and -O2 took another 0.78-0.97x at every padded shape (3x3 convs, C=3 stems of
    K=16-64 and C=16 at 80x80), 0.97-1.01x unpadded; on 8 x 2 tiles they ran 1.07-3.75x slower."""
    aliased = plane_bytes % 4096 == 0
    short = reduction <= 2 * lanes and stride <= 2
    if regs < 32 or width < 2 * lanes or not (aliased or short):
        return None
    tile: Config = {
        "vector_axis": "columns",
        "rows": 8,
        "vectors": 2,
        "lanes": lanes,
        "parallel_fuse": True,
    }
    if width % (2 * lanes) == lanes and channels % 16 == 0:
        tile |= {"rows": 16, "vectors": 1, "inline_pad": True, "opt_level": "O2"}
    return tile


def channel_opt_level(
    tile: Config, regs: int, window_columns: int, stride: int, group_channels: int
) -> str:
    """-O2 for a channel tile on 16 registers whose pixels share input scalars: gcc's -O3
    peels the short loop over the window's columns and keeps the scalars that neighbouring
    pixels of overlapping windows share broadcast across it (8 for a 6-pixel row of a 3-wide
    window), which beside a 2x6 tile's 12 accumulators and 2 weight vectors spills to the
    stack inside the reduction; -O3 elsewhere. The shared scalars need windows that overlap
    (a stride below their width) and a tile inside one group (its vectors read one input).

    Zen 3 (AVX2, 2 threads, paired medians of 10 rounds, ``conv_ab.py --zoo``), -O2 against
    -O3: Inception-v3's 80 -> 192 3x3 at 73x73 1.65x (112 -> 184 GFLOP/s, ONNX Runtime 179),
    its 288 -> 384 3x3/2 at 35x35 1.32x, YOLOv5s's 64 -> 64 3x3 at 80x80 1.33x, ResNeXt-50's
    32-group 3x3 at 14x14 (16 channels a group) 1.22x, Inception's 5x5 at 35x35 1.07x;
    ResNet-50's 3x3 at 7x7 and 3x3/2 at 56x56, AlexNet's 11x11/4 stem, Inception's 1x7 at
    17x23 as fast (0.98-1.04x). Not where no scalar is shared: ResNeXt's 3x3/2 of 8 channels
    a group (a 16-channel tile across two groups) 1.14x slower; ViT's 16x16/16 patches as fast."""
    shared = window_columns > 1 and stride < window_columns
    inside_a_group = group_channels >= tile["vectors"] * tile["lanes"]
    return "O2" if regs < 32 and shared and inside_a_group else "O3"


def _wide_tile(
    channels: int,
    width: int,
    pixels: tuple[int, ...],
    lanes: int,
    regs: int,
    order: tuple[int, ...] = (2, 1, 3),
) -> tuple[int, int]:
    """32 vector registers (AVX-512): two vectors of channels unless one or three cover them
    evenly and two do not, and 5 to 8 pixels of a row, cut with the least waste, 7 on a tie.

    Measured on Zen 5 (AVX-512, one thread) over every conv of ResNet-18 and MobileNetV2:
    2x7 tiles ran 1.4-1.8x faster than 4x6 ones on the 3x3 convs from 28x28 down to 7x7, 2.1x
    on the 7x7 stride-2 stem, as fast at 56x56, and 1.0-2.0x on the 1x1 convs (4x4: 1.1-1.4x
    slower than 2x7, though it loads less per FMA). A ragged row of tiles costs: 8x2 tiles ran
    1.8x slower than 7x2 on 28-wide rows, 5x3 1.7x slower than 7x3.
    """
    fits = [cv for cv in order if (cv - 1) * lanes < channels]
    even = [cv for cv in fits if channels % (cv * lanes) == 0]
    vectors = (even or fits)[0]
    low = min(5, width)  # fewer pixels a tile load more per FMA
    rows = [pw for pw in pixels if low <= pw <= 8 and vectors * pw + vectors + 1 <= regs]
    return vectors, min(rows, key=lambda pw: (_waste(width, pw), pw != 7, -pw))


def _narrow_tile(
    channels: int, width: int, pixels: tuple[int, ...], lanes: int, regs: int
) -> tuple[int, int]:
    """Fewer registers (AVX2): the tile that fits them and runs an output row in the fewest
    cycles (``_row_cycles``), preferring tiles that cover the output channels evenly (a ragged
    channel tile runs guarded); on a tie, the fewest tiles a row, then the most FMAs per load
    (``vectors*rows`` FMAs per ``vectors + rows`` loads).

    Counting the row's last, narrower tile is what matters on late stages: a 2x6 tile leaves a
    1-pixel 2x1 tile on 7-wide rows, whose 2 accumulators wait on the FMA latency, and a 2x2
    one on 14-wide rows. Zen 3 (AVX2, 2 threads, ResNet-50, paired medians of 10 rounds):
    the 512 -> 512 3x3 at 7x7 as 1x7 1.25x faster than 2x6 (155 GFLOP/s; 2x5 1.09x, 2x4
    0.9x), the 1024 -> 256 1x1 at 14x14 (in 256-channel blocks) as 2x5 1.14x faster than 2x6
    (160 GFLOP/s; 2x4 1.0x, 1x7 0.93x); 28- and 56-wide rows keep 2x6."""
    options = [
        (cv, pw)
        for cv in (1, 2, 3, 4)
        for pw in pixels
        if cv * pw + cv + 1 <= regs and (cv - 1) * lanes < channels and pw <= width
    ]
    even = [o for o in options if channels % (o[0] * lanes) == 0] or options
    return min(
        even,
        key=lambda o: (
            _row_cycles(o[0], o[1], width) / o[0],
            -(-width // o[1]),  # on a tie, the fewest tiles a row: fewer ends
            -o[0] * o[1] / (o[0] + o[1]),
        ),
    )


# Zen 3: two FMAs a cycle; two loads (vector or broadcast) a cycle; an FMA's sum feeds the next
# after 4 cycles, counted as 4.5 (fitted: a tile of exactly 8 accumulators has no slack for its
# loads and loop; with 4, 2x4 tiles would replace the 2x6 measured on 56-wide rows, and 2x4
# ran 1.4x slower than 1x7 on 7-wide ones)
FMAS_PER_CYCLE, FMA_LATENCY, LOADS_PER_CYCLE = 2, 4.5, 2


def _tile_cycles(vectors: int, rows: int) -> float:
    """Cycles of one reduction step of a ``vectors`` x ``rows`` tile: bound by its FMAs, by the
    latency of each accumulator's chain of FMAs, or by its loads."""
    fmas, loads = vectors * rows, vectors + rows
    return max(fmas / FMAS_PER_CYCLE, FMA_LATENCY, loads / LOADS_PER_CYCLE)


def _row_cycles(vectors: int, rows: int, width: int) -> float:
    """Cycles of one reduction step over an output row of ``width`` pixels: its whole tiles
    and the narrower one left at its end."""
    whole, left = divmod(width, rows)
    return whole * _tile_cycles(vectors, rows) + (_tile_cycles(vectors, left) if left else 0)


def depthwise_default(
    width: int,
    height: int,
    window: int,
    pixels: tuple[int, ...],
    lane_choices: tuple[int, ...],
    regs: int,
) -> Config:
    """A depthwise NCHW conv's tile on 16 registers: 8 output rows of one channel x a vector
    of columns (the fewest loads per FMA), or, with a window taller than 5 (8 accumulators, 7
    weights), 4 rows x 2 vectors. The accumulators take half the registers; the rest hold the
    input rows the tile's rows share and the window's weights. A 7x7 window reads its input
    from a padded copy.

    Measured on Zen 3 (AVX2, 2 threads; the old default 2-6 channels x 2-7 vectors of columns,
    the pad inlined), 8x1 / 4x2 row tiles against it: EfficientNet-B0's 5x5 stride-2 conv at
    56x56 1.96x / 1.52x, its 5x5 at 14x14 1.49x / 1.27x, MobileNetV2's 3x3 at 56x56 1.27x /
    1.05x, its 3x3 stride-2 at 56x56 1.41x / 1.44x, its 3x3 at 14x14 1.20x / 1.30x, ConvNeXt-T's
    7x7 at 28x28 1.16x / 1.26x (4x2 from a padded copy: 1.45x)."""
    lanes = next((x for x in lane_choices if x >= width), lane_choices[-1])  # fewest vectors
    vectors = min(2, -(-width // lanes)) if window > 5 else 1
    rows = max(x for x in pixels if x <= min(8, regs // 2 // vectors, height))
    return {
        "row_axis": "pixels",
        "rows": rows,
        "vectors": vectors,
        "lanes": lanes,
        "inline_pad": window < 7,
    }


def wide_depthwise_default(
    width: int, height: int, pixels: tuple[int, ...], lane_choices: tuple[int, ...]
) -> Config:
    """A depthwise NCHW conv's tile on 32 registers: one channel's output rows (which share the
    input rows their windows overlap), at most 8 and at most 14 accumulators, x the fewest,
    widest vectors covering an output row with the least padding.

    Zen 5 (2 threads, 10 rounds, ``conv_ab.py --zoo``: EfficientNet-B0's, ShuffleNetV2's and
    ConvNeXt-T's 3x3, 5x5 and 7x7 layers from 7x7 to 112x112) against the channel-row tiles
    before it: 0.45-0.89x the time on all 10 layers, their sum 474 -> 355 us (without the cap
    on accumulators the 112-wide rows' 3x7 tiles ran 0.72x and 1.08x at stride 2, 2x7 0.67x
    and 0.87x); then the wider vectors where two widths pad alike, and at most 8 rows, 0.61-0.77x
    again on the 8 of 12 layers they change (14 to 56 wide), their sum 225 -> 154 us. Not yet
    timed on other AVX-512 CPUs."""
    lanes, vectors = tile_width(width, lane_choices, wide_lanes=True)
    rows = max(x for x in pixels if x <= max(1, min(8, 14 // vectors, height)))
    return {"row_axis": "pixels", "rows": rows, "vectors": vectors, "lanes": lanes}


def _waste(extent: int, tile: int) -> int:
    """Iterations a tile of ``tile`` computes past the end of ``extent``."""
    return -(-extent // tile) * tile - extent


def tile_width(
    extent: int, lane_choices: tuple[int, ...], wide_lanes: bool = False
) -> tuple[int, int]:
    """(lanes, vectors) covering the output row with the least padding, then the widest, then
    (``wide_lanes``) the fewest, widest vectors."""
    options = [(lanes, v) for lanes in lane_choices for v in range(1, 8)]
    return min(
        options,
        key=lambda o: (_waste(extent, o[0] * o[1]), -o[0] * o[1], -o[0] if wide_lanes else 0),
    )
