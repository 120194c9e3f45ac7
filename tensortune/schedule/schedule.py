"""Schedule primitives over the stages of a compute definition, recorded as a replayable trace.

Every primitive names its stage and loops by string, checks legality first (raising
``ScheduleError`` naming the primitive, the loop and the reason) and appends one JSON-serialisable
instruction to ``trace``; ``Schedule.from_trace`` replays it onto a fresh schedule.

    s = Schedule(C)
    io, ii = s.split("C", "i", 8)   # for i  ->  for i_o: for i_i in 0..8  (i = i_o*8 + i_i)
    s.reorder("C", io, "j", ii)
    s.vectorize("C", "j")
"""

from __future__ import annotations

import functools
import inspect
import json
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import ScheduleError
from ..te.expr import (
    IterVar,
    Reduce,
    Select,
    TensorRead,
    Var,
    children,
    const,
    rebuild,
    reduce_identity,
    substitute,
    walk,
)
from ..te.tensor import Tensor, compute
from .stage import Fuse, Loop, Split, Stage

MAX_VECTOR_LANES = 64
MAX_UNROLL = 256
SCOPES = ("global", "local", "register")
TARGET_FLAGS = ("opt_level", "unroll_pragma", "extra_cflags", "fast_math")
OPT_LEVELS = ("O1", "O2", "O3", "Ofast")
ALLOWED_CFLAGS = ("-fvariable-expansion-in-unroller", "-fno-unroll-loops")
"""The only flags ``extra_cflags`` may hold. Flags reach the compiler's command line and a trace
may come from a shared database, so they are a closed set: free text such as ``-wrapper`` or
``-fplugin=`` would run whatever it names."""


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


ARG_TYPES: dict[str, Callable[[Any], bool]] = {
    "str": lambda v: isinstance(v, str),
    "int": _is_int,
    "None": lambda v: v is None,
    "Any": lambda v: True,
    "Sequence[str]": lambda v: isinstance(v, (list, tuple)) and all(isinstance(x, str) for x in v),
    "Sequence[int]": lambda v: isinstance(v, (list, tuple)) and all(_is_int(x) for x in v),
}
"""What each annotation of a primitive's parameter accepts: a replayed trace step (data, maybe
from a shared database) is checked against them before the primitive runs."""


def _traced(fn):
    """Record the call (with default arguments filled in) once the primitive succeeded."""
    sig = inspect.signature(fn)

    @functools.wraps(fn)
    def wrapper(self: Schedule, *args, **kwargs):
        try:
            bound = sig.bind(self, *args, **kwargs)
        except TypeError as exc:
            raise ScheduleError(fn.__name__, None, f"bad arguments: {exc}") from None
        bound.apply_defaults()
        record = {k: _jsonable(v) for k, v in bound.arguments.items() if k != "self"}
        saved = self._snapshot()
        try:
            result = fn(self, *args, **kwargs)
        except Exception:
            self._restore(saved)  # a refused primitive leaves the schedule as it was
            raise
        self.trace.append({"primitive": fn.__name__, "args": record})
        return result

    wrapper.accepts = {  # an annotation missing from ARG_TYPES fails here, at import
        name: (p.annotation, [ARG_TYPES[t.strip()] for t in p.annotation.split("|")])
        for name, p in list(sig.parameters.items())[1:]
    }
    return wrapper


def _jsonable(v: Any) -> Any:
    if isinstance(v, Tensor):
        return v.name
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    return v


def _post_order(outputs: Sequence[Tensor]) -> list[Tensor]:
    order: list[Tensor] = []
    seen: set[int] = set()

    def visit(t: Tensor) -> None:
        if id(t) in seen:
            return
        seen.add(id(t))
        for i in t.inputs:
            visit(i)
        order.append(t)

    for t in outputs:
        visit(t)
    return order


