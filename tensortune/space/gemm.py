"""GEMM design space (matmul, dense, batch_matmul, and GEMM with an epilogue).

Register-tiled: an ``mr x nr`` accumulator tile held in vector registers, B packed into
``nr``-wide column panels so the inner loop is one broadcast of A and ``nr/lanes`` FMAs per row;
column panels grouped ``nb`` at a time so a block of B stays in L2 while rows of A stream by.
With ``pack_at=panel`` each group of panels is packed inside the loop over groups, just before
the rows of A sweep it (GotoBLAS's B panel in L2), instead of all of B up front: the packed copy
is then read from L2, not from L3 or memory.
With ``k_block`` the reduction runs a block of k at a time outside the tiles (``rfactor``), so
the A rows and B panel one block reads stay in L1/L2, as GotoBLAS's kc.
For GEMV-like shapes a ``stream`` variant reads B once, row by row. When both operands are
contiguous along k (dense's W[N, K]) and the rows are few, a ``dot`` variant takes dot products
instead, as BLAS's GEMV on a transposed matrix does: ``b_rows`` rows of B at a time, each with a
vector accumulator along k (``k_unroll`` of them, for more independent sums), its lanes added up
once at the end; nothing is packed, so a B that changes every call is read once, contiguously.
"""

from __future__ import annotations

from ..dtype import dtype
from ..schedule import Schedule
from ..target import Target
from ..te.expr import TensorRead, walk
from ..workload import Workload
from .space import Config, Constraint, Knob, SearchSpace
from .template import (
    DesignSpace,
    column_operand,
    common_knobs,
    finish,
    inline_injective,
    lanes_for,
    split_vectorize,
    vector_columns,
)

DOT_MAX_ROWS = 32
"""The most rows of A the ``dot`` variant is offered for (an unbatched product): beyond, packed
tiles reuse B better."""


def _main_stage(s: Schedule, tags: tuple[str, ...]):
    return next(st for st in s.stages if st.tensor.tag in tags and st.is_reduction)


