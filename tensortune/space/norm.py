"""Normalisation design space (softmax, layer_norm: row statistics, then an elementwise pass).

One parallel loop over blocks of ``rows_per_block`` rows; per row, every other stage (the row
reductions and any elementwise intermediate such as softmax's exp) is computed at that row into
a small row-local buffer, so a row is read from memory once and stays in L1 for the statistics
and the final pass. Reductions keep a vector accumulator (the last axis split by ``lanes``), the
final pass is one vector loop. ``recompute`` inlines the intermediates instead of buffering
them (exp computed twice, no buffer). The whole op is tens of microseconds, so the OpenMP
region is opened once (``parallel`` off: one thread, no region at all); ``unroll`` lets the C
compiler unroll the vector loops with several accumulators (variable expansion, which needs
``fast_math`` to reassociate the sums).
"""

from __future__ import annotations

import math

from ..schedule import Schedule
from ..target import Target
from ..workload import Workload
from .space import Config, Constraint, Knob, SearchSpace
from .template import DesignSpace, apply_common, common_knobs, inline_injective, lanes_for

ROWS_PER_BLOCK = (1, 2, 4, 8, 16, 32, 64)
UNROLL = (1, 2, 4, 8)
BLOCK_BUFFER_BYTES = 16 * 1024  # a block's buffered intermediate (exp), well within L1


def norm_space(wl: Workload, target: Target) -> DesignSpace:
    """Row-fused schedules for an op whose output is ``rows x cols`` over row statistics."""
    probe = Schedule(wl.outputs)
    (out,) = [st for st in probe.stages if st.is_output]
    rows = math.prod(out.tensor.shape[:-1])
    lanes = lanes_for(target)
    knobs = [
        Knob("rows_per_block", tuple(b for b in ROWS_PER_BLOCK if b <= rows)),
        Knob("parallel", (True, False) if target.num_threads > 1 else (False,)),
        Knob("lanes", tuple(x for x in (8, 16) if x <= lanes) or (lanes,)),
        Knob("stats_at", ("row", "block")),
        Knob("recompute", (False, True)),
        Knob("unroll", UNROLL),
        Knob("fast_math", (False, True)),
        *common_knobs(),
    ]
    constraints = [
        Constraint("unroll_reassociates", lambda c: c["unroll"] == 1 or c["fast_math"]),
        Constraint(  # a block size that changes nothing: keep one representative
            "blocks_matter",
            lambda c: c["parallel"] or c["stats_at"] == "block" or c["rows_per_block"] == 1,
        ),
    ]

    def build(config: Config) -> Schedule:
        s = Schedule(wl.outputs)
        if config["recompute"]:
            inline_injective(s)
        name, vec = out.name, config["lanes"]
        row_loops = [lp.name for lp in s[name].leaves[:-1]]
        row = row_loops[0]
        for inner in row_loops[1:]:
            row = s.fuse(name, row, inner)
        block, per_row = s.split(name, row, config["rows_per_block"])
        _, lane = s.split(name, s[name].leaves[-1].name, vec)
        s.vectorize(name, lane)
        if config["parallel"] and rows > config["rows_per_block"]:
            s.parallel(name, block)
        for st in reversed(s.stages):  # readers first: each is attached before its producers
            if st.is_output or st.attach != ("root",):
                continue
            s.compute_at(st.name, name, per_row if config["stats_at"] == "row" else block)
            _, lane = s.split(st.name, st.leaves[-1].name, vec)
            s.vectorize(st.name, lane)
        apply_common(s, config)
        if config["fast_math"]:
            s.annotate("fast_math", True)
        if config["unroll"] > 1:
            s.annotate("unroll_pragma", config["unroll"])
            s.annotate("extra_cflags", ["-fvariable-expansion-in-unroller"])
        return s

    # short rows: statistics for a few rows at once (per-row overheads, the horizontal reductions
    # and the masked tails, then overlap; 2364 x 197 ran 1.2x faster in blocks of 4 than by row);
    # long rows: one row per block, so that the static schedule splits them evenly over the
    # threads (blocks of 32 split 35 rows as 32 + 3 and ran at half the speed)
    cols = out.tensor.shape[-1]
    fits = [b for b in knobs[0].int_choices if b <= 4 and b * cols * 4 <= BLOCK_BUFFER_BYTES]
    block = max(fits, default=1)
    default = {
        "rows_per_block": block,
        "parallel": target.num_threads > 1,
        "lanes": knobs[2].choices[-1],
        "stats_at": "block" if block > 1 else "row",
        "recompute": False,
        # several accumulators break the max and sum reductions' latency chains: 35 rows of
        # 10000 ran 1.13x faster unrolled by 4 (AVX2, Zen 3); rows of 197 the same either way
        "unroll": 4,
        # reassociation for the unrolled reductions, and the final pass multiplies by 1/sum
        # (`lower.reciprocal`; softmax 2364 x 197 1.03x, layernorm 197 x 768 1.04x on Zen 3)
        "fast_math": True,
        "opt_level": "O3",
    }
    return DesignSpace(wl, target, SearchSpace(knobs, constraints), build, default)
