"""Compile a workload with the best schedule the database holds for it on this target.

A database is shared data (an imported JSON Lines file, a team's server, a copied file), so no
record is trusted: only records of this tensortune version and of the design space the workload
has now (``space.design_space``; a record names its space, it never carries code) are
considered, a record's config must be a point of that space, and its stored trace (if any) must
be the one that config builds. The compiled schedule is always rebuilt from the config, never
replayed from the record. A record that fails is skipped with a warning naming it; the next
best is tried, then the design space's default.
"""

from __future__ import annotations

import json
import os
import sys
import warnings
from collections.abc import Iterable, Iterator
from pathlib import Path

from ..build.kernel import Kernel
from ..database import Database, default_db_path, open_database
from ..database.record import TuningRecord
from ..errors import ConfigError, RecordWarning, TensorTuneError
from ..pipeline import compile as compile_with
from ..schedule import Schedule
from ..space.registry import design_space
from ..space.template import DesignSpace
from ..target import Target
from ..version import __version__
from ..workload import Workload
from ..workload import workload as parse_workload

SHOWN_KEY_CHARS = 120


def compile_tuned(
    program: str | Workload,
    db: str | os.PathLike[str] | Database | None = None,
    target: Target | None = None,
) -> Kernel:
    """Best valid record's schedule, or the design space's default when there is none."""
    wl = program if isinstance(program, Workload) else parse_workload(program)
    target = target or Target.detect()
    return compile_with(wl, tuned_schedule(wl, db, target)[1], target)


def tuned_schedule(
    wl: Workload, db: str | os.PathLike[str] | Database | None, target: Target
) -> tuple[TuningRecord | None, Schedule]:
    """The best valid record and the schedule its config builds, or (None, the design space's
    default): what ``compile`` uses, so a caller reporting it names the record really used."""
    ds = design_space(wl, target)
    database = _open_for_reading(db)
    if database is None:
        return None, ds.schedule(ds.default)
    try:
        ranked = ranked_records(database, wl.name, str(target), ds.name)
        found = next(valid_records(ds, ranked), None)
    finally:
        if database is not db:  # a Database the caller passed in stays open for the caller
            database.close()
    return found or (None, ds.schedule(ds.default))


def _open_for_reading(db: str | os.PathLike[str] | Database | None) -> Database | None:
    """The database opened read-only (compiling never writes or waits for a tuner's lock), or
    None when a path names no file yet: nothing was tuned there."""
    if isinstance(db, Database):
        return db
    location = default_db_path() if db is None else db
    if "://" not in str(location) and not Path(location).expanduser().exists():
        return None
    return open_database(location, readonly=True)


def ranked_records(
    database: Database, workload: str, target: str, space: str = ""
) -> list[TuningRecord]:
    """Every successful config of this tensortune version in the design space named ``space``
    ("" for the built-in templates), fastest first (see ``top_k``)."""
    return database.top_k(workload, target, sys.maxsize, version=__version__, space=space)


def valid_records(
    ds: DesignSpace, ranked: Iterable[TuningRecord]
) -> Iterator[tuple[TuningRecord, Schedule]]:
    """Each record that validates, with the schedule its config builds; each record skipped on
    the way gets one ``RecordWarning`` naming it and saying why."""
    for rec in ranked:
        try:
            sch = record_schedule(ds, rec)
        except TensorTuneError as exc:
            warnings.warn(f"skipped tuning record {describe(rec)}: {exc}", RecordWarning, 2)
            continue
        yield rec, sch


def record_schedule(ds: DesignSpace, rec: TuningRecord) -> Schedule:
    """The schedule ``rec``'s config builds; ConfigError when the config is not a point of the
    space or the record's stored trace is some other program (stale or edited)."""
    sch = ds.schedule(rec.config)
    if rec.trace and rec.trace != json.loads(json.dumps(sch.trace)):
        raise ConfigError("its stored trace is not the schedule its config builds")
    return sch


def describe(rec: TuningRecord) -> str:
    """A record named for a warning: its config (canonical JSON, so control characters are
    escaped), shortened, and the run that measured it."""
    key = rec.config_key
    if len(key) > SHOWN_KEY_CHARS:
        key = key[: SHOWN_KEY_CHARS - 3] + "..."
    return f"{key} (run {rec.run_id!r}, version {rec.version!r})"
