"""Per-access summaries of the hottest store, and the target's own features.

These complement ``LOOP_FEATURES`` with what a model needs to compare programs of *different*
templates and machines (TenSet/Ansor's per-buffer features, condensed to fixed length): the
workload's size and arithmetic intensity, the arithmetic mix, how each access walks memory in
the innermost loop, the bytes touched and their reuse at four loop levels, those working sets
against L1/L2, and parallel chunks against threads. ``feature_docs`` lists every column
with its unit.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ..ir.nodes import For, PrimFunc
from ..space.template import DesignSpace
from ..target import Target
from ..te.expr import Var
from .loop_nest import OP_KINDS, _Access, _distinct, _footprint, _log2, _StoreSite

#: Loop levels whose bytes and reuse are described, innermost first: the innermost loop, the
#: register block (trailing unrolled/vectorized loops), the hot serial loop around the block,
#: and the loop around that.
LEVELS = ("inner", "block", "hot", "outer")

ACCESS_FEATURES: tuple[str, ...] = (
    "log_flops",
    "log_compulsory_bytes",
    "log_arith_intensity",
    *(f"ops_{kind}" for kind in OP_KINDS),
    "reads_contiguous",
    "reads_strided",
    "reads_broadcast",
    "reads_irregular",
    "write_contiguous",
    "write_in_register",
    *(f"log_bytes_{level}" for level in LEVELS),
    *(f"log_reuse_{level}" for level in LEVELS),
    "log_ws_hot_over_l1",
    "log_ws_outer_over_l2",
    "l1_fit_levels",
    "l2_fit_levels",
    "log_chunks_per_thread",
    "log_flops_per_chunk",
)

TARGET_FEATURES: tuple[str, ...] = (
    "target_vector_bits",
    "target_f32_lanes",
    "target_vector_registers",
    "target_threads",
    "target_log_l1",
    "target_log_l2",
    "target_log_l3",
    "target_has_fma",
    "target_has_avx512",
)

#: ISA levels whose code may use fused multiply-add.
_FMA_ISAS = frozenset({"avx512", "avx2", "neon"})


def target_features(target: Target) -> np.ndarray:
    """``TARGET_FEATURES`` of ``target``: the same row for every config of a run."""
    return np.array(
        [
            target.vector_bits,
            target.lanes("float32"),
            target.vector_registers,
            target.num_threads,
            _log2(target.l1d_bytes),
            _log2(target.l2_bytes),
            _log2(target.l3_bytes),
            float(target.isa in _FMA_ISAS),
            float(target.isa == "avx512"),
        ],
        dtype=np.float64,
    )


def _stride_kind(access: _Access, var: Var | None) -> str:
    """How ``access`` moves as ``var`` steps: contiguous, strided, broadcast or irregular."""
    if var is None:
        return "broadcast"
    if var in access.irregular:
        return "irregular"
    step = abs(access.coeffs.get(var, 0))
    return "broadcast" if step == 0 else "contiguous" if step == 1 else "strided"


def _level_loops(loops: tuple[For, ...], n_block: int) -> list[tuple[For, ...]]:
    """The loops inside each of ``LEVELS`` (an absent level repeats the one inside it)."""
    n = len(loops)
    inner = min(1, n)
    block = max(n_block, inner)
    hot = min(block + 1, n)
    outer = min(hot + 1, n)
    return [loops[n - k :] if k else () for k in (inner, block, hot, outer)]


def _accessed(accesses: Sequence[_Access], loops: Sequence[For]) -> float:
    """Bytes the accesses read or write over ``loops``, counting every repeat."""
    return math.prod(lp.extent for lp in loops) * sum(a.itemsize for a in accesses)


def access_features(
    group: Sequence[_StoreSite], func: PrimFunc, design: DesignSpace
) -> list[float]:
    """``ACCESS_FEATURES`` of the hottest block ``group`` (copies of one store) in ``func``."""
    target, flops = design.target, max(design.workload.flops, 1.0)
    site = group[0]
    loops = site.loops
    compulsory = sum(b.nbytes for b in func.params)
    memory = _distinct(group)
    inner_var = loops[-1].var if loops else None
    kinds = [_stride_kind(a, inner_var) for a in memory]
    writes = list({s.write_key: s.write for s in group}.values())
    accesses = [*memory, *(w for w in writes if w.scope != "register")]
    levels = _level_loops(loops, site.n_block)
    foot = [_footprint(accesses, lv) for lv in levels]
    reuse = [_accessed(accesses, lv) / max(f, 1.0) for lv, f in zip(levels, foot, strict=True)]
    fits = [_footprint(accesses, loops[len(loops) - k :]) for k in range(1, len(loops) + 1)]
    parallel = next((lp for lp in loops if lp.kind == "parallel"), None)
    chunks = parallel.extent if parallel else 1
    return [
        _log2(flops),
        _log2(compulsory),
        _log2(flops / max(compulsory, 1)),
        *(float(k) for k in site.op_kinds),
        *(float(kinds.count(k)) for k in ("contiguous", "strided", "broadcast", "irregular")),
        float(_stride_kind(site.write, inner_var) == "contiguous"),
        float(site.write.scope == "register"),
        *(_log2(f) for f in foot),
        *(_log2(r) for r in reuse),
        _log2(foot[2]) - _log2(target.l1d_bytes),
        _log2(foot[3]) - _log2(target.l2_bytes),
        float(sum(f <= target.l1d_bytes for f in fits)),
        float(sum(f <= target.l2_bytes for f in fits)),
        math.log2(chunks / max(target.num_threads, 1)),
        _log2(flops / chunks),
    ]
