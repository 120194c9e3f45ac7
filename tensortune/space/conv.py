"""conv2d design space (NCHW, NHWC; plain, strided, grouped, depthwise).

A register tile is ``vectors`` vector accumulators wide and ``rows`` deep: each reduction step
loads ``vectors`` vectors and broadcasts ``rows`` scalars, ``rows*vectors`` FMAs per
``rows+vectors`` loads. Knob ``vector_axis`` picks what the vectors run along:

* ``columns``: output columns (NCHW; stride 1 makes the input loads contiguous) and the rows are
  output channels (broadcast weights). For NHWC the vectors run along the output channels.
  Narrow output rows waste lanes; strides 2 to 4 make each input vector a few contiguous
  loads and shuffles, larger strides a gather.
* ``channels`` (NCHW, ungrouped): an implicit GEMM, as in oneDNN's NCHWc kernels. The vectors
  run along output channels, read from weights packed into ``W_pack[K/w, C, R, S, w]``
  (``w = vectors*lanes``), and the rows are ``pixel_rows x rows`` output pixels whose input
  scalars are broadcast (any stride: scalar loads). The NCHW write-back scatters across
  channels, once per C*R*S FMAs.

The pad stage is either materialised once or inlined (its tests are then loop-invariant in the
channel loop when that loop is innermost, ``reduce_order="rsc"``).
"""

from __future__ import annotations

from ..schedule import Schedule
from ..target import Target
from ..workload import Workload
from .space import Config, Constraint, Knob, SearchSpace
from .template import (
    DesignSpace,
    apply_common,
    column_operand,
    common_knobs,
    lanes_for,
    schedule_simple,
    vector_columns,
    vector_registers,
    window_stage,
)

ROWS = (1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16, 28)


