"""The outcome of measuring one candidate: a time, or why there is none."""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass
from typing import Any, Literal

ErrorKind = Literal["compile", "crash", "timeout", "wrong_result", "runtime"]
ERROR_KINDS: tuple[ErrorKind, ...] = ("compile", "crash", "timeout", "wrong_result", "runtime")


@dataclass(frozen=True)
class MeasureResult:
    """Median seconds per call over the repeats, or an error kind and message.

    Failures are data, not exceptions: the tuner records them (a crashing schedule must
    not be retried) and keeps going. `error_msg` keeps the full compiler/crash output.
    """

    seconds: float | None
    """Median seconds per call; None when the measurement failed."""
    spread: tuple[float, ...] = ()
    error_kind: ErrorKind | None = None
    error_msg: str = ""
    build_seconds: float = 0.0
    run_seconds: float = 0.0
    number: int = 0
    """Calls per timed repeat (0 when nothing was timed)."""
    reference_seconds: float | None = None
    """Median seconds of the reference kernel timed in alternation with this one (paired
    timing), or None when it was timed alone."""
    ratio: float | None = None
    """Median per-round ratio to the reference, and its confidence interval: what ranks."""
    ratio_low: float | None = None
    ratio_high: float | None = None
    disturbed: int = 0
    """Rounds the host disturbed (steal, run-queue wait), thrown away and timed again."""
    filtered: int = 0
    """Disturbed rounds kept with each block's fastest calls (the host stayed busy)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "spread", tuple(float(s) for s in self.spread))
        if self.error_kind is not None and self.error_kind not in ERROR_KINDS:
            raise ValueError(f"unknown error_kind {self.error_kind!r}")
        if (self.seconds is None) == (self.error_kind is None):
            raise ValueError("a MeasureResult has either seconds or an error_kind")

    @property
    def ok(self) -> bool:
        """True when the candidate ran correctly and was timed."""
        return self.error_kind is None

    @classmethod
    def from_spread(cls, spread: list[float], **kwargs: Any) -> MeasureResult:
        """A success whose `seconds` is the median of the repeat times."""
        return cls(seconds=statistics.median(spread), spread=tuple(spread), **kwargs)

    @classmethod
    def failure(cls, kind: ErrorKind, message: str, **kwargs: Any) -> MeasureResult:
        """A failed measurement of the given kind."""
        return cls(seconds=None, error_kind=kind, error_msg=message, **kwargs)

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form, the inverse of `from_dict`."""
        return {**asdict(self), "spread": list(self.spread)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MeasureResult:
        """Rebuild a result saved with `to_dict`."""
        return cls(**data)
