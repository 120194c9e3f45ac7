"""Placement: where a producer stage is computed relative to its consumers (at the top level,
inside a consumer's loop, or substituted into the consumers). Values never change; buffer sizes,
locality and redundant work do.

Each primitive checks the placement it would create (every reader of a stage computed at a loop is
at or inside that loop) before it sets the new attach point.
"""

from __future__ import annotations

from ..errors import ScheduleError
from .base import Change, ScheduleBase, traced
from .stage import INLINE, ROOT, At


class Placement(ScheduleBase):
    """Primitives that choose where a stage is computed: ``compute_at``, ``compute_root``,
    ``compute_inline``."""

    @traced
    def compute_at(self, stage: str, consumer: str, loop: str) -> None:
        """Compute the stage inside ``consumer``'s loop: just the region one iteration reads.

            compute_at("P", "C", "i"):
                for i in 0..M: for k in 0..K: P[i, k] = A[i, k] * 2
                for i in 0..M: for j in 0..N: for k: C[i, j] += P[i, k] * B[k, j]
                    →    for i in 0..M:
                             for k in 0..K: P[k] = A[i, k] * 2          (a row of P)
                             for j in 0..N: for k: C[i, j] += P[k] * B[k, j]

        A stage with several readers works as in Halide: each reader must be ``consumer`` or
        already be computed at that loop or inside it (attach those first); the region covers
        what all of them need and is computed before them.

        Args:
            stage: the producer's name (or its Tensor); not an output.
            consumer: a stage (not inlined) that reads ``stage`` or hosts its readers.
            loop: one of ``consumer``'s current loops, not vectorized or unrolled.

        Raises:
            ScheduleError: unknown stage or loop; ``stage`` is an output; the consumer is
                ``stage`` itself, is computed inside it, or is inlined; the loop is vectorized or
                unrolled; a reader of ``stage`` would not be at or inside the loop.
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
        if cons.attach == INLINE:
            raise ScheduleError("compute_at", loop, f"consumer '{cons.name}' is inlined")
        if cons.annotations.get(loop) in ("vectorized", "unrolled"):
            raise ScheduleError(
                "compute_at", loop, f"the loop is {cons.annotations[loop]}; pick an outer loop"
            )
        attach = At(cons.name, loop)
        self._check_placement("compute_at", loop, Change(attach={st.name: attach}))
        st.attach = attach

    @traced
    def compute_root(self, stage: str) -> None:
        """Compute the stage in its own loop nest at the top level, into a full-size buffer
        (the default; undoes ``compute_at`` or ``compute_inline``).

            compute_root("P"):
                for i: { for k: P[k] = ...;  for j: ... P[k] ... }
                    →    for i: for k: P[i, k] = ...
                         for i: for j: ... P[i, k] ...

        Args:
            stage: the stage's name (or its Tensor).

        Raises:
            ScheduleError: unknown stage; a stage computed at one of its readers' loops would
                then have a reader outside that loop.
        """
        st = self.stage(stage, "compute_root")
        self._check_placement("compute_root", None, Change(attach={st.name: ROOT}))
        st.attach = ROOT

    @traced
    def compute_inline(self, stage: str) -> None:
        """Substitute the stage's expression into its readers; it gets no buffer or loops.

            compute_inline("P"):
                for i, k: P[i, k] = A[i, k] * 2
                for i, j, k: C[i, j] += P[i, k] * B[k, j]
                    →    for i, j, k: C[i, j] += (A[i, k] * 2) * B[k, j]

        Args:
            stage: an elementwise (not reduction) stage that is not an output.

        Raises:
            ScheduleError: unknown stage; an output; a reduction; another stage is computed
                inside it; a stage computed at a loop would then have a reader outside it.
        """
        st = self.stage(stage, "compute_inline")
        if st.is_output:
            raise ScheduleError("compute_inline", None, f"'{st.name}' is an output")
        if st.is_reduction:
            raise ScheduleError(
                "compute_inline",
                None,
                f"'{st.name}' is a reduction; only elementwise stages inline",
            )
        if self._attached_at(st):
            raise ScheduleError(
                "compute_inline", None, f"another stage is computed inside '{st.name}'"
            )
        self._check_placement("compute_inline", None, Change(attach={st.name: INLINE}))
        st.attach = INLINE
