"""Compile a workload with the best schedule the database holds for it on this target.

A database is shared data (an imported JSON Lines file, a team's server, a copied file), so no
record is trusted: only records of this tensortune version and of the design space the workload
has now (``space.design_space``; a record names its space, it never carries code) are
considered, a record's config must be a point of that space, and its stored trace (if any) must
be the one that config builds. The compiled schedule is always rebuilt from the config, never
replayed from the record. A record that fails is skipped with a warning naming it; the next
best is tried.

A workload with no valid record gets a zero-shot config (``zero_shot``): the one the pretrained
cost model ranks first, chosen without measuring. It is recorded as a ``Prediction`` (never as a
record: it has no time) in a database that exists, so the next compile reuses it; the database
is not created for it, and a database that cannot be written (read-only, or a tuner holding the
lock: compiling never waits) only costs that reuse, with a warning. Without a pretrained model
the design space's default is used.
"""

from __future__ import annotations

import json
import os
import sys
import warnings
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from ..build.kernel import Kernel
from ..database import Database, Prediction, default_db_path, open_database
from ..database.record import TuningRecord
from ..errors import ConfigError, DatabaseError, RecordWarning, TensorTuneError
from ..pipeline import compile as compile_with
from ..schedule import Schedule
from ..space.registry import design_space
from ..space.template import DesignSpace
from ..target import Target
from ..version import __version__
from ..workload import Workload
from ..workload import workload as parse_workload
from . import zero_shot

SHOWN_KEY_CHARS = 120


@dataclass(frozen=True)
class Chosen:
    """The schedule ``compile`` uses and what its config is: a measured ``record``, a
    zero-shot ``prediction`` (not measured), or neither (the design space's default)."""

    schedule: Schedule
    record: TuningRecord | None = None
    prediction: Prediction | None = None


def compile_tuned(
    program: str | Workload,
    db: str | os.PathLike[str] | Database | None = None,
    target: Target | None = None,
) -> Kernel:
    """Best valid record's schedule, else the zero-shot one (see ``chosen_schedule``)."""
    wl = program if isinstance(program, Workload) else parse_workload(program)
    target = target or Target.detect()
    return compile_with(wl, chosen_schedule(wl, db, target).schedule, target)


def chosen_schedule(
    wl: Workload,
    db: str | os.PathLike[str] | Database | None,
    target: Target,
    *,
    predict: bool = True,
) -> Chosen:
    """The best valid record's schedule; else the recorded zero-shot prediction's; else (with
    ``predict``) a new zero-shot choice, recorded when the database exists; else the default.

    ``predict=False`` only reads (what ``best`` shows): no model runs and nothing is written.
    """
    ds = design_space(wl, target)
    database = _open_for_reading(db)
    try:
        if database is not None:
            found = best_valid(ds, database, str(target))
            if found is not None:
                return Chosen(found[1], record=found[0])
            recorded = valid_prediction(ds, database, str(target))
            if recorded is not None:
                return Chosen(recorded[1], prediction=recorded[0])
        model = zero_shot.pretrained_model() if predict else None
        if model is None:
            return Chosen(ds.schedule(ds.default))
        prediction = zero_shot.choose(ds, model, database, str(target))
    finally:
        if database is not None and database is not db:  # the caller's stays open for it
            database.close()
    schedule = ds.schedule(prediction.config)  # the chosen config is a point of ds
    if database is not None:
        _record(prediction, db)
    return Chosen(schedule, prediction=prediction)


def tuned_schedule(
    wl: Workload, db: str | os.PathLike[str] | Database | None, target: Target
) -> tuple[TuningRecord | None, Schedule]:
    """The best valid record and the schedule its config builds, or (None, the design space's
    default): measured schedules only, for a caller reporting the record really used."""
    ds = design_space(wl, target)
    database = _open_for_reading(db)
    if database is None:
        return None, ds.schedule(ds.default)
    try:
        found = best_valid(ds, database, str(target))
    finally:
        if database is not db:  # a Database the caller passed in stays open for the caller
            database.close()
    return found or (None, ds.schedule(ds.default))


def best_valid(
    ds: DesignSpace, database: Database, target: str
) -> tuple[TuningRecord, Schedule] | None:
    """The best record of ``ds``'s workload that validates, with its schedule."""
    ranked = ranked_records(database, ds.workload.name, target, ds.name)
    return next(valid_records(ds, ranked), None)


def valid_prediction(
    ds: DesignSpace, database: Database, target: str
) -> tuple[Prediction, Schedule] | None:
    """The zero-shot prediction recorded for this tensortune version and space, with the
    schedule its config builds (None, with a warning, when it no longer builds one)."""
    found = database.prediction(ds.workload.name, target, version=__version__, space=ds.name)
    if found is None:
        return None
    try:
        return found, ds.schedule(found.config)
    except TensorTuneError as exc:
        warnings.warn(f"skipped the recorded zero-shot prediction: {exc}", RecordWarning, 2)
        return None


def _record(prediction: Prediction, db: str | os.PathLike[str] | Database | None) -> None:
    """Keep the prediction for the next compile: in the caller's open database, else in a
    writer that does not wait for a tuner's lock; a failure only costs that reuse."""
    try:
        if isinstance(db, Database):
            db.record_prediction(prediction)
            return
        with Database(default_db_path() if db is None else db, lock_timeout=0) as out:
            out.record_prediction(prediction)
    except DatabaseError as exc:
        warnings.warn(
            f"the zero-shot choice for {prediction.workload} was not recorded (the next compile "
            f"chooses again): {exc}",
            RecordWarning,
            3,
        )


def _open_for_reading(db: str | os.PathLike[str] | Database | None) -> Database | None:
    """The database opened read-only (reading never waits for a tuner's lock), or None when a
    path names no file yet: nothing was tuned there."""
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
