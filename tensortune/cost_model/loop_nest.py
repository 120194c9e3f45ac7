"""The lowered loop nest of one candidate, analysed: every store with its loops, guards and
accesses, and ``LOOP_FEATURES`` of the hottest store (the block of unrolled copies that does
the most arithmetic). ``features.py`` explains why features come from the lowered program.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..ir.nodes import Allocate, For, IfThen, PrimFunc, Seq, Stmt, Store
from ..ir.simplify import to_linear
from ..space.template import DesignSpace
from ..te.expr import Binary, Call, Expr, TensorRead, Var, walk

#: Floating-point operations by kind, for ``ops_*`` features: binary op names, or "call" for a
#: math function (exp, sqrt, ...). Each kind costs differently (a divide or exp is 10-40 adds).
OP_KINDS: dict[str, frozenset[str]] = {
    "addsub": frozenset({"add", "sub"}),
    "mul": frozenset({"mul"}),
    "div": frozenset({"div", "truediv"}),
    "minmax": frozenset({"min", "max"}),
    "call": frozenset({"call"}),
}
_ARITH = frozenset().union(*OP_KINDS.values()) - {"call"}

#: Loop-nest feature names, in column order (``feature_docs.LOOP`` says what each means).
LOOP_FEATURES: tuple[str, ...] = (
    "log_work_ratio",
    "log_exec",
    "vector_lanes",
    "log_block_size",
    "accumulator_vectors",
    "fma_per_load",
    "vector_loads",
    "broadcasts",
    "gathers",
    "guards_in_block",
    "guards_total",
    "log_hot_stride_max",
    "log_hot_stride_min",
    "hot_loop_extent",
    "log_l1_traffic_per_flop",
    "log_l2_traffic_per_flop",
    "log_outer_trips",
    "log_parallel_extent",
    "parallel_imbalance",
    "loop_depth",
    "n_stores",
    "log_other_exec_ratio",
    "log_temp_bytes",
    "memory_stores",
    "log_speedup",
    "log_vector_ops_per_flop",
    "log_memory_ops_per_flop",
    "register_pressure",
    "spilled_vectors",
)

#: Bytes in a cache line: what a cache moves, however few of them an access uses.
LINE_BYTES = 64


@dataclass(frozen=True)
class _Access:
    """One buffer access: element size, flat coefficient per loop variable, irregular vars,
    and which buffer at which constant element offset (copies of an unrolled loop differ in it)."""

    scope: str
    itemsize: int
    coeffs: dict[Var, int]
    irregular: frozenset[Var]
    buffer: str = ""
    offset: int = 0

    def depends(self, var: Var) -> bool:
        return var in self.irregular or self.coeffs.get(var, 0) != 0


@dataclass(frozen=True)
class _StoreSite:
    loops: tuple[For, ...]
    guards: tuple[int, ...]  # loop depth at which each enclosing guard sits
    write: _Access
    reads: tuple[_Access, ...]
    ops: int
    op_kinds: tuple[int, ...]  # arithmetic per OP_KINDS entry, in its order
    write_key: str  # the buffer and index expressions: equal keys are the same element(s)
    read_keys: tuple[str, ...]

    @property
    def n_block(self) -> int:
        """How many trailing loops (unrolled or vectorized) form the register block."""
        n = 0
        while n < len(self.loops) and self.loops[-1 - n].kind in ("unrolled", "vectorized"):
            n += 1
        return n

    @property
    def block_key(self) -> tuple[object, ...]:
        """Stores with equal keys are copies in one register block: the same loops outside
        the block (the same loop objects) and the same buffer written."""
        outer = self.loops[: len(self.loops) - self.n_block]
        return (*(id(lp) for lp in outer), self.write_key.split("[", 1)[0])


def _is_arith(e: Expr) -> bool:
    """A floating-point operation (index arithmetic is int32 and does not count)."""
    arith = (isinstance(e, Binary) and e.op in _ARITH) or isinstance(e, Call)
    return arith and e.dtype.startswith("float")


def _itemsize(dtype: str) -> int:
    return np.dtype(dtype).itemsize


def _access(buffer, indices: Sequence[Expr]) -> _Access:
    """Flatten a row-major access into per-variable element strides."""
    coeffs: dict[Var, int] = {}
    irregular: set[Var] = set()
    stride, offset = 1, 0
    for extent, index in zip(reversed(buffer.shape), reversed(tuple(indices)), strict=True):
        terms, const = to_linear(index, {})
        offset += const * stride
        for atom, k in terms.items():
            if isinstance(atom, Var):
                coeffs[atom] = coeffs.get(atom, 0) + k * stride
            else:
                irregular.update(n for n in walk(atom) if isinstance(n, Var))
        stride *= extent
    scope = getattr(buffer, "scope", "global")
    name = getattr(buffer, "name", "?")
    return _Access(scope, _itemsize(buffer.dtype), coeffs, frozenset(irregular), name, offset)


def _store_sites(body: Stmt) -> list[_StoreSite]:
    """Every store with its enclosing loops and guards, in program order."""
    out: list[_StoreSite] = []

    def visit(s: Stmt, loops: tuple[For, ...], guards: tuple[int, ...]) -> None:
        match s:
            case For():
                visit(s.body, (*loops, s), guards)
            case Seq():
                for x in s.stmts:
                    visit(x, loops, guards)
            case IfThen():
                visit(s.body, loops, (*guards, len(loops)))
            case Allocate():
                visit(s.body, loops, guards)
            case Store():
                nodes = list(walk(s.value))
                read_nodes = [n for n in nodes if isinstance(n, TensorRead)]
                reads = tuple(_access(n.tensor, n.indices) for n in read_nodes)
                arith = [n.op if isinstance(n, Binary) else "call" for n in nodes if _is_arith(n)]
                kinds = tuple(sum(op in ops for op in arith) for ops in OP_KINDS.values())
                write = _access(s.buffer, s.indices)
                out.append(
                    _StoreSite(
                        loops,
                        guards,
                        write,
                        reads,
                        len(arith),
                        kinds,
                        _key(s.buffer, s.indices),
                        tuple(_key(n.tensor, n.indices) for n in read_nodes),
                    )
                )

    visit(body, (), ())
    return out


def _key(buffer: object, indices: Sequence[Expr]) -> str:
    return f"{getattr(buffer, 'name', '?')}[{', '.join(repr(i) for i in indices)}]"


def _log2(x: float) -> float:
    return math.log2(x) if x > 0 else 0.0


def _footprint(accesses: Sequence[_Access], loops: Sequence[For]) -> float:
    """Bytes of the cache lines the accesses touch over all iterations of ``loops``.

    Accesses to one buffer that differ only in a constant offset (the copies of an unrolled
    loop) are one access with an extra loop over their offsets; other overlaps between accesses
    are not detected. An access's elements are counted as the lines they fill: a contiguous run
    shares lines, but an access whose closest elements lie a line apart (a gather, a column
    walked down) moves a whole line per element, as the cache does."""
    merged: dict[tuple[object, ...], tuple[_Access, set[int]]] = {}
    for a in accesses:
        key = (a.buffer, a.itemsize, tuple(sorted(a.coeffs.items(), key=repr)), a.irregular)
        merged.setdefault(key, (a, set()))[1].add(a.offset)
    total = 0.0
    for a, offsets in merged.values():
        steps = [
            (abs(a.coeffs.get(lp.var, 0)), lp.extent)
            for lp in loops
            if a.depends(lp.var) and lp.var not in a.irregular
        ]
        n = math.prod(lp.extent for lp in loops if a.depends(lp.var))
        if len(offsets) > 1:  # the copies' offsets: one more loop, or a wider one of equal step
            step = math.gcd(*(o - min(offsets) for o in offsets))
            span = (max(offsets) - min(offsets)) // step + 1
            same = next((i for i, (k, _) in enumerate(steps) if k == step), None)
            if same is None:
                steps.append((step, span))
                n *= span
            else:
                k, e = steps[same]
                steps[same] = (k, e + span - 1)
                n = n // e * (e + span - 1)
        total += _lines(steps, n, max(LINE_BYTES // a.itemsize, 1)) * LINE_BYTES
    return total


def _lines(steps: list[tuple[int, int]], n: int, per_line: int) -> float:
    """Cache lines holding ``n`` elements reached by loops of (element step, extent)."""
    step, run = min(steps, default=(0, 1))  # the densest loop: its run shares lines
    for k, e in sorted(steps):
        if step and k == step * run:  # a loop that continues the run (a split axis)
            run *= e
    if step == 0 or step >= per_line or run == 1:
        return float(n)  # every element its own line
    return n / run * math.ceil(run * step / per_line)


def _traffic(accesses: Sequence[_Access], loops: Sequence[For], cache_bytes: int) -> float:
    """Bytes fetched into a cache of ``cache_bytes``: the outermost loop level whose working
    set fits is loaded once per trip of the loops around it."""
    for depth in range(len(loops)):
        foot = _footprint(accesses, loops[depth:])
        if foot <= cache_bytes:
            return math.prod(lp.extent for lp in loops[:depth]) * foot
    return math.prod(lp.extent for lp in loops) * _footprint(accesses, ())


def _distinct(group: Sequence[_StoreSite]) -> list[_Access]:
    """The non-register reads of a block's copies: all of the first copy's, and those of the
    other copies that no earlier copy made (a value reused across copies is loaded once)."""
    seen: set[str] = set()
    out: list[_Access] = []
    for k, site in enumerate(group):
        for access, key in zip(site.reads, site.read_keys, strict=True):
            if access.scope != "register" and (k == 0 or key not in seen):
                out.append(access)
            seen.add(key)
    return out


def _site_features(
    group: Sequence[_StoreSite], others: Sequence[_StoreSite], func: PrimFunc, design: DesignSpace
) -> list[float]:
    target, flops = design.target, max(design.workload.flops, 1.0)
    site, copies = group[0], len(group)
    loops = site.loops
    n_block = site.n_block
    block, outer = loops[len(loops) - n_block :], loops[: len(loops) - n_block]
    vec = next((lp for lp in reversed(block) if lp.kind == "vectorized"), None)
    lanes = vec.extent if vec else 1
    block_size = copies * math.prod(lp.extent for lp in block)
    memory = _distinct(group)
    writes = list({s.write_key: s.write for s in group}.values())
    vector_loads = broadcasts = gathers = 0
    for a in memory:
        distinct = math.prod(lp.extent for lp in block if a.depends(lp.var))
        if vec is not None and a.depends(vec.var):
            # unit stride: one load per vector; stride 2: two loads and a shuffle (codegen)
            step = abs(a.coeffs.get(vec.var, 0)) if vec.var not in a.irregular else 0
            contiguous = step in (1, 2)
            vector_loads += step * distinct // lanes if contiguous else 0
            gathers += 0 if contiguous else 1
        else:
            broadcasts += distinct
    accumulators = 0
    if site.write.scope == "register":
        per_copy = math.prod(lp.extent for lp in block if site.write.depends(lp.var)) // lanes
        accumulators = len(writes) * per_copy
    hot = outer[-1] if outer else None
    strides = [
        abs(a.coeffs.get(hot.var, 0)) * a.itemsize
        for a in (*site.reads, site.write)
        if hot is not None and a.depends(hot.var)
    ] or [0]
    accesses = [*memory, *writes]
    exec_scalar = copies * math.prod(lp.extent for lp in loops)
    work = sum(s.ops * math.prod(lp.extent for lp in s.loops) for s in (*group, *others))
    parallel = next((lp for lp in loops if lp.kind == "parallel"), None)
    threads = max(target.num_threads, 1)
    p_ext = parallel.extent if parallel else 1
    other_exec = sum(math.prod(lp.extent for lp in s.loops) for s in others)
    temp_bytes = sum(b.nbytes for b in func.temporaries)
    stores = 0
    for w in writes:
        if w.scope != "register":
            distinct = math.prod(lp.extent for lp in block if w.depends(lp.var))
            stores += distinct // lanes if vec is not None and w.depends(vec.var) else distinct
    speedup = p_ext / math.ceil(p_ext / threads) if parallel else 1.0
    vector_ops = sum(
        s.ops * math.prod(lp.extent for lp in s.loops) / _lanes(s) for s in (*group, *others)
    )
    memory_ops = (vector_loads + broadcasts + gathers * lanes + stores) * exec_scalar / block_size
    live = _live_vectors(accumulators, vector_loads, broadcasts, block_size / lanes)
    registers = max(target.vector_registers, 1)
    return [
        _log2(work / flops),
        _log2(exec_scalar / lanes),
        float(lanes),
        _log2(block_size),
        float(accumulators),
        (block_size / lanes) / max(vector_loads + broadcasts + gathers, 1),
        float(vector_loads),
        float(broadcasts),
        float(gathers),
        float(sum(1 for g in site.guards if g >= len(outer))),
        float(len(site.guards)),
        _log2(max(strides)),
        _log2(min(strides)),
        float(hot.extent if hot else 1),
        _log2(_traffic(accesses, loops, target.l1d_bytes) / flops),
        _log2(_traffic(accesses, loops, target.l2_bytes) / flops),
        _log2(math.prod(lp.extent for lp in outer[:-1])),
        _log2(p_ext),
        math.ceil(p_ext / threads) * threads / p_ext if parallel else float(threads),
        float(len(loops)),
        float(len(others) + 1),
        _log2(other_exec / max(exec_scalar, 1)) if other_exec else -30.0,
        _log2(temp_bytes),
        float(stores),
        _log2(speedup),
        _log2(vector_ops / speedup / flops),
        _log2(memory_ops / speedup / flops),
        live / registers,
        float(max(live - registers, 0)),
    ]


def _live_vectors(accumulators: int, vector_loads: int, broadcasts: int, vector_ops: float) -> int:
    """Vector registers the block needs at once: its accumulators, plus the operands of one
    step of the register tile. An outer-product tile keeps the smaller operand side live (all
    its vector loads, or all its broadcasts) and streams the other through one register, so
    a tile of ``rows x vectors`` accumulators needs ``rows * vectors + min(rows, vectors) + 1``.
    Only a side whose operands each feed several of the block's ``vector_ops`` is kept: in a
    depthwise tile every accumulator has its own load and broadcast, and both stream through
    one register each. Past the target's register count the compiler spills accumulators."""
    sides = [n for n in (vector_loads, broadcasts) if n]
    kept = [n for n in sides if vector_ops > n]
    operands = min(kept) + 1 if len(sides) == 2 and kept else len(sides)
    return accumulators + operands


