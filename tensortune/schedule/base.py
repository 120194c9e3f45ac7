"""The state of a schedule, how a primitive call is recorded, and the dependence queries every
primitive shares.

Each primitive checks its whole request first and only then changes the schedule, so a refused
request (a ``ScheduleError``) leaves the schedule exactly as it was. A check that needs the state
*after* the change (``reorder``, the placements) is asked about a ``Change``: the pending new
attach points and loop orders, seen through on top of the current stages.
"""

from __future__ import annotations

import functools
import inspect
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, TypeVar

from ..errors import ScheduleError
from ..te.expr import tensors_read
from ..te.graph import topological_order
from ..te.tensor import Tensor
from .stage import INLINE, Attach, Loop, Stage
from .trace import STEP_TYPES, Step

F = TypeVar("F", bound=Callable[..., Any])
S = TypeVar("S", bound="ScheduleBase")


def traced(fn: F) -> F:
    """Make ``fn`` a primitive: a call it accepts is appended to the trace as its step record.

    The primitive's parameters are its record's fields (names and defaults), checked here at
    import, so the method and the data a database stores cannot drift apart.
    """
    record = STEP_TYPES[fn.__name__]
    sig = inspect.signature(fn)
    params = list(sig.parameters.values())[1:]
    want = [(f.name, f.default) for f in fields(record)]
    got = [(p.name, MISSING if p.default is p.empty else p.default) for p in params]
    if want != got:
        raise TypeError(f"{fn.__name__}{sig} does not match its record {record.__name__}")

    @functools.wraps(fn)
    def wrapper(self: ScheduleBase, *args: Any, **kwargs: Any) -> Any:
        try:
            bound = sig.bind(self, *args, **kwargs)
        except TypeError as exc:
            raise ScheduleError(fn.__name__, None, f"bad arguments: {exc}") from None
        bound.apply_defaults()
        step = record.of(**{k: v for k, v in bound.arguments.items() if k != "self"})
        result = fn(self, *args, **kwargs)  # checks everything, then changes the schedule
        self._steps.append(step)
        return result

    return wrapper  # type: ignore[return-value]


@dataclass(frozen=True)
class Change:
    """A primitive's pending effect on placement: new attach points and loop orders by stage
    name, read on top of the current stages so a check sees the schedule as it would be."""

    attach: Mapping[str, Attach] = field(default_factory=dict)
    leaves: Mapping[str, Sequence[Loop]] = field(default_factory=dict)

    def attach_of(self, st: Stage) -> Attach:
        return self.attach.get(st.name, st.attach)

    def leaves_of(self, st: Stage) -> Sequence[Loop]:
        return self.leaves.get(st.name, st.leaves)


NO_CHANGE = Change()


class ScheduleBase:
    """A program's stages, producers before consumers, and the trace of steps that shaped them."""

    def __init__(self, outputs: Tensor | Sequence[Tensor]):
        outputs = (outputs,) if isinstance(outputs, Tensor) else tuple(outputs)
        self.outputs = outputs
        tensors = topological_order(outputs)
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
        self.flags: dict[str, Any] = {}
        self._steps: list[Step] = []

    # -- the trace ----------------------------------------------------------------------------
    @property
    def steps(self) -> tuple[Step, ...]:
        """The accepted primitive calls in order, as frozen records."""
        return tuple(self._steps)

    @property
    def trace(self) -> list[dict[str, Any]]:
        """The steps in their JSON form (a fresh list): what a tuning database stores."""
        return [s.to_json() for s in self._steps]

    def trace_json(self) -> str:
        """``trace`` as a JSON string."""
        return json.dumps(self.trace)

    @classmethod
    def from_trace(cls: type[S], outputs: Tensor | Sequence[Tensor], trace: Sequence[Any]) -> S:
        """Replay a trace onto a fresh schedule of ``outputs``.

        Args:
            outputs: the output tensor(s) the trace was recorded on (same names and shapes).
            trace: steps as JSON dicts (``Schedule.trace``, a database record's trace) or as
                ``Step`` records (``Schedule.steps``).

        Returns:
            The schedule; the same trace on the same compute gives the same program and an
            equal trace.

        Raises:
            ScheduleError: a step that is not a known primitive with well-typed arguments
                (primitive ``from_trace`` or the step's own), or that its primitive refuses.
        """
        sch = cls(outputs)
        for item in trace:
            (item if isinstance(item, Step) else Step.from_json(item)).apply(sch)
        return sch

    # -- lookup -------------------------------------------------------------------------------
    def __getitem__(self, name: str | Tensor) -> Stage:
        return self.stage(name, "schedule")

    def stage(self, name: str | Tensor, primitive: str) -> Stage:
        """The stage called ``name``, else a ScheduleError of ``primitive`` listing the stages."""
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

    def _check_new_name(self, name: str, primitive: str) -> None:
        if any(s.name == name for s in self.stages) or any(t.name == name for t in self.inputs):
            raise ScheduleError(primitive, None, f"a stage called '{name}' already exists")

    # -- dependences --------------------------------------------------------------------------
    def consumers(self, st: Stage) -> list[Stage]:
        """The stages whose body reads ``st``'s tensor."""
        return [c for c in self.stages if any(t is st.tensor for t in tensors_read(c.body))]

    def readers(self, st: Stage, change: Change = NO_CHANGE) -> list[Stage]:
        """The stages whose loops read ``st``: its consumers, looking through inlined ones."""
        out: list[Stage] = []
        for c in self.consumers(st):
            inline = change.attach_of(c) == INLINE
            for r in self.readers(c, change) if inline else [c]:
                if r not in out:
                    out.append(r)
        return out

    def is_inside(self, st: Stage, cons: Stage, loop: str, change: Change = NO_CHANGE) -> bool:
        """Whether ``st`` is computed at ``cons.loop`` or a loop inside it, directly or inside
        a stage that is."""
        attach = change.attach_of(st)
        if attach[0] != "at":
            return False
        _, at_stage, at_loop = attach
        if at_stage == cons.name:
            names = [lp.name for lp in change.leaves_of(cons)]
            return at_loop in names and loop in names and names.index(at_loop) >= names.index(loop)
        return self.is_inside(self.stage(at_stage, "compute_at"), cons, loop, change)

    def _check_placement(
        self, primitive: str, loop: str | None, change: Change = NO_CHANGE
    ) -> None:
        """Every stage computed at a consumer's loop must have all its readers there or inside:
        the buffer exists only in that loop's body, and is filled before the first of them."""
        for st in self.stages:
            attach = change.attach_of(st)
            if attach[0] != "at":
                continue
            cons, at = self.stage(attach[1], primitive), attach[2]
            outside = [
                r.name
                for r in self.readers(st, change)
                if r is not cons and not self.is_inside(r, cons, at, change)
            ]
            if outside:
                raise ScheduleError(
                    primitive,
                    loop,
                    f"'{st.name}' is computed at {cons.name}.{at} but read by {outside}, which "
                    f"are not computed inside that loop (compute them at or inside it first)",
                )

    def _attached_at(self, st: Stage, loop: str | None = None) -> list[Stage]:
        """The stages computed at a loop of ``st`` (at ``loop``, if given)."""
        return [
            o
            for o in self.stages
            if o.attach[:2] == ("at", st.name) and (loop is None or o.attach[2] == loop)
        ]
