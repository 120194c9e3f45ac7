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
from ..measure.paired import STALL_FACTOR
from ..measure.result import ERROR_KINDS
from ..version import __version__

#: Fields holding JSON values (and their container type); normalised through a JSON round
#: trip on construction.
JSON_FIELDS: dict[str, type] = {"config": dict, "trace": list, "spread": list, "machine": dict}


#: Limits a record must respect, so a hostile or corrupt one (a shared database, an imported
#: file) cannot exhaust recursion or memory, or garble a terminal: names are short printable
#: strings and JSON values nest shallowly (a real trace nests 4 deep).
MAX_NAME_CHARS = 1_000
MAX_JSON_CHARS = 1_000_000
MAX_RECORD_CHARS = 5_000_000  # one whole record as a JSON line
MAX_JSON_DEPTH = 32
MAX_ERROR_MSG_CHARS = 100_000
MAX_TRIAL = 2**53  # exact in JSON and in every SQL integer column

#: Name-like fields: printable strings of at most MAX_NAME_CHARS (the first two non-empty).
NAME_FIELDS = ("workload", "target", "strategy", "run_id", "version", "space")

#: Fields left out of ``to_dict`` while they hold their default: records that predate them
#: serialise (and hash, see the database's import dedupe) exactly as they always did.
OPTIONAL_FIELDS = {"space": ""}

_TRUNCATED = "\n... (truncated)"