def _lanes(site: _StoreSite) -> int:
    """Lanes of the store's vectorized loop (1 when it runs scalar)."""
    return next((lp.extent for lp in reversed(site.loops) if lp.kind == "vectorized"), 1)


def hottest_block(func: PrimFunc) -> tuple[list[_StoreSite], list[_StoreSite]] | None:
    """The copies of the store that does the most arithmetic, and every other store; None for
    a kernel without stores."""
    sites = _store_sites(func.body)
    if not sites:
        return None
    blocks: dict[tuple[object, ...], list[_StoreSite]] = {}
    for site in sites:
        blocks.setdefault(site.block_key, []).append(site)
    groups = list(blocks.values())
    cost = [sum(s.ops * math.prod(lp.extent for lp in s.loops) for s in g) for g in groups]
    hottest = groups[int(np.argmax(cost))]
    return hottest, [s for s in sites if all(s is not h for h in hottest)]


def loop_nest_features(func: PrimFunc, design: DesignSpace) -> np.ndarray:
    """``LOOP_FEATURES`` of a lowered kernel: its hottest store (most arithmetic) in context."""
    found = hottest_block(func)
    if found is None:
        return np.full(len(LOOP_FEATURES), np.nan)
    return np.array(_site_features(*found, func, design), dtype=np.float64)