class Schedule:
    """A program's stages, producers before consumers, and the trace that shaped them."""

    def __init__(self, outputs: Tensor | Sequence[Tensor]):
        outputs = (outputs,) if isinstance(outputs, Tensor) else tuple(outputs)
        self.outputs = outputs
        tensors = _post_order(outputs)
        self.inputs = tuple(t for t in tensors if t.is_placeholder)
        names = [t.name for t in tensors]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ScheduleError("schedule", None, f"tensor names must be unique, repeated: {dup}")
        self.stages: list[Stage] = [
            Stage.from_tensor(t, any(t is o for o in outputs))
            for t in tensors
            if not t.is_placeholder
        ]
        self.trace: list[dict] = []
        self.flags: dict[str, Any] = {}

    def _snapshot(self) -> tuple:
        """Everything a primitive may change, to undo a primitive that fails half-way."""
        copies = {"leaves": list, "relations": list, "annotations": dict}
        stages = [
            (st, {k: copies[k](v) if k in copies else v for k, v in vars(st).items()})
            for st in self.stages
        ]
        return list(self.stages), stages, dict(self.flags)

    def _restore(self, saved: tuple) -> None:
        self.stages[:], stages, self.flags = saved[0], saved[1], saved[2]
        for st, fields in stages:
            vars(st).update(fields)

    # -- lookup ---------------------------------------------------------------------------------
    def __getitem__(self, name: str | Tensor) -> Stage:
        return self.stage(name, "schedule")

    def stage(self, name: str | Tensor, primitive: str) -> Stage:
        key = name.name if isinstance(name, Tensor) else name
        for st in self.stages:
            if st.name == key:
                return st
        known = ", ".join(s.name for s in self.stages)
        raise ScheduleError(primitive, None, f"unknown stage '{key}'; stages are: {known}")

    def _loop(self, st: Stage, name: str, primitive: str) -> Loop:
        lp = st.loop(name)
        if lp is None:
            leaves = ", ".join(x.name for x in st.leaves)
            raise ScheduleError(
                primitive, name, f"stage '{st.name}' has no loop '{name}'; its loops are: {leaves}"
            )
        return lp

    def consumers(self, st: Stage) -> list[Stage]:
        return [c for c in self.stages if any(t is st.tensor for t in _reads(c))]

    # -- loop transformations -------------------------------------------------------------------
    @_traced
    def split(self, stage: str, loop: str, factor: int) -> tuple[str, str]:
        """``for x in N`` -> ``for x_o in ceil(N/f): for x_i in f``; x = x_o*f + x_i"""
        st = self.stage(stage, "split")
        lp = self._loop(st, loop, "split")
        if not isinstance(factor, int) or isinstance(factor, bool) or factor <= 0:
            raise ScheduleError("split", loop, f"factor must be a positive int, got {factor!r}")
        self._check_unannotated(st, lp, "split")
        outer = Loop(st.fresh_name(f"{loop}_o"), lp.kind, Var(st.fresh_name(f"{loop}_o")))
        inner = Loop(st.fresh_name(f"{loop}_i"), lp.kind, Var(st.fresh_name(f"{loop}_i")))
        pos = st.leaves.index(lp)
        st.leaves[pos : pos + 1] = [outer, inner]
        st.relations.append(Split(lp, outer, inner, factor))
        return outer.name, inner.name

    @_traced
    def fuse(self, stage: str, outer: str, inner: str) -> str:
        """``for a: for b`` (adjacent) -> ``for a_b in A*B`` with a = a_b // B, b = a_b % B."""
        st = self.stage(stage, "fuse")
        lo, li = self._loop(st, outer, "fuse"), self._loop(st, inner, "fuse")
        i = st.leaves.index(lo)
        if i + 1 >= len(st.leaves) or st.leaves[i + 1] is not li:
            raise ScheduleError("fuse", inner, f"'{inner}' must come directly inside '{outer}'")
        if lo.kind != li.kind:
            raise ScheduleError("fuse", inner, "cannot fuse a spatial loop with a reduce loop")
        for lp in (lo, li):
            self._check_unannotated(st, lp, "fuse")
        name = st.fresh_name(f"{outer}_{inner}")
        fused = Loop(name, lo.kind, Var(name))
        st.leaves[i : i + 2] = [fused]
        st.relations.append(Fuse(lo, li, fused))
        return fused.name

    @_traced
    def reorder(self, stage: str, loops: Sequence[str]) -> None:
        """Put the named loops in this order, in the positions they occupied together."""
        st = self.stage(stage, "reorder")
        picked = [self._loop(st, n, "reorder") for n in loops]
        if len({lp.name for lp in picked}) != len(picked):
            raise ScheduleError("reorder", None, f"a loop is named twice in {list(loops)}")
        slots = sorted(st.leaves.index(lp) for lp in picked)
        new = list(st.leaves)
        for slot, lp in zip(slots, picked, strict=True):
            new[slot] = lp
        for name, kind in st.annotations.items():
            if kind == "vectorized" and new[-1].name != name:
                raise ScheduleError(
                    "reorder", name, "the loop is vectorized and must stay innermost"
                )
        for other in self.stages:
            if other.attach[:2] == ("at", st.name):
                at = next(lp for lp in st.leaves if lp.name == other.attach[2])
                if _moved_across_reduce(st.leaves, new, at):
                    raise ScheduleError(
                        "reorder",
                        at.name,
                        f"stage '{other.name}' is computed at this loop; moving a reduce loop "
                        "across it would break the dependence (detach it first)",
                    )
        st.leaves[:] = new
        self._check_placement("reorder", None)

    @_traced
    def tile(self, stage: str, x: str, y: str, x_factor: int, y_factor: int) -> tuple[str, ...]:
        """Split x and y and order the four loops ``x_o, y_o, x_i, y_i``."""
        xo, xi = self.split.__wrapped__(self, stage, x, x_factor)
        yo, yi = self.split.__wrapped__(self, stage, y, y_factor)
        self.reorder.__wrapped__(self, stage, [xo, yo, xi, yi])
        return xo, yo, xi, yi

    # -- annotations ------------------------------------------------------------------------------
    @_traced
    def vectorize(self, stage: str, loop: str) -> None:
        """Emit the innermost loop as SIMD operations on vector registers."""
        st = self.stage(stage, "vectorize")
        lp = self._loop(st, loop, "vectorize")
        ext = st.extents()[loop]
        if st.leaves[-1] is not lp:
            raise ScheduleError(
                "vectorize",
                loop,
                f"only the innermost loop ('{st.leaves[-1].name}') can be vectorized",
            )
        region_pending = st.attach[0] == "at" and lp in st.roots  # extent known at lowering
        if not region_pending and (ext < 2 or ext > MAX_VECTOR_LANES or ext & (ext - 1)):
            raise ScheduleError(
                "vectorize",
                loop,
                f"extent {ext} is not a power of two between 2 and {MAX_VECTOR_LANES}; "
                "split it first",
            )
        if st.tensor.dtype == "bool":
            raise ScheduleError("vectorize", loop, "boolean tensors cannot be vectorized")
        for other in self.stages:
            if other.attach == ("at", st.name, loop):
                raise ScheduleError(
                    "vectorize",
                    loop,
                    f"stage '{other.name}' is computed at this loop; a vector loop body can "
                    "only hold stores",
                )
        self._annotate(st, lp, "vectorized", "vectorize")

    @_traced
    def unroll(self, stage: str, loop: str) -> None:
        """Replicate the loop body once per iteration (the indices become constants).

        A stage computed at another's loop has its extents fixed only by the region it must
        produce there, so for it the limit is checked when lowering.
        """
        st = self.stage(stage, "unroll")
        lp = self._loop(st, loop, "unroll")
        ext = st.extents()[loop]
        if ext > MAX_UNROLL and st.attach[0] != "at":
            raise ScheduleError(
                "unroll", loop, f"extent {ext} exceeds {MAX_UNROLL}; split it first"
            )
        self._annotate(st, lp, "unrolled", "unroll")

    @_traced
    def parallel(self, stage: str, loop: str) -> None:
        """Distribute the loop's iterations over threads (OpenMP)."""
        st = self.stage(stage, "parallel")
        lp = self._loop(st, loop, "parallel")
        if lp.kind == "reduce":
            raise ScheduleError(
                "parallel",
                loop,
                "it is a reduction loop; parallel iterations would race on the "
                "same output elements",
            )
        if "parallel" in st.annotations.values():
            raise ScheduleError("parallel", loop, f"stage '{st.name}' already has a parallel loop")
        self._annotate(st, lp, "parallel", "parallel")

    def _annotate(self, st: Stage, lp: Loop, kind: str, primitive: str) -> None:
        prev = st.annotations.get(lp.name)
        if prev is not None and prev != kind:
            raise ScheduleError(primitive, lp.name, f"the loop is already {prev}")
        st.annotations[lp.name] = kind

    def _check_unannotated(self, st: Stage, lp: Loop, primitive: str) -> None:
        if lp.name in st.annotations:
            raise ScheduleError(
                primitive,
                lp.name,
                f"the loop is already {st.annotations[lp.name]}; transform first",
            )
        for other in self.stages:
            if other.attach == ("at", st.name, lp.name):
                raise ScheduleError(
                    primitive, lp.name, f"stage '{other.name}' is computed at this loop"
                )

    @_traced
    def annotate(self, key: str, value: Any) -> None:
        """Code-generation flags: opt_level ("O2"/"O3"), unroll_pragma (gcc unroll limit),
        extra_cflags (a list drawn from ``ALLOWED_CFLAGS``), fast_math (bool)."""
        check_flag(key, value)
        self.flags[key] = value

    # -- placement --------------------------------------------------------------------------------
    @_traced
    def compute_at(self, stage: str, consumer: str, loop: str) -> None:
        """Compute the stage inside ``consumer``'s loop: the region one iteration needs.

        Every reader of the stage must be ``consumer`` or already be computed at that loop or
        inside it (attach those first), so a stage with several readers works as in Halide: the
        region covers what all of them need, and it is computed before them.
        """
        st = self.stage(stage, "compute_at")
        cons = self.stage(consumer, "compute_at")
        self._loop(cons, loop, "compute_at")
        if st.is_output:
            raise ScheduleError("compute_at", loop, f"'{st.name}' is an output; it stays at root")
        host = cons
        while True:  # the consumer must not itself be computed inside the stage
            if host is st:
                raise ScheduleError(
                    "compute_at",
                    loop,
                    f"'{cons.name}' is computed inside '{st.name}'"
                    if cons is not st
                    else f"'{st.name}' cannot be computed inside itself",
                )
            if host.attach[0] != "at":
                break
            host = self.stage(host.attach[1], "compute_at")
        if cons.attach == ("inline",):
            raise ScheduleError("compute_at", loop, f"consumer '{cons.name}' is inlined")
        if cons.annotations.get(loop) in ("vectorized", "unrolled"):
            raise ScheduleError(
                "compute_at", loop, f"the loop is {cons.annotations[loop]}; pick an outer loop"
            )
        st.attach = ("at", cons.name, loop)
        self._check_placement("compute_at", loop)

    @_traced
    def compute_root(self, stage: str) -> None:
        st = self.stage(stage, "compute_root")
        st.attach = ("root",)
        self._check_placement("compute_root", None)

    @_traced
    def compute_inline(self, stage: str) -> None:
        """Substitute the stage's expression into its consumers; it gets no buffer or loops."""
        st = self.stage(stage, "compute_inline")
        if st.is_output:
            raise ScheduleError("compute_inline", None, f"'{st.name}' is an output")
        if st.is_reduction:
            raise ScheduleError(
                "compute_inline",
                None,
                f"'{st.name}' is a reduction; only elementwise stages inline",
            )
        if any(o.attach[:2] == ("at", st.name) for o in self.stages):
            raise ScheduleError(
                "compute_inline", None, f"another stage is computed inside '{st.name}'"
            )
        st.attach = ("inline",)
        self._check_placement("compute_inline", None)

    def readers(self, st: Stage) -> list[Stage]:
        """The stages whose loops read ``st``: its consumers, looking through inlined ones."""
        out: list[Stage] = []
        for c in self.consumers(st):
            for r in self.readers(c) if c.attach == ("inline",) else [c]:
                if r not in out:
                    out.append(r)
        return out

    def is_inside(self, st: Stage, cons: Stage, loop: str) -> bool:
        """Whether ``st`` is computed at ``cons.loop`` or a loop inside it, directly or inside
        a stage that is."""
        if st.attach[0] != "at":
            return False
        _, at_stage, at_loop = st.attach
        if at_stage == cons.name:
            names = [lp.name for lp in cons.leaves]
            return at_loop in names and loop in names and names.index(at_loop) >= names.index(loop)
        return self.is_inside(self.stage(at_stage, "compute_at"), cons, loop)

    def _check_placement(self, primitive: str, loop: str | None) -> None:
        """Every stage computed at a consumer's loop must have all its readers there or inside:
        the buffer exists only in that loop's body, and is filled before the first of them."""
        for st in self.stages:
            if st.attach[0] != "at":
                continue
            cons, at = self.stage(st.attach[1], primitive), st.attach[2]
            outside = [
                r.name
                for r in self.readers(st)
                if r is not cons and not self.is_inside(r, cons, at)
            ]
            if outside:
                raise ScheduleError(
                    primitive,
                    loop,
                    f"'{st.name}' is computed at {cons.name}.{at} but read by {outside}, which "
                    f"are not computed inside that loop (compute them at or inside it first)",
                )

    # -- new stages -------------------------------------------------------------------------------
    @_traced
    def cache_write(self, stage: str, scope: str = "local") -> str:
        """Accumulate into a ``<stage>_<scope>`` buffer; the stage itself becomes the copy-out.

        Use before other transforms of the stage; then ``compute_at`` the cache inside the stage.
        ``register`` keeps the accumulator tile in named variables (it must be fully unrolled).
        """
        st = self.stage(stage, "cache_write")
        if scope not in ("local", "register"):
            raise ScheduleError(
                "cache_write", None, f"scope must be 'local' or 'register', got {scope!r}"
            )
        self._check_fresh_stage(st, "cache_write")
        name = f"{st.name}_{scope}"
        self._check_new_name(name, "cache_write")
        cache = _rename_compute(st, name)
        new = Stage.from_tensor(cache, False)
        new.scope = scope
        st.body = cache[tuple(a.var for a in st.axes)]
        st.reduce_axes = ()
        st.roots = tuple(r for r in st.roots if r.kind == "spatial")
        st.leaves = list(st.roots)
        self.stages.insert(self.stages.index(st), new)
        return name

    @_traced
    def rfactor(self, stage: str, axis: str, factor: int, scope: str = "local") -> str:
        """Block the reduction over ``axis``: ``<stage>_rf`` reduces each block of ``factor``
        steps, the stage reduces the blocks (GotoBLAS's K blocking, TVM's rfactor).

            C[i, j] = sum_k A[i, k] * B[k, j]
        ->  C_rf[k_o, i, j] = sum_{k_i < factor} A[i, k_o*factor + k_i] * B[k_o*factor + k_i, j]
            C[i, j] = sum_{k_o} C_rf[k_o, i, j]

        Computing ``C_rf`` at a loop of ``C`` inside ``k_o`` keeps one block's partial sums in a
        tile while the slices of A and B that block reads stay in cache. Use before other
        transforms of the stage; ``scope`` is that of ``C_rf`` (``register``: named variables).
        """
        st = self.stage(stage, "rfactor")
        if scope not in ("local", "register"):
            raise ScheduleError(
                "rfactor", axis, f"scope must be 'local' or 'register', got {scope!r}"
            )
        self._check_fresh_stage(st, "rfactor")
        red = next((a for a in st.reduce_axes if a.name == axis), None)
        if red is None:
            names = [a.name for a in st.reduce_axes] or "none"
            raise ScheduleError(
                "rfactor", axis, f"not a reduce axis of '{st.name}'; its reduce axes: {names}"
            )
        if not isinstance(factor, int) or isinstance(factor, bool) or not 0 < factor < red.extent:
            raise ScheduleError(
                "rfactor", axis, f"factor must be an int in 1..{red.extent - 1}, got {factor!r}"
            )
        name = f"{st.name}_rf"
        self._check_new_name(name, "rfactor")
        blocks = -(-red.extent // factor)
        k_o = IterVar(Var(f"{axis}_o"), blocks)
        k_i = IterVar(Var(f"{axis}_i"), factor, "reduce")
        axes = (k_o, *(IterVar(Var(a.name), a.extent) for a in st.axes))
        k = k_o.var * factor + k_i.var
        mapping = {a.var: b.var for a, b in zip(st.axes, axes[1:], strict=True)} | {red.var: k}
        body = st.body
        source = substitute(body.source, mapping)
        if red.extent % factor:  # the last block is short: its missing steps add the identity
            source = Select(
                k < red.extent, source, reduce_identity(body.combiner, body.dtype), body.dtype
            )
        others = tuple(a for a in st.reduce_axes if a is not red)
        rf = Tensor(
            name,
            (blocks, *st.tensor.shape),
            st.tensor.dtype,
            axes,
            Reduce(body.combiner, source, (k_i, *others), body.dtype),
            st.tensor.tag,
            st.tensor.attrs,
        )
        new = Stage.from_tensor(rf, False)
        new.scope = scope
        outer = IterVar(Var(f"{axis}_o"), blocks, "reduce")
        st.body = Reduce(
            body.combiner, rf[(outer.var, *(a.var for a in st.axes))], (outer,), body.dtype
        )
        st.reduce_axes = (outer,)
        st.roots = (
            *(r for r in st.roots if r.kind == "spatial"),
            Loop(outer.name, "reduce", outer.var),
        )
        st.leaves = list(st.roots)
        self.stages.insert(self.stages.index(st), new)
        return name

    def _check_fresh_stage(self, st: Stage, primitive: str) -> None:
        """A stage about to be split in two: untransformed, at root, nothing computed inside."""
        if st.relations or st.annotations or len(st.leaves) != len(st.roots):
            raise ScheduleError(
                primitive, None, f"apply {primitive} to '{st.name}' before other primitives"
            )
        if st.attach != ("root",):
            raise ScheduleError(primitive, None, f"'{st.name}' is not computed at root")
        inside = [o.name for o in self.stages if o.attach[:2] == ("at", st.name)]
        if inside:  # their reads would move to the new stage
            raise ScheduleError(
                primitive,
                None,
                f"{inside} computed at '{st.name}': apply {primitive} before compute_at",
            )

    @_traced
    def pack(
        self,
        tensor: str,
        consumer: str,
        axis: int | None = None,
        factor: int = 1,
        order: Sequence[int] | None = None,
    ) -> str:
        """Copy ``tensor`` into a new blocked layout read by ``consumer`` (a cache_read).

        Axis ``axis`` is split by ``factor`` into (outer, inner), the inner part moved last;
        then the dimensions are permuted by ``order``. E.g. B[K, N] with axis=1, factor=16,
        order=(1, 0, 2) gives B_pack[N/16, K, 16], so a 16-wide vector load of B_pack is
        contiguous. Tails are zero.
        """
        cons = self.stage(consumer, "pack")
        src = next((t for t in _reads(cons) if t.name == tensor), None)
        if src is None:
            raise ScheduleError(
                "pack", None, f"'{consumer}' does not read a tensor called '{tensor}'"
            )
        producer = next((st for st in self.stages if st.tensor is src), None)
        if producer is not None and producer.attach[0] == "at":  # the copy would read it instead
            at = f"{producer.attach[1]}.{producer.attach[2]}"
            raise ScheduleError(
                "pack", None, f"'{tensor}' is computed at {at}: pack it before compute_at"
            )
        if axis is not None and not 0 <= axis < src.ndim:
            raise ScheduleError("pack", None, f"axis must be in [0, {src.ndim}), got {axis}")
        if not isinstance(factor, int) or isinstance(factor, bool) or factor <= 0:
            raise ScheduleError("pack", None, f"factor must be a positive int, got {factor!r}")
        ndim_new = src.ndim + (1 if axis is not None else 0)
        order = tuple(range(ndim_new)) if order is None else tuple(order)
        if sorted(order) != list(range(ndim_new)):
            raise ScheduleError("pack", None, f"order must permute range({ndim_new}), got {order}")
        name = f"{src.name}_pack"
        self._check_new_name(name, "pack")
        packed, reader = _make_pack(src, name, axis, factor, order)
        cons.body = _replace_reads(cons.body, src, reader)
        self.stages.insert(self.stages.index(cons), Stage.from_tensor(packed, False))
        return name

    def cache_read(self, tensor: str, consumer: str) -> str:
        """Copy ``tensor`` into a buffer read by ``consumer`` (``pack`` without a layout change)."""
        return self.pack(tensor, consumer)

    def _check_new_name(self, name: str, primitive: str) -> None:
        if any(s.name == name for s in self.stages) or any(t.name == name for t in self.inputs):
            raise ScheduleError(primitive, None, f"a stage called '{name}' already exists")

    # -- replay -----------------------------------------------------------------------------------
    @classmethod
    def from_trace(cls, outputs: Tensor | Sequence[Tensor], trace: Sequence[dict]) -> Schedule:
        """Replay a recorded trace; the same trace on the same compute gives the same program."""
        sch = cls(outputs)
        for step in trace:
            name = step.get("primitive") if isinstance(step, dict) else None
            fn = getattr(cls, name, None) if isinstance(name, str) else None
            if not hasattr(fn, "accepts"):  # only traced primitives replay
                raise ScheduleError("from_trace", None, f"unknown primitive in trace step {step!r}")
            args = step.get("args", {})
            if not isinstance(args, dict):
                raise ScheduleError("from_trace", None, f"trace step {step!r} has no args dict")
            _check_types(name, fn.accepts, args)
            fn(sch, **args)
        return sch

    def trace_json(self) -> str:
        return json.dumps(self.trace)


def _check_types(primitive: str, accepts: dict, args: dict) -> None:
    """A replayed step's arguments have the types its primitive declares (names it does not
    declare are left to the primitive's own argument binding)."""
    for name, value in args.items():
        annotation, checks = accepts.get(name, ("Any", [ARG_TYPES["Any"]]))
        if not any(ok(value) for ok in checks):
            raise ScheduleError(
                primitive, None, f"bad arguments: {name} must be {annotation}, got {value!r}"
            )


def check_flag(key: str, value: Any) -> None:
    """Raise ScheduleError unless ``key=value`` is a legal code-generation flag; every value
    comes from a closed set, so no flag can smuggle text onto the compiler's command line."""
    if key not in TARGET_FLAGS:
        raise ScheduleError("annotate", None, f"unknown key {key!r}; use one of {TARGET_FLAGS}")
    if key == "opt_level" and value not in OPT_LEVELS:
        raise ScheduleError("annotate", None, f"opt_level must be O1/O2/O3/Ofast, got {value!r}")
    if key == "extra_cflags" and not (
        isinstance(value, (list, tuple)) and all(f in ALLOWED_CFLAGS for f in value)
    ):
        raise ScheduleError(
            "annotate",
            None,
            f"extra_cflags must be a list of allowed flags {ALLOWED_CFLAGS}, got {value!r}",
        )
    if key == "unroll_pragma" and (
        not isinstance(value, int) or isinstance(value, bool) or value <= 0
    ):
        raise ScheduleError(
            "annotate", None, f"unroll_pragma must be a positive int, got {value!r}"
        )
    if key == "fast_math" and not isinstance(value, bool):
        raise ScheduleError("annotate", None, f"fast_math must be True or False, got {value!r}")


def _reads(st: Stage) -> list[Tensor]:
    seen: dict[int, Tensor] = {}
    for node in walk(st.body):
        if isinstance(node, TensorRead):
            seen.setdefault(id(node.tensor), node.tensor)
    return list(seen.values())


def _moved_across_reduce(old: list[Loop], new: list[Loop], at: Loop) -> bool:
    """Whether a reduce loop changes side (outside/inside) of the attach loop."""

    def outside(order: list[Loop]) -> set[str]:
        return {lp.name for lp in order[: order.index(at) + 1] if lp.kind == "reduce"}

    return outside(old) != outside(new)


def _rename_compute(st: Stage, name: str) -> Tensor:
    """A copy of the stage's compute under a new name, with axis variables of its own."""
    axes = tuple(IterVar(Var(a.name), a.extent, a.kind) for a in st.axes)
    body = substitute(st.body, {a.var: b.var for a, b in zip(st.axes, axes, strict=True)})
    t = st.tensor
    return Tensor(name, t.shape, t.dtype, axes, body, t.tag, t.attrs)


def _make_pack(src: Tensor, name: str, axis: int | None, factor: int, order: tuple[int, ...]):
    """The packed tensor and a function mapping an index of ``src`` to a read of it."""
    if axis is None:
        dims = list(src.shape)
    else:
        dims = [*src.shape[:axis], -(-src.shape[axis] // factor), *src.shape[axis + 1 :], factor]
    shape = tuple(dims[o] for o in order)

    def unpermute(idx):
        logical = [None] * len(idx)
        for pos, o in enumerate(order):
            logical[o] = idx[pos]
        return logical

    def fbody(*idx):
        logical = unpermute(idx)
        if axis is None:
            return src[tuple(logical)]
        inner = logical[-1]
        orig = [*logical[:axis], logical[axis] * factor + inner, *logical[axis + 1 : -1]]
        if src.shape[axis] % factor == 0:
            return src[tuple(orig)]
        return Select(
            orig[axis] < src.shape[axis], src[tuple(orig)], const(0, src.dtype), src.dtype
        )

    packed = compute(shape, fbody, name=name, tag="pack")

    def reader(indices):
        if axis is None:
            logical = list(indices)
        else:
            i = indices[axis]
            logical = [*indices[:axis], i // factor, *indices[axis + 1 :], i % factor]
        return packed[tuple(logical[o] for o in order)]

    return packed, reader


def _replace_reads(body, src: Tensor, reader):
    def go(e):
        if isinstance(e, TensorRead) and e.tensor is src:
            return reader(tuple(go(i) for i in e.indices))
        kids = children(e)
        return rebuild(e, tuple(go(k) for k in kids)) if kids else e

    return go(body)
