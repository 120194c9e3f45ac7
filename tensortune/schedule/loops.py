"""Loop rewrites: split, fuse, reorder and tile change a stage's loop nest, not what it computes.

A composite (``tile``) plans on a scratch copy of the stage's loops and commits only when every
part was accepted, so a refusal half-way changes nothing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from ..errors import ScheduleError
from ..te.expr import Var
from .base import Change, ScheduleBase, traced
from .stage import Fuse, Loop, Split, Stage


class LoopRewrites(ScheduleBase):
    """Primitives that restructure a stage's loops: ``split``, ``fuse``, ``reorder``, ``tile``."""

    @traced
    def split(self, stage: str, loop: str, factor: int) -> tuple[str, str]:
        """Split a loop into an outer loop over blocks of ``factor`` and an inner loop within one.

            split("C", "i", factor=4):
                for i in 0..16: S(i)    →    for i_o in 0..4: for i_i in 0..4: S(i_o*4 + i_i)

        When ``factor`` does not divide the extent the outer loop rounds up and lowering guards
        the last block (``if i_o*4 + i_i < N``).

        Args:
            stage: the stage's name (or its Tensor).
            loop: one of the stage's current loops (``sch[stage].leaves``).
            factor: the inner loop's extent, a positive int.

        Returns:
            The outer and inner loop names, ``(f"{loop}_o", f"{loop}_i")`` (with a digit
            appended if a name is taken: ``i_o1``).

        Raises:
            ScheduleError: unknown stage or loop; ``factor`` not a positive int; the loop is
                already vectorized, unrolled or parallel, or a stage is computed at it.
        """
        return self._split(self.stage(stage, "split"), loop, factor)

    def _split(self, st: Stage, loop: str, factor: int) -> tuple[str, str]:
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

    @traced
    def fuse(self, stage: str, outer: str, inner: str) -> str:
        """Fuse two adjacent loops of the same kind into one over their product.

            fuse("C", "i", "j"):
                for i in 0..4: for j in 0..8: S(i, j)
                    →    for i_j in 0..32: S(i_j // 8, i_j % 8)

        Args:
            stage: the stage's name (or its Tensor).
            outer: a loop of the stage.
            inner: the loop directly inside ``outer``.

        Returns:
            The fused loop's name, ``f"{outer}_{inner}"``.

        Raises:
            ScheduleError: unknown stage or loop; ``inner`` is not directly inside ``outer``;
                one is spatial and the other a reduction; either is already annotated or has a
                stage computed at it.
        """
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

    @traced
    def reorder(self, stage: str, loops: Sequence[str]) -> None:
        """Put the named loops in the given order, in the positions they occupied together.

            reorder("C", ["k", "j"]):
                for i: for j: for k: S(i, j, k)    →    for i: for k: for j: S(i, j, k)

        Loops not named keep their place. Every loop order computes the same values: a
        reduction's combiner is associative and commutative (float sums may round differently).

        Args:
            stage: the stage's name (or its Tensor).
            loops: names of current loops of the stage, each once, outermost first.

        Raises:
            ScheduleError: unknown stage or loop; a loop named twice; a vectorized loop would
                leave the innermost place; a reduce loop would move across a loop another stage
                is computed at; a stage computed at a loop would no longer have all its readers
                at or inside it.
        """
        st = self.stage(stage, "reorder")
        st.leaves[:] = self._reordered(st, loops)

    def _reordered(self, st: Stage, loops: Sequence[str]) -> list[Loop]:
        """The stage's leaves in the new order, every check passed; the stage is not changed."""
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
        for other in self._attached_at(st):
            at = next(lp for lp in st.leaves if lp.name == other.attach[2])
            if _moved_across_reduce(st.leaves, new, at):
                raise ScheduleError(
                    "reorder",
                    at.name,
                    f"stage '{other.name}' is computed at this loop; moving a reduce loop "
                    "across it would break the dependence (detach it first)",
                )
        self._check_placement("reorder", None, Change(leaves={st.name: new}))
        return new

    @traced
    def tile(self, stage: str, x: str, y: str, x_factor: int, y_factor: int) -> tuple[str, ...]:
        """Split two loops and order the four as outer, outer, inner, inner.

            tile("C", "i", "j", 4, 8):
                for i in 0..16: for j in 0..32: S(i, j)
                    →    for i_o in 0..4: for j_o in 0..4: for i_i in 0..4: for j_i in 0..8:
                             S(i_o*4 + i_i, j_o*8 + j_i)

        Args:
            stage: the stage's name (or its Tensor).
            x, y: two loops of the stage (``x`` becomes the outer of the pair).
            x_factor, y_factor: the inner extents, positive ints.

        Returns:
            ``(x_o, y_o, x_i, y_i)``, the four loop names.

        Raises:
            ScheduleError: as ``split`` and ``reorder`` would, attributed to them; nothing
                changes unless all three steps are accepted.
        """
        st = self.stage(stage, "tile")
        plan = dataclasses.replace(st, leaves=list(st.leaves), relations=list(st.relations))
        xo, xi = self._split(plan, x, x_factor)
        yo, yi = self._split(plan, y, y_factor)
        plan.leaves[:] = self._reordered(plan, [xo, yo, xi, yi])
        st.leaves, st.relations = plan.leaves, plan.relations
        return xo, yo, xi, yi

    def _check_unannotated(self, st: Stage, lp: Loop, primitive: str) -> None:
        """A loop that is about to be replaced carries no annotation and no attached stage."""
        if lp.name in st.annotations:
            raise ScheduleError(
                primitive,
                lp.name,
                f"the loop is already {st.annotations[lp.name]}; transform first",
            )
        for other in self._attached_at(st, lp.name):
            raise ScheduleError(
                primitive, lp.name, f"stage '{other.name}' is computed at this loop"
            )


def _moved_across_reduce(old: list[Loop], new: list[Loop], at: Loop) -> bool:
    """Whether a reduce loop changes side (outside/inside) of the attach loop."""

    def outside(order: list[Loop]) -> set[str]:
        return {lp.name for lp in order[: order.index(at) + 1] if lp.kind == "reduce"}

    return outside(old) != outside(new)
