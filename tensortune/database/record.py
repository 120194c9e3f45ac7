"""One measurement of one configuration: the unit the tuning database stores."""

from __future__ import annotations

import dataclasses
import json
import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import DatabaseError
from ..version import __version__

#: Failure kinds a measurement can end with; ``error=None`` means it succeeded.
ERROR_KINDS = ("compile", "crash", "timeout", "wrong_result", "runtime")

#: Fields holding JSON values (and their container type); normalised through a JSON round
#: trip on construction.
JSON_FIELDS: dict[str, type] = {"config": dict, "trace": list, "spread": list, "machine": dict}


def canonical_json(value: Any) -> str:
    """Compact, key-sorted JSON, so equal values always serialise to equal strings."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False)


def _is_duration(value: object) -> bool:
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value >= 0
    )


def current_version() -> str:
    """The running tensortune version (stamped on new records)."""
    return __version__


@dataclass(frozen=True, kw_only=True)
class TuningRecord:
    """A measured (or failed) configuration of a workload on a target.

    JSON-valued fields are normalised on construction (tuples become lists, keys become
    strings, containers are copied), so a record equals itself after any round trip
    through JSON or a database, and later mutation of the caller's dict cannot leak in.
    """

    workload: str
    target: str
    config: dict[str, Any]
    trace: list[Any] = field(default_factory=list)
    seconds: float | None = None
    spread: list[float] = field(default_factory=list)
    error: str | None = None
    error_msg: str | None = None
    strategy: str = ""
    trial: int = 0
    tuning_seconds: float = 0.0
    created_at: float = field(default_factory=time.time)
    run_id: str = ""
    machine: dict[str, Any] = field(default_factory=dict)
    version: str = field(default_factory=current_version)
    reference_seconds: float | None = None
    """Median time of the reference kernel timed in alternation with this one (paired
    timing): how fast the host was when the record was taken."""
    ratio: float | None = None
    """Median per-round time relative to that reference: what ranks configs."""

    def __post_init__(self) -> None:
        if not self.workload or not self.target:
            raise DatabaseError("a tuning record needs a non-empty workload and target")
        for name, kind in JSON_FIELDS.items():
            try:
                value = json.loads(canonical_json(getattr(self, name)))
            except (TypeError, ValueError) as e:
                raise DatabaseError(f"record field '{name}' is not JSON-serialisable: {e}") from e
            if not isinstance(value, kind):
                raise DatabaseError(f"record field '{name}' must be a {kind.__name__}")
            object.__setattr__(self, name, value)
        if not all(_is_duration(s) for s in self.spread):
            raise DatabaseError(f"record spread must hold times >= 0, got {self.spread!r}")
        object.__setattr__(self, "spread", [float(s) for s in self.spread])
        if self.error is None:
            if not _is_duration(self.seconds):
                raise DatabaseError(
                    f"a successful record needs finite seconds >= 0, got {self.seconds!r}"
                )
            object.__setattr__(self, "seconds", float(self.seconds))  # type: ignore[arg-type]
            for name in ("reference_seconds", "ratio"):
                value = getattr(self, name)
                if value is not None and not (_is_duration(value) and value > 0):
                    raise DatabaseError(f"record {name} must be a time > 0, got {value!r}")
        elif self.error not in ERROR_KINDS:
            raise DatabaseError(f"unknown error kind {self.error!r}; expected one of {ERROR_KINDS}")
        elif (self.seconds, self.reference_seconds, self.ratio) != (None, None, None):
            raise DatabaseError(
                f"a failed record ({self.error}) must have seconds, reference_seconds and "
                "ratio None"
            )

    @property
    def ok(self) -> bool:
        """True when the measurement succeeded."""
        return self.error is None

    @property
    def config_key(self) -> str:
        """Canonical JSON of the config: equal configs give equal keys (used for dedupe)."""
        return canonical_json(self.config)

    def to_dict(self) -> dict[str, Any]:
        """Plain field dict (JSON-serialisable)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TuningRecord:
        """Inverse of to_dict; unknown fields are an error rather than silently dropped."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise DatabaseError(f"unknown tuning record field(s): {', '.join(unknown)}")
        try:
            return cls(**data)
        except TypeError as e:  # missing required fields
            raise DatabaseError(f"malformed tuning record: {e}") from e

    def to_json(self) -> str:
        """One line of canonical JSON (the JSONL export format)."""
        return canonical_json(self.to_dict())

    @classmethod
    def from_json(cls, line: str) -> TuningRecord:
        """Parse a line produced by to_json."""
        try:
            data = json.loads(line)
        except ValueError as e:
            raise DatabaseError(f"tuning record is not valid JSON: {e}") from e
        if not isinstance(data, dict):
            raise DatabaseError("tuning record JSON must be an object")
        return cls.from_dict(data)


def rank_score(records: Sequence[Any]) -> Callable[[Any], float]:
    """The one rule for "best": a record's time relative to the paired reference.

    Records timed beside a reference rank by their ratio to it, which the host's drift does
    not move; records timed alone (older versions, or no reference) are put on the same
    scale by the median reference time of the others. Without any ratio, seconds rank.
    """
    references = [r.reference_seconds for r in records if r.ratio is not None]
    if not references:
        return lambda r: r.seconds
    scale = statistics.median(references)
    return lambda r: r.ratio if r.ratio is not None else r.seconds / scale
