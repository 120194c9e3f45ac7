"""What every command shares: where the database is, opening it, the target, FLOP counts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..errors import TensorTuneError

EXIT_OK, EXIT_NOT_FOUND, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


class CLIError(TensorTuneError):
    """Bad command-line input found by the CLI itself (reported like any TensorTuneError)."""


def db_location(db: str | None) -> str:
    """What --db resolves to, as the user should see it."""
    from ..database import default_db_path

    return str(default_db_path() if db is None else db)


def shown(location: str) -> str:
    """The location as printed: a server URL's password is masked."""
    from ..database import printable_location

    return printable_location(location)


def is_path(location: str) -> bool:
    """Whether a database location is a file path (not a SQLAlchemy URL)."""
    return "://" not in location


def open_existing(db: str | None) -> Any:
    """Open a database that must already exist, read-only: querying never creates or locks
    anything, so it works on read-only media and while a tuner writes."""
    from ..database import open_database

    location = db_location(db)
    if is_path(location) and not Path(location).expanduser().exists():
        hint = "run 'tensortune tune' first" if db is None else "check the path"
        raise CLIError(f"no tuning database at '{location}' ({hint})")
    return open_database(location, readonly=True)


def detect_target(threads: int | None) -> Any:
    """This machine's Target with ``threads`` threads (all usable CPUs when None)."""
    from ..target import Target

    return Target.detect(num_threads=threads)


def flops_of(name: str, cache: dict[str, float | None]) -> float | None:
    """FLOPs of a canonical workload name (None if this version cannot parse it)."""
    if name not in cache:
        from ..workload import workload

        try:
            cache[name] = workload(name).flops
        except (TensorTuneError, ValueError):
            cache[name] = None
    return cache[name]


def print_json(obj: Any) -> None:
    """One JSON value on one line of stdout (NaN is refused: it is not JSON)."""
    print(json.dumps(obj, allow_nan=False))


DEFAULT_FINDER = "template default"
"""What found a config no strategy proposed: the default, a finalist of every run."""


def found_by(records: list[Any], config_key: str) -> str:
    """The strategy whose measurement first found the config ``config_key``: the earliest
    record that is not a re-measurement of the finalists (strategy ``confirm``)."""
    from ..tuning.loop import CONFIRM

    mine = sorted(
        (r for r in records if r.config_key == config_key), key=lambda r: (r.created_at, r.trial)
    )
    first = next((r for r in mine if r.strategy != CONFIRM), None)
    if first is not None:
        return first.strategy or "unknown"
    return DEFAULT_FINDER if mine else "unknown"


def found_by_phrase(finder: str) -> str:
    """``found_by``'s answer as the end of "found by ...": a strategy's search, or the default."""
    if finder == DEFAULT_FINDER:
        return "the template default (a finalist of every run)"
    return f"{finder} search"
