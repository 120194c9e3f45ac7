"""New stages: primitives that add a buffer between a stage and its data (an accumulator, a
blocked reduction, a copy in a new layout). The program computes the same values through it.

Each builds the new tensor and the rewritten body first and inserts them only when all is built.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..errors import ScheduleError
from ..te.expr import (
    Expr,
    IterVar,
    Reduce,
    Select,
    TensorRead,
    Var,
    const,
    reduce_identity,
    rewrite,
    substitute,
    tensors_read,
)
from ..te.tensor import Tensor, compute
from .base import ScheduleBase, traced
from .stage import ROOT, Loop, Stage

CACHE_SCOPES = ("local", "register")


class NewStages(ScheduleBase):
    """Primitives that add a stage: ``cache_write``, ``rfactor``, ``pack``/``cache_read``."""

    @traced
    def cache_write(self, stage: str, scope: str = "local") -> str:
        """Accumulate into a new ``<stage>_<scope>`` stage; the stage itself becomes the copy-out.

            cache_write("C", "local"):
                for i, j: for k: C[i, j] += A[i, k] * B[k, j]
                    →    for i, j: for k: C_local[i, j] += A[i, k] * B[k, j]
                         for i, j: C[i, j] = C_local[i, j]

        Then ``compute_at`` the cache inside a loop of the stage to keep a tile of sums local.

        Args:
            stage: a stage (or its Tensor) no other primitive has touched yet.
            scope: ``"local"`` (a small buffer) or ``"register"`` (named variables; the tile
                must be fully unrolled).

        Returns:
            The new stage's name, ``f"{stage}_{scope}"``.

        Raises:
            ScheduleError: unknown stage; another scope; the stage was already split, fused,
                reordered or annotated, is not at root, or has stages computed inside it; the
                name is taken.
        """
        st = self.stage(stage, "cache_write")
        if scope not in CACHE_SCOPES:
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

    @traced
    def rfactor(self, stage: str, axis: str, factor: int, scope: str = "local") -> str:
        """Block a reduction: ``<stage>_rf`` sums each block of ``factor`` steps of ``axis``, the
        stage sums the blocks (GotoBLAS's K blocking, TVM's rfactor).

            rfactor("C", "k", 4):
                for i, j: for k in 0..K: C[i, j] += A[i, k] * B[k, j]
                    →    for k_o in 0..K/4, i, j: for k_i in 0..4:
                             C_rf[k_o, i, j] += A[i, k_o*4 + k_i] * B[k_o*4 + k_i, j]
                         for i, j: for k_o: C[i, j] += C_rf[k_o, i, j]

        Computing ``C_rf`` at a loop of ``C`` inside ``k_o`` keeps one block's partial sums in a
        tile while the slices of A and B that block reads stay in cache. A short last block adds
        the combiner's identity for its missing steps.

        Args:
            stage: a reduction stage (or its Tensor) no other primitive has touched yet.
            axis: one of its reduce axes.
            factor: steps per block, an int in 1..extent-1.
            scope: of ``<stage>_rf``: ``"local"`` or ``"register"`` (named variables).

        Returns:
            The new stage's name, ``f"{stage}_rf"``.

        Raises:
            ScheduleError: unknown stage; ``axis`` not a reduce axis; ``factor`` out of range;
                another scope; the stage was already transformed, is not at root, or has stages
                computed inside it; the name is taken.
        """
        st = self.stage(stage, "rfactor")
        if scope not in CACHE_SCOPES:
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
        assert isinstance(body, Reduce)
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
        partial_at = (outer.var, *(a.var for a in st.axes))
        st.body = Reduce(body.combiner, rf[partial_at], (outer,), body.dtype)
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
        if st.attach != ROOT:
            raise ScheduleError(primitive, None, f"'{st.name}' is not computed at root")
        inside = [o.name for o in self._attached_at(st)]
        if inside:  # their reads would move to the new stage
            raise ScheduleError(
                primitive,
                None,
                f"{inside} computed at '{st.name}': apply {primitive} before compute_at",
            )

    @traced
    def pack(
        self,
        tensor: str,
        consumer: str,
        axis: int | None = None,
        factor: int = 1,
        order: Sequence[int] | None = None,
    ) -> str:
        """Copy ``tensor`` into a new stage ``<tensor>_pack`` in a blocked layout that
        ``consumer`` reads instead (a cache_read with a layout change).

            pack("B", "C", axis=1, factor=16, order=(1, 0, 2)):      B[K, N]
                for i, j, k: C[i, j] += A[i, k] * B[k, j]
                    →    for jo, k, ji: B_pack[jo, k, ji] = B[k, jo*16 + ji]   (tail: 0)
                         for i, j, k: C[i, j] += A[i, k] * B_pack[j // 16, k, j % 16]

        Dimension ``axis`` is split by ``factor`` into (outer, inner), the inner part moved
        last, then the dimensions are permuted by ``order``; so a 16-wide vector load of
        ``B_pack`` above is contiguous. Without ``axis`` the copy keeps the layout.

        Args:
            tensor: the name of a tensor ``consumer`` reads (an input or a stage not computed
                at another's loop).
            consumer: the stage (or its Tensor) whose reads are redirected.
            axis: the dimension to block, or None.
            factor: the block size, a positive int.
            order: a permutation of the packed dimensions, or None for as-is.

        Returns:
            The new stage's name, ``f"{tensor}_pack"``.

        Raises:
            ScheduleError: unknown consumer; it reads no such tensor; the tensor is computed
                at a loop; ``axis``, ``factor`` or ``order`` out of range; the name is taken.
        """
        cons = self.stage(consumer, "pack")
        src = next((t for t in tensors_read(cons.body) if t.name == tensor), None)
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
        body = _replace_reads(cons.body, src, reader)
        cons.body = body
        self.stages.insert(self.stages.index(cons), Stage.from_tensor(packed, False))
        return name

    def cache_read(self, tensor: str, consumer: str) -> str:
        """Copy ``tensor`` into a buffer ``consumer`` reads: ``pack`` without a layout change,
        recorded in the trace as that ``pack``.

            cache_read("B", "C"):
                ... B[k, j] ...    →    B_pack[k, j] = B[k, j];  ... B_pack[k, j] ...

        Returns:
            The new stage's name, ``f"{tensor}_pack"``.

        Raises:
            ScheduleError: as ``pack``.
        """
        return self.pack(tensor, consumer)


def _rename_compute(st: Stage, name: str) -> Tensor:
    """A copy of the stage's compute under a new name, with axis variables of its own."""
    axes = tuple(IterVar(Var(a.name), a.extent, a.kind) for a in st.axes)
    body = substitute(st.body, {a.var: b.var for a, b in zip(st.axes, axes, strict=True)})
    t = st.tensor
    return Tensor(name, t.shape, t.dtype, axes, body, t.tag, t.attrs)


Reader = Callable[[tuple[Expr, ...]], Expr]


def _make_pack(
    src: Tensor, name: str, axis: int | None, factor: int, order: tuple[int, ...]
) -> tuple[Tensor, Reader]:
    """The packed tensor and a function mapping an index of ``src`` to a read of it."""
    if axis is None:
        dims = list(src.shape)
    else:
        dims = [*src.shape[:axis], -(-src.shape[axis] // factor), *src.shape[axis + 1 :], factor]
    shape = tuple(dims[o] for o in order)

    def unpermute(idx: tuple[Expr, ...]) -> list[Expr]:
        logical: list = [None] * len(idx)
        for pos, o in enumerate(order):
            logical[o] = idx[pos]
        return logical

    def fbody(*idx: Expr) -> Expr:
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

    def reader(indices: tuple[Expr, ...]) -> Expr:
        if axis is None:
            logical = list(indices)
        else:
            i = indices[axis]
            logical = [*indices[:axis], i // factor, *indices[axis + 1 :], i % factor]
        return packed[tuple(logical[o] for o in order)]

    return packed, reader


def _replace_reads(body: Expr, src: Tensor, reader: Reader) -> Expr:
    """``body`` with every read of ``src`` (indices already rewritten) replaced by ``reader``."""
    return rewrite(
        body, lambda e: reader(e.indices) if isinstance(e, TensorRead) and e.tensor is src else None
    )
