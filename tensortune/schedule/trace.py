"""A schedule as data: one frozen record per primitive call, and its JSON form.

A step's JSON form is ``{"primitive": name, "args": {parameter: value, ...}}`` with every
parameter present (defaults filled in), sequences as lists and tensors by name. Tuning databases
store exactly this, so records written by older runs replay unchanged. ``Step.from_json`` checks a
step, which may come from a shared database, against the field types of its record before any
primitive runs: replaying data never calls anything but a schedule primitive with typed values.

    >>> step = SplitStep("C", "i", 8)
    >>> step.to_json()
    {'primitive': 'split', 'args': {'stage': 'C', 'loop': 'i', 'factor': 8}}
    >>> Step.from_json(step.to_json()) == step
    True
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from ..errors import ScheduleError
from ..te.tensor import Tensor

if TYPE_CHECKING:
    from .base import ScheduleBase


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _seq_of(ok: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda v: isinstance(v, (list, tuple)) and all(ok(x) for x in v)


ARG_TYPES: dict[str, Callable[[Any], bool]] = {
    "str": lambda v: isinstance(v, str),
    "int": _is_int,
    "None": lambda v: v is None,
    "Any": lambda v: True,
    "tuple[str, ...]": _seq_of(lambda v: isinstance(v, str)),
    "tuple[int, ...]": _seq_of(_is_int),
}
"""What each field type of a step record accepts from JSON (a sequence may be a list)."""

STEP_TYPES: dict[str, type[Step]] = {}
"""Record class of each primitive, by primitive name: the only names a trace may call."""


def _freeze(v: Any) -> Any:
    """Tensors by name and sequences as tuples, so a record is immutable and compares by value."""
    if isinstance(v, Tensor):
        return v.name
    if isinstance(v, (list, tuple)):
        return tuple(_freeze(x) for x in v)
    return v


def _thaw(v: Any) -> Any:
    return [_thaw(x) for x in v] if isinstance(v, tuple) else v


@dataclass(frozen=True)
class Step:
    """One primitive call with all its arguments: the unit of a schedule's trace."""

    primitive: ClassVar[str] = ""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.primitive:
            STEP_TYPES[cls.primitive] = cls

    @classmethod
    def of(cls, **args: Any) -> Step:
        """The record of a call, arguments normalised (tensors by name, sequences as tuples).

        Values are not checked here: the primitive checks them and refuses with a
        ScheduleError, and only a call it accepted is recorded.
        """
        return cls(**{k: _freeze(v) for k, v in args.items()})

    @property
    def args(self) -> dict[str, Any]:
        """The arguments by parameter name, in the primitive's parameter order."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    def to_json(self) -> dict[str, Any]:
        """The step as stored in a tuning database: plain dicts, lists, strings and numbers."""
        return {"primitive": self.primitive, "args": {k: _thaw(v) for k, v in self.args.items()}}

    @staticmethod
    def from_json(data: Any) -> Step:
        """The record of a JSON step; a ScheduleError for anything that is not a well-typed step.

        Raises:
            ScheduleError: from ``from_trace`` when ``data`` is not a dict naming a primitive or
                its ``args`` is not a dict; from the primitive itself (``bad arguments: ...``)
                when an argument is unknown, missing or of the wrong type.
        """
        name = data.get("primitive") if isinstance(data, dict) else None
        cls = STEP_TYPES.get(name) if isinstance(name, str) else None
        if cls is None:
            raise ScheduleError("from_trace", None, f"unknown primitive in trace step {data!r}")
        args = data.get("args", {})
        if not isinstance(args, dict):
            raise ScheduleError("from_trace", None, f"trace step {data!r} has no args dict")
        fields = {f.name: f for f in dataclasses.fields(cls)}
        for key in args:
            if key not in fields:
                raise ScheduleError(cls.primitive, None, f"bad arguments: unexpected {key!r}")
        for key, f in fields.items():
            if key not in args and f.default is dataclasses.MISSING:
                raise ScheduleError(
                    cls.primitive, None, f"bad arguments: missing a required argument: {key!r}"
                )
            if key in args and not any(ARG_TYPES[t](args[key]) for t in _types(f)):
                raise ScheduleError(
                    cls.primitive,
                    None,
                    f"bad arguments: {key} must be {f.type}, got {args[key]!r}",
                )
        return cls.of(**args)

    def apply(self, sch: ScheduleBase) -> Any:
        """Call the primitive on ``sch`` with the JSON arguments (as a replay from a database
        would); returns what the primitive returns and appends an equal step to its trace."""
        return getattr(sch, self.primitive)(**self.to_json()["args"])


def _types(f: dataclasses.Field) -> list[str]:
    return [t.strip() for t in str(f.type).split("|")]


@dataclass(frozen=True)
class _StageStep(Step):
    """A primitive of one stage, named by its first argument."""

    stage: str


@dataclass(frozen=True)
class _LoopStep(_StageStep):
    """A primitive of one loop of a stage, named by its first two arguments."""

    loop: str


# -- loop rewrites -------------------------------------------------------------------------------
@dataclass(frozen=True)
class SplitStep(_LoopStep):
    primitive: ClassVar[str] = "split"
    factor: int


@dataclass(frozen=True)
class FuseStep(_StageStep):
    primitive: ClassVar[str] = "fuse"
    outer: str
    inner: str


@dataclass(frozen=True)
class ReorderStep(_StageStep):
    primitive: ClassVar[str] = "reorder"
    loops: tuple[str, ...]


@dataclass(frozen=True)
class TileStep(_StageStep):
    primitive: ClassVar[str] = "tile"
    x: str
    y: str
    x_factor: int
    y_factor: int


# -- annotations ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class VectorizeStep(_LoopStep):
    primitive: ClassVar[str] = "vectorize"


@dataclass(frozen=True)
class UnrollStep(_LoopStep):
    primitive: ClassVar[str] = "unroll"


@dataclass(frozen=True)
class ParallelStep(_LoopStep):
    primitive: ClassVar[str] = "parallel"


@dataclass(frozen=True)
class AnnotateStep(Step):
    primitive: ClassVar[str] = "annotate"
    key: str
    value: Any


# -- placement -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class ComputeAtStep(_StageStep):
    primitive: ClassVar[str] = "compute_at"
    consumer: str
    loop: str


@dataclass(frozen=True)
class ComputeRootStep(_StageStep):
    primitive: ClassVar[str] = "compute_root"


@dataclass(frozen=True)
class ComputeInlineStep(_StageStep):
    primitive: ClassVar[str] = "compute_inline"


# -- new stages ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class CacheWriteStep(_StageStep):
    primitive: ClassVar[str] = "cache_write"
    scope: str = "local"


@dataclass(frozen=True)
class RFactorStep(_StageStep):
    primitive: ClassVar[str] = "rfactor"
    axis: str
    factor: int
    scope: str = "local"


@dataclass(frozen=True)
class PackStep(Step):
    primitive: ClassVar[str] = "pack"
    tensor: str
    consumer: str
    axis: int | None = None
    factor: int = 1
    order: tuple[int, ...] | None = None


_unchecked = {t for c in STEP_TYPES.values() for f in dataclasses.fields(c) for t in _types(f)}
if _unchecked - ARG_TYPES.keys():  # a field type without a JSON check fails here, at import
    raise TypeError(f"no JSON check for step field types {_unchecked - ARG_TYPES.keys()}")

__all__ = [
    "ARG_TYPES",
    "STEP_TYPES",
    "AnnotateStep",
    "CacheWriteStep",
    "ComputeAtStep",
    "ComputeInlineStep",
    "ComputeRootStep",
    "FuseStep",
    "PackStep",
    "ParallelStep",
    "RFactorStep",
    "ReorderStep",
    "SplitStep",
    "Step",
    "TileStep",
    "UnrollStep",
    "VectorizeStep",
]