def conv_space(wl: Workload, target: Target) -> DesignSpace:
    lanes = lanes_for(target)
    regs = vector_registers(target)
    main, layout, (n_, a1, a2, a3), ext = window_stage(wl, "conv2d")
    # (row-tile axis, vector axis): NCHW tiles channels x columns, NHWC columns x channels
    row, col = (a1, a3) if layout == "NCHW" else (a2, a3)
    lane_choices = tuple(x for x in (8, 16) if x <= lanes) or (lanes,)
    # vectors over output channels need every lane to read the same input element
    by_channel = layout == "NCHW" and main.tensor.attrs.get("groups", 1) == 1
    # per variant: (axis of the broadcast rows, axis of the vectors)
    tile_axes = {"columns": (row, col), "channels": (a3, a1)}
    knobs = [
        Knob("vector_axis", ("columns", "channels") if by_channel else ("columns",)),
        Knob("rows", tuple(x for x in ROWS if x <= max(ext[row], ext[a3]))),
        Knob("vectors", (1, 2, 3, 4, 5, 6, 7, 8)),
        Knob("lanes", lane_choices),
        Knob("pixel_rows", tuple(x for x in (1, 2, 4) if x <= ext[a2])),
        Knob("inline_pad", (False, True)),
        Knob("reduce_order", ("crs", "rsc")),
        Knob("parallel_fuse", (False, True)),
        *common_knobs(),
    ]
    constraints = [
        Constraint(
            "register_tile_fits",
            lambda c: c["rows"] * c["pixel_rows"] * c["vectors"] + c["vectors"] + 1 <= regs,
        ),
        Constraint(
            "rows_within_output", lambda c: c["rows"] <= ext[tile_axes[c["vector_axis"]][0]]
        ),
        Constraint(
            "tile_not_wider_than_output",
            lambda c: (
                c["vectors"] == 1
                or (c["vectors"] - 1) * c["lanes"] < ext[tile_axes[c["vector_axis"]][1]]
            ),
        ),
        Constraint(
            "pixel_rows_only_tile_channels",
            lambda c: c["vector_axis"] == "channels" or c["pixel_rows"] == 1,
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
        if config["vector_axis"] == "channels":
            _channels(s, name, (n_, a1, a2, a3), config)
        else:
            _columns(s, name, layout, (n_, a1, a2, a3), row, col, config)
        if target.num_threads > 1:
            leaves = [lp.name for lp in s[name].leaves]
            outer = leaves[1] if ext[n_] == 1 else leaves[0]
            if config["parallel_fuse"]:
                outer = s.fuse(name, leaves[1], leaves[2])
            s.parallel(name, outer)
        for other in s.stages:
            if other.attach == ("root",) and other.name != name:
                schedule_simple(s, other, config["lanes"], target.num_threads > 1)
        apply_common(s, config)
        return s

    lanes_d, vectors_d = _tile_width(ext[col], lane_choices)
    default = {
        "vector_axis": "columns",
        "rows": max(
            x
            for x in knobs[1].int_choices
            if x <= max(1, (regs - vectors_d - 1) // vectors_d) and x <= min(3, ext[row])
        ),
        "vectors": vectors_d,
        "lanes": lanes_d,
        "pixel_rows": 1,
        "inline_pad": False,
        "reduce_order": "crs",
        "parallel_fuse": False,
        "opt_level": "O3",
    }
    if by_channel:
        default |= _channel_default(ext[a1], ext[a3], knobs[1].int_choices, lanes, regs)
    return DesignSpace(wl, target, SearchSpace(knobs, constraints), build, default)


def _columns(s: Schedule, name: str, layout: str, axes, row: str, col: str, config) -> None:
    """Tile channels (NCHW) or columns (NHWC) x a vector-wide run of the innermost axis."""
    n_, a1, a2, _ = axes
    rows, lanes = config["rows"], config["lanes"]
    width = config["vectors"] * lanes
    cache = s.cache_write(name, "register")
    ro, ri = s.split(name, row, rows)
    co, ci = s.split(name, col, width)
    middle = a2 if layout == "NCHW" else a1
    if layout == "NCHW":
        s.reorder(name, [n_, ro, middle, co, ri, ci])
    else:
        s.reorder(name, [n_, middle, ro, co, ri, ci])
    s.compute_at(cache, name, co)
    c, r, sk = (lp.name for lp in s[cache].leaves if lp.kind == "reduce")
    if layout == "NHWC":
        r, sk, c = c, r, sk  # NHWC reduce axes are (r, s, c)
    red = [c, r, sk] if config["reduce_order"] == "crs" else [r, sk, c]
    s.reorder(cache, [*red, row, col])
    s.unroll(cache, row)
    vector_columns(s, cache, col, width, lanes)
    s.unroll(name, ri)
    vector_columns(s, name, ci, width, lanes)


def _channels(s: Schedule, name: str, axes, config) -> None:
    """``vectors`` x ``lanes`` output channels x ``pixel_rows`` x ``rows`` output pixels."""
    n_, k, p, q = axes
    lanes = config["lanes"]
    width = config["vectors"] * lanes
    weights, _ = column_operand(s[name], k)
    cache = s.cache_write(name, "register")
    ko, ki = s.split(name, k, width)
    po, pi = s.split(name, p, config["pixel_rows"])
    qo, qi = s.split(name, q, config["rows"])
    s.reorder(name, [n_, ko, po, qo, pi, qi, ki])
    s.compute_at(cache, name, qo)
    c, r, sk = (lp.name for lp in s[cache].leaves if lp.kind == "reduce")
    red = [c, r, sk] if config["reduce_order"] == "crs" else [r, sk, c]
    s.reorder(cache, [*red, p, q, k])
    s.unroll(cache, p)
    s.unroll(cache, q)
    vector_columns(s, cache, k, width, lanes)
    s.unroll(name, pi)
    s.unroll(name, qi)
    vector_columns(s, name, ki, width, lanes)
    s.pack(weights, cache, 0, width)  # W_pack[K/width, C, R, S, width]


def _channel_default(
    channels: int, width: int, pixels: tuple[int, ...], lanes: int, regs: int
) -> Config:
    """The channel tile feeding the most FMAs per load (``vectors*rows`` FMAs per
    ``vectors + rows`` loads) that fits the registers, preferring tiles that cover the output
    channels evenly (a ragged channel tile runs guarded). The pad is materialised and the
    channel loop outermost: on Zen 3 (AVX2) 2x6 tiles ran 1.6x faster than 1x14 ones, and the
    same tile with the pad inlined and the channel loop innermost ran at half speed."""
    options = [
        (cv, pw)
        for cv in (1, 2, 3, 4)
        for pw in pixels
        if cv * pw + cv + 1 <= regs and (cv - 1) * lanes < channels and pw <= width
    ]
    even = [o for o in options if channels % (o[0] * lanes) == 0] or options
    cv, pw = max(even, key=lambda o: (o[0] * o[1] / (o[0] + o[1]), -_waste(width, o[1])))
    return {
        "vector_axis": "channels",
        "rows": pw,
        "vectors": cv,
        "lanes": lanes,
        "inline_pad": False,
        "reduce_order": "crs",
        "parallel_fuse": True,  # (channel blocks x output rows) chunks for the threads
    }


def _waste(extent: int, tile: int) -> int:
    """Iterations a tile of ``tile`` computes past the end of ``extent``."""
    return -(-extent // tile) * tile - extent


def _tile_width(extent: int, lane_choices: tuple[int, ...]) -> tuple[int, int]:
    """(lanes, vectors) covering the output row with the least padding, then the widest."""
    options = [(lanes, v) for lanes in lane_choices for v in range(1, 8)]
    return min(options, key=lambda o: (_waste(extent, o[0] * o[1]), -o[0] * o[1]))
