"""``Schedule``: the primitives of every concept module on one object.

The primitives live by concept: loop rewrites in ``loops``, placement in ``placement``, new stages
in ``new_stages``, annotations in ``annotations``; state, recording and replay in ``base``; the
step records in ``trace``. This module assembles them and re-exports the names older code imports
from here.
"""

from __future__ import annotations

from .annotations import (
    ALLOWED_CFLAGS,
    MAX_UNROLL,
    MAX_VECTOR_LANES,
    OPT_LEVELS,
    TARGET_FLAGS,
    Annotations,
    check_flag,
)
from .base import ScheduleBase
from .loops import LoopRewrites
from .new_stages import NewStages
from .placement import Placement
from .trace import ARG_TYPES

SCOPES = ("global", "local", "register")


class Schedule(LoopRewrites, Placement, NewStages, Annotations, ScheduleBase):
    """How to compute a program: loop structure, placement, layouts and flags of its stages,
    built by primitives and recorded as a replayable trace.

        s = tt.Schedule(D)                # one stage per compute, producers first, all at root
        io, ii = s.split("D", "i", 8)     # for i  →  for i_o: for i_i in 0..8
        s.compute_at("C", "D", io)        # compute the rows of C each i_o needs, inside it
        s.vectorize("D", "j")             # the innermost loop as SIMD lanes
        s.trace                           # [{"primitive": "split", "args": {...}}, ...]
        tt.Schedule.from_trace(D, s.trace)  # the same program again

    Args:
        outputs: the output Tensor, or a sequence of them; every tensor they depend on must
            have a distinct name.

    Attributes:
        stages: the compute stages, producers before consumers (``sch["C"]`` looks one up).
        inputs: the placeholders the outputs read.
        flags: code-generation flags set by ``annotate``.
        steps: the accepted primitive calls as frozen records (``tensortune.schedule.trace``).
        trace: the same steps as JSON (what a tuning database stores).

    Every primitive names its stage and loops by string, checks the whole request first and
    raises ``ScheduleError`` (naming the primitive, the loop and the reason) without changing
    anything if it is illegal; an accepted call appends one step to the trace.

    Primitives: ``split``, ``fuse``, ``reorder``, ``tile`` (loop rewrites); ``compute_at``,
    ``compute_root``, ``compute_inline`` (placement); ``cache_write``, ``rfactor``, ``pack``,
    ``cache_read`` (new stages); ``vectorize``, ``unroll``, ``parallel``, ``annotate``
    (annotations). Each one's docstring shows its rewrite as a before → after loop nest.

    Raises:
        ScheduleError: two tensors of the program share a name.
    """


__all__ = [
    "ALLOWED_CFLAGS",
    "ARG_TYPES",
    "MAX_UNROLL",
    "MAX_VECTOR_LANES",
    "OPT_LEVELS",
    "SCOPES",
    "TARGET_FLAGS",
    "Schedule",
    "check_flag",
]
