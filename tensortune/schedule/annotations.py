"""Annotations: how a loop is run (vector lanes, unrolled, across threads) and how the kernel is
compiled (flags). They change neither the loop nest nor the values computed."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import ScheduleError
from .base import ScheduleBase, traced
from .stage import Loop, Stage

MAX_VECTOR_LANES = 64
MAX_UNROLL = 256
TARGET_FLAGS = ("opt_level", "unroll_pragma", "extra_cflags", "fast_math")
OPT_LEVELS = ("O1", "O2", "O3", "Ofast")
ALLOWED_CFLAGS = ("-fvariable-expansion-in-unroller", "-fno-unroll-loops")
"""The only flags ``extra_cflags`` may hold. Flags reach the compiler's command line and a trace
may come from a shared database, so they are a closed set: free text such as ``-wrapper`` or
``-fplugin=`` would run whatever it names."""


class Annotations(ScheduleBase):
    """Primitives that mark loops (``vectorize``, ``unroll``, ``parallel``) or set code-generation
    flags (``annotate``)."""

    @traced
    def vectorize(self, stage: str, loop: str) -> None:
        """Run the innermost loop as SIMD operations, one lane per iteration.

            vectorize("C", "j_i"):
                for j_i in 0..8: C[i, j_o*8 + j_i] = A[i, j_o*8 + j_i] + 1
                    →    C[i, j_o*8 : +8] = A[i, j_o*8 : +8] + 1      (one 8-lane vector op)

        Args:
            stage: the stage's name (or its Tensor).
            loop: the stage's innermost loop; its extent a power of two in 2..64 (for a stage
                computed at another's loop, an axis whose extent that region fixes is checked
                when lowering).

        Raises:
            ScheduleError: unknown stage or loop; the loop is not innermost; its extent is not a
                power of two in 2..64; the stage is boolean; a stage is computed at the loop;
                the loop already carries another annotation.
        """
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
        for other in self._attached_at(st, loop):
            raise ScheduleError(
                "vectorize",
                loop,
                f"stage '{other.name}' is computed at this loop; a vector loop body can "
                "only hold stores",
            )
        self._annotate(st, lp, "vectorized", "vectorize")

    @traced
    def unroll(self, stage: str, loop: str) -> None:
        """Replicate the loop body once per iteration; the loop index becomes a constant.

            unroll("C", "j_i"):
                for j_i in 0..3: S(j_i)    →    S(0); S(1); S(2)

        Args:
            stage: the stage's name (or its Tensor).
            loop: a loop of the stage of extent at most 256 (for a stage computed at another's
                loop the extent is fixed by the region it must produce, so the limit is checked
                when lowering).

        Raises:
            ScheduleError: unknown stage or loop; extent over 256; the loop already carries
                another annotation.
        """
        st = self.stage(stage, "unroll")
        lp = self._loop(st, loop, "unroll")
        ext = st.extents()[loop]
        if ext > MAX_UNROLL and st.attach[0] != "at":
            raise ScheduleError(
                "unroll", loop, f"extent {ext} exceeds {MAX_UNROLL}; split it first"
            )
        self._annotate(st, lp, "unrolled", "unroll")

    @traced
    def parallel(self, stage: str, loop: str) -> None:
        """Distribute the loop's iterations over threads (an OpenMP parallel for).

            parallel("C", "i_o"):
                for i_o in 0..8: S(i_o)    →    #pragma omp parallel for
                                                 for i_o in 0..8: S(i_o)

        Args:
            stage: the stage's name (or its Tensor).
            loop: a spatial loop of the stage.

        Raises:
            ScheduleError: unknown stage or loop; a reduction loop (threads would race on the
                same outputs); the stage already has a parallel loop; the loop already carries
                another annotation.
        """
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

    @traced
    def annotate(self, key: str, value: Any) -> None:
        """Set a code-generation flag of the whole kernel; the loop nest is unchanged.

            annotate("opt_level", "O2"):
                gcc -O3 kernel.c    →    gcc -O2 kernel.c

        Args:
            key: ``opt_level`` (one of ``OPT_LEVELS``), ``unroll_pragma`` (a positive int: how
                far the C compiler may unroll the loops left rolled), ``extra_cflags`` (a list
                drawn from ``ALLOWED_CFLAGS``) or ``fast_math`` (bool).
            value: the flag's value; a later ``annotate`` of the same key replaces it.

        Raises:
            ScheduleError: an unknown key or a value outside the key's closed set.
        """
        check_flag(key, value)
        self.flags[key] = value


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


def fast_math(flags: Mapping[str, Any]) -> bool:
    """Whether a kernel's flags let it reassociate sums and multiply by reciprocals
    (``fast_math``, or ``opt_level="Ofast"``, which implies it)."""
    return bool(flags.get("fast_math")) or flags.get("opt_level") == "Ofast"
