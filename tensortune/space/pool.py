"""Pooling design space (the window-reduction stage tagged "pool", NCHW and NHWC; used for the
``maxpool2d`` spec).

A pooling output element reduces a small window (``R x S``) and does one operation per input it
reads, so the kernel is bound by loads and by the latency chain of its accumulator. The register
tile keeps ``rows x vectors`` independent vector accumulators: ``vectors*lanes`` output columns
(NCHW) or channels (NHWC) wide and ``rows`` deep along the chosen ``row_axis``, with the window
loops outside the tile, so every window step issues ``rows*vectors`` independent max/add ops.
With NHWC the vectors run along the channels and every load is contiguous whatever the stride;
with NCHW they run along the output columns: a window of stride 2 to 4 reads its input as
contiguous loads and shuffles per vector (masked in a tail), a larger stride as a gather.
``unroll_window`` unrolls the window loops too (the tile's rows then share their loads).
The pad is materialised once or inlined (its tests then sit in the window loops, and every
window step near an edge is a masked load). The copy costs about one read and write per input;
the inlined tests cost in every window step, so the default materialises the pad once each input
is read several times (a 5x5 stride-1 window, SPPF: 25 reads; measured 1.6x faster than inlined).
"""

from __future__ import annotations

import math

from ..schedule import Schedule
from ..target import Target
from ..workload import Workload
from .space import Config, Constraint, Knob, SearchSpace
from .template import DesignSpace, common_knobs, finish, lanes_for, vector_columns, window_stage

# each input read this often or more: materialise the pad (3x3 stride 1: 9 reads; stride 2: 2.25)
READS_TO_MATERIALISE_PAD = 4


def pool_space(wl: Workload, target: Target) -> DesignSpace:
    lanes = lanes_for(target)
    regs = target.vector_registers
    _, layout, (n_, a1, a2, a3), ext = window_stage(wl, "pool")
    # the vector axis is innermost in memory; rows tile one of the two axes outside it
    col = a3
    row_axes = {"channels": a1, "rows": a2} if layout == "NCHW" else {"rows": a1, "columns": a2}
    lane_choices = tuple(x for x in (4, 8, 16) if x <= lanes) or (lanes,)
    has_pad = any(st.tensor.tag == "pad" for st in Schedule(wl.outputs).stages)
    # how often each input element is read: output elements times the window, over input elements
    reads_per_input = math.prod(ext.values()) / math.prod(wl.inputs[0].shape)
    knobs = [
        Knob("row_axis", tuple(row_axes)),
        Knob("rows", tuple(x for x in (1, 2, 3, 4, 6, 8) if x <= max(ext[a1], ext[a2]))),
        Knob("vectors", (1, 2, 3, 4)),
        Knob("lanes", lane_choices),
        Knob("inline_pad", (True, False) if has_pad else (True,)),
        Knob("parallel_fuse", (False, True)),
        Knob("unroll_window", (False, True), absent_means=False),
        *common_knobs(),
    ]
    constraints = [
        Constraint("register_tile_fits", lambda c: c["rows"] * c["vectors"] + 2 <= regs),
        Constraint("rows_within_output", lambda c: c["rows"] <= ext[row_axes[c["row_axis"]]]),
        Constraint(
            "tile_not_wider_than_output",
            lambda c: c["vectors"] == 1 or (c["vectors"] - 1) * c["lanes"] < ext[col],
        ),
    ]

    def build(config: Config) -> Schedule:
        s = Schedule(wl.outputs)
        st = next(x for x in s.stages if x.tensor.tag == "pool")
        name = st.name
        for other in list(s.stages):
            if other.tensor.tag == "pad" and config["inline_pad"]:
                s.compute_inline(other.name)
        row = row_axes[config["row_axis"]]
        middle = a2 if row == a1 else a1
        width = config["vectors"] * config["lanes"]
        cache = s.cache_write(name, "register")
        ro, ri = s.split(name, row, config["rows"])
        co, ci = s.split(name, col, width)
        outer = [ro, middle] if row == a1 else [middle, ro]
        s.reorder(name, [n_, *outer, co, ri, ci])
        s.compute_at(cache, name, co)
        window = [lp.name for lp in s[cache].leaves if lp.kind == "reduce"]
        s.reorder(cache, [*window, row, col])
        if config["unroll_window"]:
            for w in window:
                s.unroll(cache, w)
        s.unroll(cache, row)
        vector_columns(s, cache, col, width, config["lanes"])
        s.unroll(name, ri)
        vector_columns(s, name, ci, width, config["lanes"])
        if target.num_threads > 1:
            loops = [n_, *outer] if ext[n_] > 1 else outer
            par = s.fuse(name, loops[0], loops[1]) if config["parallel_fuse"] else loops[0]
            s.parallel(name, par)
        return finish(s, config, config["lanes"], target.num_threads > 1, (name,))

    lanes_d = max(x for x in lane_choices if x <= max(ext[col], lane_choices[0]))
    row_d = next(iter(row_axes))
    default = {
        "row_axis": row_d,
        "rows": max(x for x in knobs[1].int_choices if x <= min(4, ext[row_axes[row_d]])),
        "vectors": 1 if ext[col] <= lanes_d else 2,
        "lanes": lanes_d,
        "inline_pad": not has_pad or reads_per_input < READS_TO_MATERIALISE_PAD,
        "parallel_fuse": ext[a1] < 2 * target.num_threads,
        "unroll_window": False,
        "opt_level": "O3",
    }
    return DesignSpace(wl, target, SearchSpace(knobs, constraints), build, default)
