"""Building the loop nest: a schedule's stages become one loop nest over buffers.

Each stage at root gets its own nest; a stage computed at a consumer's loop is emitted at the top of
that loop's body over the region bound inference finds, into a buffer of that region's size (for a
register tile, its whole tile even past the tensor's end, so its rows stay whole vectors and the
lanes past the end run masked). Inlined stages are substituted into their readers. Non-divisible
splits become guards placed just inside the innermost loop they depend on, so the fast path of a
tile carries no test; guards that only a register tile's unrolled or vector loops vary are also
checked once outside the reduction loop (``if all hold: fast tile else: guarded tile``), so only
the tiles at a ragged edge run the guarded reduction. The passes in this package then turn this
nest into the final program.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import LoweringError
from ..ir.conditions import conjunction
from ..ir.nodes import Allocate, Buffer, Comment, For, IfThen, PrimFunc, Stmt, Store, seq
from ..ir.simplify import simplify
from ..schedule.schedule import MAX_UNROLL, Schedule
from ..schedule.stage import Fuse, Loop, Stage
from ..te.expr import (
    Binary,
    Const,
    Expr,
    Reduce,
    TensorRead,
    Var,
    children,
    free_vars,
    rebuild,
    reduce_identity,
    substitute,
    walk,
)
from ..te.tensor import Tensor, sanitize
from .bounds import may_be_negative, region_of_reads
from .hoist import hoistable_guards as _hoistable

# per loop name: the stages computed at that loop, each with the buffer it fills
_Producers = dict[str, list[tuple[Buffer, Stmt]]]

_KIND = {None: "serial", "parallel": "parallel", "vectorized": "vectorized", "unrolled": "unrolled"}


@dataclass
class _Placed:
    """Where reads of a tensor go: its buffer and the offset subtracted from each index."""

    buffer: Buffer
    offset: tuple[Expr, ...]


@dataclass(frozen=True)
class _Geometry:
    """A stage's nest over its region: loop extents, loop and axis values as expressions of the
    leaf loops, and the ranges of every variable in scope there (the context's included)."""

    region: dict[str, tuple[Expr, int]]  # root axis -> (min, extent)
    ext: dict[str, int]
    values: dict[str, Expr]
    index: dict[str, Expr]  # root axis -> its value inside the nest
    ranges: dict[Var, int]

    @classmethod
    def of(
        cls, st: Stage, region: dict[str, tuple[Expr, int]], context: dict[Var, int]
    ) -> _Geometry:
        ext = st.extents({name: region[name][1] for name in st.root_extents})
        values = _loop_values(st, ext)
        index = {name: _plus(region[name][0], values[name]) for name in st.root_extents}
        ranges = {**context, **{lp.var: ext[lp.name] for lp in st.leaves}}
        return cls(region, ext, values, index, ranges)


@dataclass
class _Lowering:
    sch: Schedule
    by_tensor: dict[int, Stage] = field(default_factory=dict)
    placed: dict[int, _Placed] = field(default_factory=dict)
    temporaries: list[Buffer] = field(default_factory=list)
    expanded: dict[str, Expr] = field(default_factory=dict)
    geometries: dict[str, _Geometry] = field(default_factory=dict)

    # -- inlining --------------------------------------------------------------------------------
    def body_of(self, st: Stage) -> Expr:
        """The stage body with inlined producers substituted (memoised)."""
        if st.name not in self.expanded:
            self.expanded[st.name] = self._inline(st.body)
        return self.expanded[st.name]

    def _inline(self, e: Expr) -> Expr:
        if isinstance(e, TensorRead):
            idx = tuple(self._inline(i) for i in e.indices)
            prod = self.by_tensor.get(id(e.tensor))
            if prod is not None and prod.attach == ("inline",):
                body = self.body_of(prod)
                return substitute(body, {a.var: i for a, i in zip(prod.axes, idx, strict=True)})
            return TensorRead(e.tensor, idx)
        kids = children(e)
        return rebuild(e, tuple(self._inline(k) for k in kids)) if kids else e

    # -- reads -----------------------------------------------------------------------------------
    def to_buffers(self, e: Expr) -> Expr:
        if isinstance(e, TensorRead) and isinstance(e.tensor, Tensor):
            where = self.placed.get(id(e.tensor))
            if where is None:
                raise LoweringError(f"tensor '{e.tensor.name}' is read before it is computed")
            idx = tuple(
                self.to_buffers(i) - off if not _is_zero(off) else self.to_buffers(i)
                for i, off in zip(e.indices, where.offset, strict=True)
            )
            return TensorRead(where.buffer, idx)
        kids = children(e)
        return rebuild(e, tuple(self.to_buffers(k) for k in kids)) if kids else e

    # -- geometry --------------------------------------------------------------------------------
    def geometry(self, st: Stage) -> _Geometry:
        """Where ``st`` is computed and over which region (memoised; readers are resolved first,
        so a stage read by several attached stages covers what all of them need)."""
        if st.name not in self.geometries:
            if st.attach[0] == "at":
                context = self.outer_context(st)
                region = self.region_needed(st, context)
            else:
                context, region = {}, {n: (Const(0), e) for n, e in st.root_extents.items()}
            self.geometries[st.name] = _Geometry.of(st, region, context)
        return self.geometries[st.name]

    def outer_context(self, st: Stage) -> dict[Var, int]:
        """Ranges of the variables fixed during one iteration of the loop ``st`` is attached at."""
        _, name, at = st.attach
        cons = self.sch.stage(name, "lower")
        pos = next((i for i, lp in enumerate(cons.leaves) if lp.name == at), None)
        if pos is None:
            raise LoweringError(f"stage '{st.name}' is attached to missing loop '{at}'")
        inner = {lp.var for lp in cons.leaves[pos + 1 :]}
        return {v: n for v, n in self.geometry(cons).ranges.items() if v not in inner}

    def region_needed(self, st: Stage, context: dict[Var, int]) -> dict[str, tuple[Expr, int]]:
        """The box of ``st`` read by all its readers while every loop inside the attach point
        (theirs and the consumer's) sweeps its range."""
        reads: list[tuple[Expr, ...]] = []
        ranges: dict[Var, int] = {}
        for reader in self.sch.stages:
            if reader.attach == ("inline",):
                continue  # its reads are part of its readers' bodies
            found = [
                r.indices
                for r in walk(self.body_of(reader))
                if isinstance(r, TensorRead) and r.tensor is st.tensor
            ]
            if not found:
                continue
            cons, at = self.sch.stage(st.attach[1], "lower"), st.attach[2]
            if reader is not cons and not self.sch.is_inside(reader, cons, at):
                raise LoweringError(
                    f"'{st.name}' is computed at {cons.name}.{at} but '{reader.name}' "
                    "reads it outside that loop"
                )
            g = self.geometry(reader)
            axis_map = {a.var: g.index[a.name] for a in (*reader.axes, *reader.reduce_axes)}
            reads += [tuple(substitute(i, axis_map) for i in idx) for idx in found]
            ranges |= g.ranges
        varying = {v: n for v, n in ranges.items() if v not in context}
        box = region_of_reads(reads, st.tensor.shape, varying, context, st.scope == "register")
        region = {a.name: box[d] for d, a in enumerate(st.axes)}
        return region | {a.name: (Const(0), a.extent) for a in st.reduce_axes}

    # -- stages ----------------------------------------------------------------------------------
    def stage_nest(self, st: Stage, buf: Buffer) -> Stmt:
        """The nest computing ``st`` over its region into ``buf``."""
        g = self.geometry(st)
        loops, ranges = st.leaves, g.ranges
        guards = _guards(st, g.ext, g.values, g.region, st.root_extents, ranges)
        axis_map = {a.var: g.index[a.name] for a in (*st.axes, *st.reduce_axes)}
        store_idx = tuple(
            simplify(g.index[a.name] - self.placed[id(st.tensor)].offset[d], ranges)
            for d, a in enumerate(st.axes)
        )
        producers = self.attached_producers(st)
        body = self.body_of(st)
        source = body.source if isinstance(body, Reduce) else body
        value = simplify(self.to_buffers(substitute(source, axis_map)), ranges)
        if isinstance(body, Reduce):
            acc = TensorRead(buf, store_idx)
            main = Store(buf, store_idx, Binary(_COMBINE[body.combiner], acc, value, buf.dtype))
            init = Store(buf, store_idx, reduce_identity(body.combiner, buf.dtype))
        else:
            main, init = Store(buf, store_idx, value), None
        return self.nest(st, loops, g.ext, main, init, guards, producers)

    def nest(
        self,
        st: Stage,
        loops: list[Loop],
        ext: dict[str, int],
        main: Stmt,
        init: Stmt | None,
        guards: list[Expr],
        producers: _Producers,
    ) -> Stmt:
        depth = {id(g): _depth(g, loops) for g in guards}
        first_reduce = next((d for d, lp in enumerate(loops) if lp.kind == "reduce"), None)
        hoisted = _hoistable(st, loops, ext, guards, first_reduce)
        fast = [g for g in guards if id(g) not in hoisted]
        body: Stmt = main
        fast_body: Stmt = main
        for d in range(len(loops) - 1, -1, -1):
            at = (st, loops, ext, d, first_reduce, init, depth, producers)
            body = self.level(body, guards, *at)
            if hoisted and first_reduce is not None and d >= first_reduce:
                fast_body = self.level(fast_body, fast, *at)
            if hoisted and d == first_reduce:  # unswitch: the tiles away from the edge skip guards
                cond = conjunction(list(hoisted.values()))
                body = IfThen(cond, fast_body, body)
        body = _wrap_guards(body, [g for g in guards if depth[id(g)] < 0])
        if first_reduce is None and init is not None:
            body = seq([init, body])
        return body

    def level(
        self,
        body: Stmt,
        guards: list[Expr],
        st: Stage,
        loops: list[Loop],
        ext: dict[str, int],
        d: int,
        first_reduce: int | None,
        init: Stmt | None,
        depth: dict[int, int],
        producers: _Producers,
    ) -> Stmt:
        """Loop ``d`` of the nest around ``body``: its guards, attached producers, reset."""
        body = _wrap_guards(body, [g for g in guards if depth[id(g)] == d])
        for alloc_buf, stmt in reversed(producers.get(loops[d].name, [])):
            body = Allocate(alloc_buf, seq([stmt, body]))
        lp = loops[d]
        kind = _KIND[st.annotations.get(lp.name)]
        if kind == "unrolled" and ext[lp.name] > MAX_UNROLL:
            raise LoweringError(
                f"stage '{st.name}': unrolled loop '{lp.name}' has extent {ext[lp.name]} "
                f"where it is computed, more than {MAX_UNROLL}; split it first"
            )
        body = For(lp.var, ext[lp.name], kind, body)
        if d == first_reduce and init is not None:
            body = seq([self.init_nest(st, loops[d:], ext, init, guards), body])
        return body

    def init_nest(
        self, st: Stage, loops: list[Loop], ext: dict[str, int], init: Stmt, guards: list[Expr]
    ) -> Stmt:
        """Reset the accumulator just outside the outermost reduce loop (inner spatial loops,
        as parallel as they are there: a reduction blocked outside its tiles resets its whole
        output here)."""
        spatial = [lp for lp in loops if lp.kind == "spatial"]
        inner_vars = {lp.var for lp in loops}
        mine = [
            g
            for g in guards
            if free_vars(g) & inner_vars and not free_vars(g) & _reduce_vars(loops)
        ]
        depth = {id(g): _depth(g, spatial) for g in mine}
        body: Stmt = init
        for d in range(len(spatial) - 1, -1, -1):
            body = _wrap_guards(body, [g for g in mine if depth[id(g)] == d])
            kind = _KIND[st.annotations.get(spatial[d].name)]
            body = For(spatial[d].var, ext[spatial[d].name], kind, body)
        return _wrap_guards(body, [g for g in mine if depth[id(g)] < 0])

    def attached_producers(self, st: Stage) -> _Producers:
        """Stages computed at ``st``'s loops, per loop in dependency order, with their buffers."""
        out: _Producers = {}
        for prod in self.sch.stages:
            if prod.attach[:2] != ("at", st.name):
                continue
            g = self.geometry(prod)
            box = [g.region[a.name] for a in prod.axes]
            scope = prod.scope if prod.scope != "global" else "local"
            buf = Buffer(sanitize(prod.name), tuple(n for _, n in box), prod.tensor.dtype, scope)
            self.placed[id(prod.tensor)] = _Placed(buf, tuple(lo for lo, _ in box))
            at = prod.attach[2]
            stmt = seq(
                [Comment(f"{prod.name}: computed at {st.name}.{at}"), self.stage_nest(prod, buf)]
            )
            out.setdefault(at, []).append((buf, stmt))
        return out


_COMBINE = {"sum": "add", "max": "max", "min": "min"}


def _is_zero(e: Expr) -> bool:
    return isinstance(e, Const) and e.value == 0


def _plus(a: Expr, b: Expr) -> Expr:
    return b if _is_zero(a) else a + b


def _reduce_vars(loops: list[Loop]) -> set[Var]:
    return {lp.var for lp in loops if lp.kind == "reduce"}


def _depth(g: Expr, loops: list[Loop]) -> int:
    used = free_vars(g)
    return max((d for d, lp in enumerate(loops) if lp.var in used), default=-1)


def _wrap_guards(body: Stmt, guards: list[Expr]) -> Stmt:
    return IfThen(conjunction(guards), body) if guards else body


def _loop_values(st: Stage, ext: dict[str, int]) -> dict[str, Expr]:
    """Every loop's value in terms of the leaf loop variables."""
    values: dict[str, Expr] = {lp.name: lp.var for lp in st.leaves}
    for rel in reversed(st.relations):
        if isinstance(rel, Fuse):
            f = values[rel.fused.name]
            values[rel.outer.name] = f // ext[rel.inner.name]
            values[rel.inner.name] = f % ext[rel.inner.name]
        else:
            values[rel.parent.name] = values[rel.outer.name] * rel.factor + values[rel.inner.name]
    return values


def _guards(
    st: Stage,
    ext: dict[str, int],
    values: dict[str, Expr],
    region: dict[str, tuple[Expr, int]],
    full: dict[str, int],
    ranges: dict[Var, int],
) -> list[Expr]:
    """Conditions keeping non-divisible splits and attached regions inside the tensor."""
    out: list[Expr] = []
    for rel in st.relations:
        if not isinstance(rel, Fuse) and ext[rel.parent.name] % rel.factor:
            out.append(values[rel.parent.name] < ext[rel.parent.name])
    for name, (lo, n) in region.items():
        if _is_zero(lo) and n == full[name]:
            continue
        idx = _plus(lo, values[name])
        out.append(idx < full[name])
        if may_be_negative(idx, ranges):
            out.append(idx >= 0)
    kept: list[Expr] = []
    for g in out:
        g = simplify(g, ranges)
        if not (isinstance(g, Const) and g.value):
            if isinstance(g, Const):
                kept.append(g)  # never true: keep the (empty) region honest
            elif g not in kept:
                kept.append(g)
    return kept


def build_nest(sch: Schedule, name: str = "kernel", num_threads: int = 1) -> PrimFunc:
    """The schedule's loop nest as one PrimFunc named ``name`` (inputs, then outputs, as
    parameters), before the passes: loops still carry their unroll/vector/parallel kinds."""
    low = _Lowering(sch)
    for st in sch.stages:
        low.by_tensor[id(st.tensor)] = st
    params = []
    for t in sch.inputs:
        buf = Buffer(t.name, t.shape, t.dtype)
        low.placed[id(t)] = _Placed(buf, tuple(Const(0) for _ in t.shape))
        params.append(buf)
    outputs: list[Buffer] = []
    for st in sch.stages:
        if st.attach == ("root",):
            buf = Buffer(st.name, st.tensor.shape, st.tensor.dtype)
            low.placed[id(st.tensor)] = _Placed(buf, tuple(Const(0) for _ in st.tensor.shape))
            (outputs if st.is_output else low.temporaries).append(buf)
    order = {id(o): i for i, o in enumerate(sch.outputs)}
    outputs.sort(key=lambda b: next(order[id(s.tensor)] for s in sch.stages if s.name == b.name))
    stmts: list[Stmt] = []
    for st in sch.stages:
        if st.attach != ("root",):
            continue
        stmts.append(Comment(f"stage {st.name}"))
        stmts.append(low.stage_nest(st, low.placed[id(st.tensor)].buffer))
    return PrimFunc(
        sanitize(name),
        tuple(params) + tuple(outputs),
        tuple(outputs),
        tuple(low.temporaries),
        seq(stmts),
        num_threads,
    )