def canonical_json(value: Any) -> str:
    """Compact, key-sorted JSON, so equal values always serialise to equal strings."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False)


def load_json(text: object, what: str) -> Any:
    """Parse stored JSON text, refusing oversized or deeply nested input with a DatabaseError."""
    if not isinstance(text, str):
        raise DatabaseError(f"{what} must be JSON text, got {type(text).__name__}")
    if len(text) > MAX_RECORD_CHARS:
        raise DatabaseError(f"{what} is longer than {MAX_RECORD_CHARS} characters")
    try:
        return json.loads(text)
    except RecursionError:
        raise DatabaseError(f"{what} nests too deeply") from None
    except ValueError as e:
        raise DatabaseError(f"{what} is not valid JSON: {e}") from e


def _check_tree(name: str, value: Any, printable: bool) -> None:
    """Refuse JSON nested deeper than MAX_JSON_DEPTH (iteratively: no recursion to exhaust,
    and a self-referencing container ends at the limit); optionally require printable strings.
    """
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children = [*item.keys(), *item.values()]
        elif isinstance(item, (list, tuple)):
            children = list(item)
        else:
            if printable and isinstance(item, str) and not item.isprintable():
                raise DatabaseError(f"record field '{name}' holds a non-printable string")
            continue
        if depth > MAX_JSON_DEPTH:
            raise DatabaseError(f"record field '{name}' nests deeper than {MAX_JSON_DEPTH} levels")
        stack.extend((child, depth + 1) for child in children)


def _check_name(name: str, value: object, required: bool) -> None:
    if not isinstance(value, str):
        raise DatabaseError(f"record field '{name}' must be a string, got {type(value).__name__}")
    if required and not value:
        raise DatabaseError(f"record field '{name}' must not be empty")
    if len(value) > MAX_NAME_CHARS or not value.isprintable():
        raise DatabaseError(
            f"record field '{name}' must be printable and at most {MAX_NAME_CHARS} characters"
        )


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
    space: str = ""
    """The design space the config is a point of, by its registered name ("" for the built-in
    template of the workload's op): a name only, the space's code never comes from a record."""

    def __post_init__(self) -> None:
        for name in NAME_FIELDS:
            _check_name(name, getattr(self, name), required=name in ("workload", "target"))
        for name, kind in JSON_FIELDS.items():
            _check_tree(name, getattr(self, name), printable=name == "config")
            try:
                text = canonical_json(getattr(self, name))
            except (TypeError, ValueError) as e:
                raise DatabaseError(f"record field '{name}' is not JSON-serialisable: {e}") from e
            if len(text) > MAX_JSON_CHARS:
                raise DatabaseError(f"record field '{name}' exceeds {MAX_JSON_CHARS} characters")
            value = json.loads(text)
            if not isinstance(value, kind):
                raise DatabaseError(f"record field '{name}' must be a {kind.__name__}")
            object.__setattr__(self, name, value)
        if not all(_is_duration(s) for s in self.spread):
            raise DatabaseError(f"record spread must hold times >= 0, got {self.spread!r:.200}")
        object.__setattr__(self, "spread", [float(s) for s in self.spread])
        if self.error is None:
            if not _is_duration(self.seconds):
                raise DatabaseError(
                    f"a successful record needs finite seconds >= 0, got {self.seconds!r:.100}"
                )
            object.__setattr__(self, "seconds", float(self.seconds))  # type: ignore[arg-type]
            for name in ("reference_seconds", "ratio"):
                value = getattr(self, name)
                if value is not None and not (_is_duration(value) and value > 0):
                    raise DatabaseError(f"record {name} must be a time > 0, got {value!r}")
        elif self.error not in ERROR_KINDS:
            raise DatabaseError(
                f"unknown error kind {self.error!r:.100}; expected one of {ERROR_KINDS}"
            )
        elif (self.seconds, self.reference_seconds, self.ratio) != (None, None, None):
            raise DatabaseError(
                f"a failed record ({self.error}) must have seconds, reference_seconds and "
                "ratio None"
            )
        if self.error_msg is not None:  # free text: normalised rather than refused
            if not isinstance(self.error_msg, str):
                raise DatabaseError("record field 'error_msg' must be a string or null")
            # lone surrogates (from a JSON escape or an undecodable path) cannot be stored
            text = self.error_msg.encode("utf-8", "replace").decode("utf-8")
            if len(text) > MAX_ERROR_MSG_CHARS:  # a compiler's log can be huge
                text = text[: MAX_ERROR_MSG_CHARS - len(_TRUNCATED)] + _TRUNCATED
            object.__setattr__(self, "error_msg", text)
        trial = self.trial
        if isinstance(trial, bool) or not isinstance(trial, int) or not 0 <= trial <= MAX_TRIAL:
            raise DatabaseError(
                f"record field 'trial' must be an integer in [0, 2**53], got {trial!r:.100}"
            )
        for name in ("tuning_seconds", "created_at"):
            value = getattr(self, name)
            if not _is_duration(value):
                raise DatabaseError(
                    f"record field '{name}' must be a finite number >= 0, got {value!r:.100}"
                )
            object.__setattr__(self, name, float(value))

    @property
    def ok(self) -> bool:
        """True when the measurement succeeded."""
        return self.error is None

    @property
    def config_key(self) -> str:
        """Canonical JSON of the config: equal configs give equal keys (used for dedupe)."""
        return canonical_json(self.config)

    def to_dict(self) -> dict[str, Any]:
        """Plain field dict (JSON-serialisable); optional fields only when they are set."""
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        for name, default in OPTIONAL_FIELDS.items():
            if data[name] == default:
                del data[name]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TuningRecord:
        """Inverse of to_dict; unknown fields are an error rather than silently dropped."""
        if not isinstance(data, dict):
            raise DatabaseError("a tuning record must be a JSON object")
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(str(key) for key in data if key not in names)
        if unknown:
            shown = ", ".join(repr(name)[:40] for name in unknown[:5])
            raise DatabaseError(f"unknown tuning record field(s): {shown}")
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
        return cls.from_dict(load_json(line, "tuning record"))


def rank_score(records: Sequence[Any]) -> Callable[[Any], float]:
    """The one rule for "best": a record's time relative to the paired reference.

    Records timed beside a reference rank by their ratio to it, which the host's drift does
    not move; records timed alone (older versions, or no reference) are put on the same
    scale by the median reference time of the others. Without any ratio, seconds rank.
    """
    scale = reference_scale(records)
    if scale is None:
        return lambda r: r.seconds

    def score(r: Any) -> float:
        if _paired(r) and not timed_in_stall(r, scale):
            return float(r.ratio)
        return float(r.seconds) / scale

    return score


def reference_scale(records: Sequence[Any]) -> float | None:
    """The median time of the references paired with ``records`` (None: none was paired)."""
    references = [r.reference_seconds for r in records if _paired(r)]
    return statistics.median(references) if references else None


def timed_in_stall(record: Any, scale: float) -> bool:
    """Whether ``record``'s paired reference ran ``STALL_FACTOR`` times its usual time
    (``scale``, see ``reference_scale``): both blocks then waited out the host's stall, and
    their ratio says nothing about the config."""
    return _paired(record) and record.reference_seconds > STALL_FACTOR * scale


def _paired(record: Any) -> bool:
    """Timed beside a reference: both its ratio and the reference's time are known (a record
    from another database may carry one without the other)."""
    return record.ratio is not None and record.reference_seconds is not None


def rank_configs(records: Sequence[Any], order: Callable[[Any], Any]) -> list[tuple[Any, Any]]:
    """Successful measurements grouped by config, best config first: each as (its median
    measurement under `rank_score`, its first by `order`: who found it, and when)."""
    score = rank_score(records)
    by_config: dict[str, list[Any]] = {}
    for rec in records:
        by_config.setdefault(rec.config_key, []).append(rec)
    ranked = []
    for group in by_config.values():
        group.sort(key=lambda rec: (score(rec), order(rec)))
        ranked.append((group[(len(group) - 1) // 2], min(group, key=order)))
    ranked.sort(key=lambda pair: (score(pair[0]), pair[0].config_key))
    return ranked