def gemm_space(wl: Workload, target: Target) -> DesignSpace:
    lanes = lanes_for(target)
    regs = target.vector_registers
    probe = Schedule(wl.outputs)
    main = _main_stage(probe, ("matmul", "dense", "batch_matmul"))
    spatial = [a.name for a in main.axes]
    i_name, j_name = spatial[-2], spatial[-1]
    m, n = main.root_extents[i_name], main.root_extents[j_name]
    b_name, b_axis = column_operand(main, j_name)
    k_name, k = main.reduce_axes[0].name, main.reduce_axes[0].extent
    dot = len(spatial) == 2 and m <= DOT_MAX_ROWS and _rows_along_k(main)
    knobs = [
        Knob("variant", ("tile", "stream", "dot") if dot else ("tile", "stream")),
        Knob("mr", tuple(x for x in (1, 2, 3, 4, 5, 6, 8, 10, 12) if x <= max(m, 1))),
        Knob("nr_vectors", tuple(x for x in (1, 2, 3, 4) if x * lanes <= max(n, lanes))),
        Knob("nb", (1, 2, 4, 8, 16)),
        Knob("order", ("ij", "ji")),
        Knob("pack_b", (True, False)),
        Knob("pack_at", ("root", "panel")),
        Knob("k_unroll", (1, 2, 4, 8, 16)),
        Knob("k_block", (0, 256, 384, 512)),
        *([Knob("b_rows", (1, 2, 4, 8), absent_means=4)] if dot else []),
        *common_knobs(),
    ]

    def registers(c: Config) -> int:
        """Vector registers a tile holds: accumulators, plus the vectors of A and B in use."""
        if c["variant"] == "dot":  # a row of A per row of the tile, one row of B at a time
            return c["mr"] * c["b_rows"] * c["k_unroll"] + c["mr"] + 1
        return c["mr"] * c["nr_vectors"] + c["nr_vectors"] + 1

    constraints = [
        Constraint("register_tile_fits", lambda c: registers(c) <= regs),
        Constraint(
            "panel_packing_needs_packed_b_and_column_panels_outside",
            lambda c: c["pack_at"] == "root" or (c["pack_b"] and c["order"] == "ji"),
        ),
        Constraint("k_unroll_not_in_tiles", lambda c: c["variant"] != "tile" or c["k_unroll"] == 1),
        Constraint(
            "k_block_splits_k_in_tiles",  # into two blocks or more: a block of all of k is 0
            lambda c: (
                c["k_block"] == 0
                or (c["variant"] == "tile" and k % c["k_block"] == 0 and c["k_block"] < k)
            ),
        ),
    ]

    def build(config: Config) -> Schedule:
        s = Schedule(wl.outputs)
        st = _main_stage(s, ("matmul", "dense", "batch_matmul"))
        inline_injective(s, keep={st.name})
        if config["variant"] == "stream":
            _stream(s, st.name, i_name, j_name, n, lanes, config, target)
        elif config["variant"] == "dot":
            _dot(s, st.name, (i_name, j_name, k_name), lanes, config, target)
        else:
            _tile(s, st.name, (i_name, j_name, k_name), (b_name, b_axis), lanes, config, target)
        return finish(s, config, lanes, target.num_threads > 1, (st.name, f"{b_name}_pack"))

    # A few rows of output (GEMV, decode): a 1-row tile over four vectors of columns, B read
    # from panels packed once when it is a constant (before the calls: free per call), in place
    # otherwise; measured on Zen 5 (AVX-512), M=1: dense 1000x2048 4.7 -> 98 GFLOP/s (OpenBLAS
    # 94), decode attention 12x257x64 9 -> 79 (PyTorch 35), a constant [K, N] B 83 -> 96 (ORT
    # 88). Streaming B row by row stays the choice of one row on a B that changes every call.
    b = next(t for t in wl.inputs if t.name == b_name)
    batched, constant_b = len(spatial) > 2, b_name in wl.constants
    stream = m == 1 and b_axis == b.ndim - 1 and not batched and not constant_b
    wide = m <= 2 and not stream  # 4 vectors of columns fit beside 1-2 rows on 16 registers
    nr_vectors = max(x for x in knobs[2].int_choices if x <= (4 if wide else 2))
    panels = -(-n // (nr_vectors * lanes))
    # A batch's B small enough to stay in L1 (attention over a window: swin's 32x49) is read in
    # place by every row tile: packing it, once per product, copies as much as the tiles read,
    # and the copy's masked tail, inside the batch loop, cost the tiles registers (gcc spilled
    # 3 of 12 accumulators). Measured on Zen 3 (AVX2), GFLOP/s, B=192,M=49,N=49,K=32: packed
    # per batch 73 -> in place 129 (PyTorch 100, ONNX Runtime 105); DLRM's B=1,27x27x128
    # 50 -> 78 (70 packed; NumPy 32). A B of 50 KB (ViT's 64x197) and more stays packed: read
    # in place, 12x197x197x64 ran 0.88x as fast.
    in_place = batched and k * n * dtype(b.dtype).size <= target.l1d_bytes // 2 and not constant_b
    pack_b = (m >= 16 or constant_b) and not in_place
    default = {
        "variant": "stream" if stream else "tile",
        "mr": max(x for x in knobs[1].int_choices if x <= 6),
        "nr_vectors": nr_vectors,
        # no more panels to a group than the row has: a group wider runs empty tiles (DLRM's
        # 27 columns, 2 panels: nb 4 -> 2 took 50 -> 70 GFLOP/s, packed, on Zen 3)
        "nb": max(x for x in knobs[3].int_choices if x <= min(2 if k > 2048 else 4, panels)),
        "order": "ji",
        "pack_b": pack_b,
        # few rows reuse a packed B little
        "pack_at": "panel" if 16 <= m < 512 and pack_b else "root",
        "k_unroll": 8 if stream else 1,
        # measured on Zen 3: blocking k pays once whole-k A rows and B panels spill L1/L2
        "k_block": 512 if m > 1 and k > 2048 and k % 512 == 0 else 0,
        "opt_level": "O3",
    }
    if dot:
        # Rows of B contiguous along k that change every call: dot products, nothing packed;
        # 3 rows of A by 4 of B (12 accumulators, AVX2's 16 registers), all 4 rows at M=4 (no
        # 1-row tail). Measured on Zen 3 (AVX2), GFLOP/s, old default -> dot: dense M=1
        # 1000x1280 19 -> 53 (NumPy 50), M=1 4096x1024 1.9 -> 58 (NumPy 53), M=4 4096x1024
        # 14 -> 129 (ORT 49), M=16 1024x1024 62 -> 154, M=32 91 -> 164. A constant B stays
        # in packed tiles, read as one stream: dense 1x1000x2048 72 against dot's 67.
        mr = m if m <= 4 else 3
        default["b_rows"] = 2 if mr == 4 else 4
        if not constant_b:
            default.update(variant="dot", mr=mr, k_unroll=1)
    return DesignSpace(wl, target, SearchSpace(knobs, constraints), build, default)


def _rows_along_k(main) -> bool:
    """Every operand of the product is read along k contiguously (its last index is k)."""
    k = main.reduce_axes[0].var
    return all(node.indices[-1] == k for node in walk(main.body) if isinstance(node, TensorRead))


def _dot(s, name, loops, lanes, config, target) -> None:
    """Dot products along k: ``mr`` rows of A against ``b_rows`` rows of B at a time, each pair
    summed in ``k_unroll`` vector accumulators that the lowering keeps in registers (`vectorize`:
    one accumulator per unrolled vector loop) and adds up across lanes after the loop over k.
    Every load is contiguous; the blocks of B's rows are shared out among the threads."""
    i, j, k = loops
    io, jo, ii, ji = s.tile(name, i, j, config["mr"], config["b_rows"])
    ko, kv = s.split(name, k, lanes * config["k_unroll"])
    k_steps = [ko]
    if config["k_unroll"] > 1:
        ku, kv = s.split(name, kv, lanes)
        s.unroll(name, ku)
        k_steps.append(ku)
    s.reorder(name, [jo, io, *k_steps, ii, ji, kv])
    s.unroll(name, ii)
    s.unroll(name, ji)
    s.vectorize(name, kv)
    if target.num_threads > 1:
        s.parallel(name, jo)


def _tile(s, name, loops, b, lanes, config, target) -> None:
    """An ``mr x nr`` register tile accumulating over all of k, or (``k_block``) over one block
    of k at a time: the block loop then runs outside the tiles and the tiles add into C, so the
    A rows and the B panel a tile reads stay in L1/L2 (GotoBLAS's kc)."""
    (i, j, k), (b_name, axis), mr = loops, b, config["mr"]
    nr = config["nr_vectors"] * lanes
    if config["k_block"]:
        cache = s.rfactor(name, k, config["k_block"], "register")
    else:
        cache = s.cache_write(name, "register")
    st = s[name]
    outer = [lp.name for lp in st.leaves if lp.kind == "spatial"][:-2]  # batch axes, if any
    blocks = [lp.name for lp in st.leaves if lp.kind == "reduce"]  # k_o, with k_block
    io, jo, ii, ji = s.tile(name, i, j, mr, nr)
    jo_o, jo_i = s.split(name, jo, config["nb"])
    if config["order"] == "ji":
        s.reorder(name, [*outer, *blocks, jo_o, io, jo_i, ii, ji])
    else:
        s.reorder(name, [*outer, *blocks, io, jo_o, jo_i, ii, ji])
    s.compute_at(cache, name, jo_i)
    k_loops = [lp.name for lp in s[cache].leaves if lp.kind == "reduce"]
    s.reorder(cache, [*k_loops, i, j])
    s.unroll(cache, i)
    vector_columns(s, cache, j, nr, lanes)
    s.unroll(name, ii)
    vector_columns(s, name, ji, nr, lanes)
    spatial = [lp.name for lp in s[name].leaves if lp.kind == "spatial"]
    if target.num_threads > 1 and len(s[name].leaves) > 1:
        s.parallel(name, spatial[0])
    if config["pack_b"]:
        ndim = next(t.ndim for t in s.inputs if t.name == b_name)
        rest = [d for d in range(len(outer), ndim) if d != axis]
        order = [*range(len(outer)), axis, *rest, ndim]
        packed = s.pack(b_name, cache, axis, nr, order)
        pst = s[packed]
        if config["pack_at"] == "panel":  # pack each group of panels just before it is used
            s.compute_at(packed, name, jo_o)
        elif target.num_threads > 1:
            s.parallel(packed, pst.leaves[0].name)
        split_vectorize(s, packed, pst.leaves[-1].name, nr, lanes)


def _stream(s, name, i, j, n, lanes, config, target) -> None:
    """k outside j: every row of B is read once, contiguously; C stays in cache.

    Unrolling k inside the column loop adds ``k_unroll`` rows of B into one vector of C, so C is
    loaded and stored once per ``k_unroll`` FMAs and the loads of B dominate, as they should.
    """
    st = s[name]
    width = config["nr_vectors"] * lanes
    outer = [lp.name for lp in st.leaves if lp.kind == "spatial" and lp.name != j]
    k_loops = [lp.name for lp in st.leaves if lp.kind == "reduce"]
    chunks = max(1, target.num_threads)
    jo, jr = s.split(name, j, max(width, -(-n // chunks // width) * width))
    jm, ji = s.split(name, jr, width)
    k_inner = []
    if config["k_unroll"] > 1:
        k_outer, k_last = s.split(name, k_loops[-1], config["k_unroll"])
        k_loops, k_inner = [*k_loops[:-1], k_outer], [k_last]
        s.unroll(name, k_last)
    s.reorder(name, [jo, *outer, *k_loops, jm, *k_inner, ji])
    vo, vi = s.split(name, ji, lanes) if width > lanes else (None, ji)
    if vo:
        s.unroll(name, vo)
    s.vectorize(name, vi)
    if target.num_threads > 1:
        s.parallel(name, jo)
