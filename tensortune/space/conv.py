"""conv2d design space (NCHW, NHWC; plain, strided, grouped, depthwise).

Register-tiled over output channels x output columns: a ``kr x (qv*lanes)`` accumulator tile in
vector registers; each step broadcasts ``kr`` weights and loads ``qv`` input vectors (contiguous
for stride 1 in NCHW), so the tile does ``kr*qv`` FMAs per ``kr+qv`` loads. For NHWC the vector
axis is the output channel. The pad stage is either materialised once or inlined (then padding is
tested at the vector's first and last lane).
"""

from __future__ import annotations

from ..schedule import Schedule
from ..target import Target
from ..workload import Workload
from .space import Config, Constraint, Knob, SearchSpace
from .template import (
    DesignSpace,
    apply_common,
    common_knobs,
    lanes_for,
    schedule_simple,
    vector_columns,
    vector_registers,
)


def conv_space(wl: Workload, target: Target) -> DesignSpace:
    lanes = lanes_for(target)
    regs = vector_registers(target)
    probe = Schedule(wl.outputs)
    main = next(st for st in probe.stages if st.tensor.tag == "conv2d")
    layout = main.tensor.attrs.get("layout", "NCHW")
    n_, a1, a2, a3 = (a.name for a in main.axes)
    # (row-tile axis, vector axis): NCHW tiles channels x columns, NHWC columns x channels
    row, col = (a1, a3) if layout == "NCHW" else (a2, a3)
    ext = main.root_extents
    lane_choices = tuple(x for x in (8, 16) if x <= lanes) or (lanes,)
    knobs = [
        Knob("rows", tuple(x for x in (1, 2, 3, 4, 6, 8, 12) if x <= ext[row])),
        Knob("vectors", (1, 2, 3, 4, 5, 6, 7, 8)),
        Knob("lanes", lane_choices),
        Knob("inline_pad", (False, True)),
        Knob("reduce_order", ("crs", "rsc")),
        Knob("parallel_fuse", (False, True)),
        *common_knobs(),
    ]
    constraints = [
        Constraint(
            "register_tile_fits", lambda c: c["rows"] * c["vectors"] + c["vectors"] + 1 <= regs
        ),
        Constraint(
            "tile_not_wider_than_output",
            lambda c: c["vectors"] == 1 or (c["vectors"] - 1) * c["lanes"] < ext[col],
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
        rows, width, lanes_ = config["rows"], config["vectors"] * config["lanes"], config["lanes"]
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
        vector_columns(s, cache, col, width, lanes_)
        s.unroll(name, ri)
        vector_columns(s, name, ci, width, lanes_)
        if target.num_threads > 1:
            leaves = [lp.name for lp in s[name].leaves]
            outer = leaves[1] if ext[n_] == 1 else leaves[0]
            if config["parallel_fuse"]:
                outer = s.fuse(name, leaves[1], leaves[2])
            s.parallel(name, outer)
        for other in s.stages:
            if other.attach == ("root",) and other.name != name:
                schedule_simple(s, other, lanes_, target.num_threads > 1)
        apply_common(s, config)
        return s

    lanes_d, vectors_d = _tile_width(ext[col], lane_choices)
    default = {
        "rows": max(
            x
            for x in knobs[0].choices
            if x <= max(1, (regs - vectors_d - 1) // vectors_d) and x <= 3
        ),
        "vectors": vectors_d,
        "lanes": lanes_d,
        "inline_pad": False,
        "reduce_order": "crs",
        "parallel_fuse": False,
        "opt_level": "O3",
    }
    return DesignSpace(wl, target, SearchSpace(knobs, constraints), build, default)


def _tile_width(extent: int, lane_choices: tuple[int, ...]) -> tuple[int, int]:
    """(lanes, vectors) covering the output row with the least padding, then the widest."""
    options = [(lanes, v) for lanes in lane_choices for v in range(1, 8)]
    return min(
        options, key=lambda o: (-(-extent // (o[0] * o[1])) * o[0] * o[1] - extent, -o[0] * o[1])
    )
