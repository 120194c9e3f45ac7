"""The tuning database on SQLAlchemy Core: a local SQLite file by default, any SQL URL works.

The tables and their migrations live in ``schema``, opening and error explanations in
``connect``, the claims' and predictions' queries in ``claims`` and ``prediction_store``, JSON
Lines files in ``jsonl``; this module holds the records' queries and writes.
"""

from __future__ import annotations

import contextlib
import os
import random
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from sqlalchemy import Connection, Select, insert, select
from sqlalchemy.exc import SQLAlchemyError

from ..errors import DatabaseError, RecordWarning
from .claims import ClaimStore
from .connect import (
    DEFAULT_LOCK_TIMEOUT,
    LOCK_TIMEOUT_ENV,
    SQLITE_SYNCHRONOUS,
    WRITE_OPTION,
    driver_message,
    explain,
    printable_location,
    resolve,
    serialize,
    server_engine,
    sqlite_engine,
    transient,
)
from .connect import lock_timeout as resolve_lock_timeout
from .jsonl import PathOrFile, read_jsonl, write_jsonl
from .prediction_store import PredictionStore
from .record import TuningRecord, rank_configs
from .schema import (
    IMPORT_LOCK,
    MIGRATIONS,
    SCHEMA_VERSION,
    from_row,
    meta_table,
    prepare_schema,
    records_table,
    to_row,
)

_IMPORT_CHUNK = 500

#: First and longest pause between retries of a transaction that failed transiently; the
#: pauses are jittered so tuners that collided once do not collide again in lockstep.
_RETRY_FIRST = 0.005
_RETRY_MAX = 0.25

_T = TypeVar("_T")
_D = TypeVar("_D", bound="Database")


class Database(PredictionStore, ClaimStore):
    """Every measurement tensortune makes, keyed by (workload, target, config), in SQL tables.

    Search strategies use it to skip configs already measured (``has``/``measured_keys``)
    and to start from the best known ones (``top_k``/``best``). Queries are always scoped by
    target, so a result measured on one machine never answers for another. ``version`` (the
    tensortune version that measured) and ``space`` (the design space's name, "" for a
    built-in template) are stored on every record and can optionally narrow any query: ratios
    of different spaces are to different defaults and must not be ranked together.

    ``location`` is a filesystem path (a SQLite file, parent directories created) or any
    SQLAlchemy URL, e.g. ``postgresql+psycopg://host/db`` (install its driver yourself).
    Safe to share between threads and, for SQLite, between processes.

    ``readonly=True`` never writes, creates nothing and takes no write lock, so it works on
    read-only media and while a tuner writes. ``lock_timeout`` bounds the wait for another
    writer's lock (default: $TENSORTUNE_DB_LOCK_TIMEOUT, else DEFAULT_LOCK_TIMEOUT seconds).
    """

    def __init__(
        self,
        location: str | os.PathLike[str],
        *,
        readonly: bool = False,
        lock_timeout: float | None = None,
    ):
        url, self.location = resolve(location, create_dirs=not readonly)
        self.readonly = readonly
        self.lock_timeout = resolve_lock_timeout(lock_timeout)
        memory = self.location == ":memory:"
        if readonly and memory:
            raise DatabaseError("an in-memory tuning database cannot be opened read-only")
        # the SQLite file, whose permissions and users explain open errors
        self._path = (
            Path(self.location) if url.get_backend_name() == "sqlite" and not memory else None
        )
        self._closed = False
        self._lock = threading.Lock()
        try:
            self._engine = (
                sqlite_engine(url, readonly, self.lock_timeout)
                if url.get_backend_name() == "sqlite"
                else server_engine(url, readonly, self.lock_timeout)
            )
        except (SQLAlchemyError, ImportError) as e:  # unknown dialect or driver not installed
            hint = (
                f"; install the driver (e.g. pip install {e.name}) or name one in the URL"
                if isinstance(e, ImportError) and e.name
                else ""
            )
            raise DatabaseError(
                f"cannot open tuning database '{self.location}': {driver_message(e)}{hint}"
            ) from e
        try:
            problem = self._retrying(lambda conn: prepare_schema(conn, readonly), not readonly)
        except SQLAlchemyError as e:
            problem = self._explain(e)
        if problem is not None:
            self._engine.dispose()
            self._closed = True
            raise DatabaseError(f"cannot open tuning database '{self.location}': {problem}")

    def __repr__(self) -> str:
        return f"Database({self.location!r})"

    def _explain(self, exc: BaseException) -> str:
        """What went wrong, named by its cause (lock holder, permission, not a database...)."""
        return explain(exc, self._path, self.readonly, self.lock_timeout)

    @contextlib.contextmanager
    def _begin(self, write: bool = False) -> Iterator[Connection]:
        """One transaction, committed on normal exit; writers lock (SQLite) immediately."""
        with self._lock, self._engine.connect() as conn:
            if write:
                conn.execution_options(**{WRITE_OPTION: True})
            with conn.begin():
                yield conn

    def _retrying(self, work: Callable[[Connection], _T], write: bool) -> _T:
        """``work`` in one transaction, run again after a transient failure (see
        ``connect.transient``) until the lock timeout has passed, so tuners sharing a database
        never see each other's lock waits or conflicts; ``work`` must be safe to repeat."""
        deadline = time.monotonic() + self.lock_timeout
        pause = _RETRY_FIRST
        while True:
            try:
                with self._begin(write) as conn:
                    return work(conn)
            except SQLAlchemyError as e:
                if not transient(e) or time.monotonic() + pause > deadline:
                    raise
            time.sleep(pause * random.uniform(0.5, 1.5))
            pause = min(2 * pause, _RETRY_MAX)

    def _run(self, action: str, work: Callable[[Connection], _T], write: bool = False) -> _T:
        """``_retrying`` with driver errors turned into one-line DatabaseErrors."""
        if self._closed:
            raise DatabaseError(f"tuning database '{self.location}' is closed ({action})")
        if write and self.readonly:
            raise DatabaseError(f"tuning database '{self.location}' is open read-only ({action})")
        try:
            return self._retrying(work, write)
        except SQLAlchemyError as e:
            raise DatabaseError(
                f"tuning database '{self.location}': {action} failed: {self._explain(e)}"
            ) from e

    def _load(self, row: Any) -> TuningRecord | None:
        """The row as a record; None, with one warning naming it, if it fails validation."""
        try:
            return from_row(row)
        except DatabaseError as e:
            self._skip(row, e)
            return None

    def _skip(self, row: Any, problem: object) -> None:
        """Leave a row out of a result, saying which and why (it stays in the database)."""
        warnings.warn(
            f"tuning database '{self.location}': skipping record {row.id}: {problem}",
            RecordWarning,
            stacklevel=2,
        )

    @staticmethod
    def _select(
        columns: Any,
        workload: str | None,
        target: str | None,
        version: str | None = None,
        space: str | None = None,
        **more: str | None,
    ) -> Select[Any]:
        """SELECT from records, constrained by every non-None argument (column == value): the
        scope every query takes, and ``more`` columns by name."""
        stmt = select(columns)
        scope = {"workload": workload, "target": target, "version": version, "space": space}
        for name, value in {**scope, **more}.items():
            if value is not None:
                stmt = stmt.where(records_table.c[name] == value)
        return stmt

    def commit_record(self, rec: TuningRecord) -> None:
        """Store one record durably: once this returns, a crash cannot lose it."""
        row = to_row(rec)
        self._run("commit_record", lambda conn: conn.execute(insert(records_table), row), True)

    def has(
        self,
        workload: str,
        target: str,
        config_key: str,
        *,
        version: str | None = None,
        space: str | None = None,
    ) -> bool:
        """Whether this config was already measured (successfully or not)."""
        c = records_table.c
        stmt = self._select(c.id, workload, target, version, space, config_key=config_key).limit(1)
        return self._run("has", lambda conn: conn.execute(stmt).first() is not None)

    def measured_keys(
        self, workload: str, target: str, *, version: str | None = None, space: str | None = None
    ) -> set[str]:
        """config_keys of every measured config (bulk form of ``has``)."""
        c = records_table.c
        stmt = self._select(c.config_key, workload, target, version, space).distinct()
        return self._run("measured_keys", lambda conn: set(conn.execute(stmt).scalars()))

    def records(
        self,
        workload: str | None = None,
        target: str | None = None,
        run_id: str | None = None,
        *,
        version: str | None = None,
        space: str | None = None,
    ) -> list[TuningRecord]:
        """Matching records in insertion order (None means "any")."""
        stmt = self._select(records_table, workload, target, version, space, run_id=run_id)
        stmt = stmt.order_by(records_table.c.id)
        rows = self._run("records", lambda conn: conn.execute(stmt).all())
        return [rec for row in rows if (rec := self._load(row)) is not None]

    def top_k(
        self,
        workload: str,
        target: str,
        k: int = 1,
        *,
        version: str | None = None,
        space: str | None = None,
    ) -> list[TuningRecord]:
        """The k fastest distinct successful configs, each by its median measurement.

        A config measured several times is represented by its median record (the faster of the
        middle two for an even count), so one lucky moment of a noisy machine does not rank it.
        Ordered by (seconds, config_key), so ties are broken deterministically.
        """
        if k <= 0:
            return []
        c = records_table.c
        stmt = (
            self._select(records_table, workload, target, version, space)
            .where(c.error.is_(None), c.seconds.is_not(None))
            .order_by(c.id)
        )
        rows = self._run("top_k", lambda conn: conn.execute(stmt).all())
        # every row is validated before it ranks: a malformed row (written by another program)
        # is left out with a warning, and its config ranks on its valid measurements
        loaded = [(row.id, rec) for row in rows if (rec := self._load(row)) is not None]
        order = {id(rec): row_id for row_id, rec in loaded}
        ranked = rank_configs([rec for _, rec in loaded], order=lambda rec: order[id(rec)])
        # the median's time, the first measurement's story (who found it, when)
        return [
            replace(
                first,
                seconds=median.seconds,
                spread=median.spread,
                reference_seconds=median.reference_seconds,
                ratio=median.ratio,
            )
            for median, first in ranked[:k]
        ]

    def best(
        self, workload: str, target: str, *, version: str | None = None, space: str | None = None
    ) -> TuningRecord | None:
        """The median record of the fastest config (see `top_k`), or None if nothing succeeded."""
        top = self.top_k(workload, target, 1, version=version, space=space)
        return top[0] if top else None

    def workloads(self, target: str | None = None) -> list[str]:
        """Sorted distinct workloads with at least one record (optionally on one target)."""
        c = records_table.c
        stmt = self._select(c.workload, None, target).distinct().order_by(c.workload)
        return self._run("workloads", lambda conn: list(conn.execute(stmt).scalars()))

    def import_records(self, records: Iterable[TuningRecord]) -> int:
        """Atomically add records, skipping exact duplicates; returns how many were added.

        Lets databases be merged (``dst.import_records(src.records())``) idempotently.
        """
        rows: dict[str, dict[str, Any]] = {}  # digest -> row, first occurrence wins
        for rec in records:
            row = to_row(rec)
            rows.setdefault(row["digest"], row)
        if not rows:
            return 0

        def add_new(conn: Connection) -> int:
            serialize(conn, IMPORT_LOCK)  # two imports of one file add it once
            digests = list(rows)
            present: set[str] = set()
            for i in range(0, len(digests), _IMPORT_CHUNK):
                chunk = digests[i : i + _IMPORT_CHUNK]
                stmt = select(records_table.c.digest).where(records_table.c.digest.in_(chunk))
                present.update(conn.execute(stmt).scalars())
            new = [row for digest, row in rows.items() if digest not in present]
            if new:
                conn.execute(insert(records_table), new)
            return len(new)

        return self._run("import", add_new, write=True)

    def export_jsonl(self, dest: PathOrFile) -> int:
        """Write every record, one JSON object per line in insertion order; returns the count."""
        return write_jsonl(self.records(), dest)

    def import_jsonl(self, src: PathOrFile) -> int:
        """Add the records of a JSONL file (exact duplicates skipped); returns how many were added.

        The whole file is parsed before anything is written, so a bad line adds nothing.
        """
        return self.import_records(read_jsonl(src))

    def close(self) -> None:
        """Release connections; later calls raise DatabaseError."""
        if not self._closed:
            self._closed = True
            self._engine.dispose()

    def __enter__(self: _D) -> _D:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


__all__ = [
    "DEFAULT_LOCK_TIMEOUT",
    "LOCK_TIMEOUT_ENV",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "SQLITE_SYNCHRONOUS",
    "Database",
    "meta_table",
    "printable_location",
    "records_table",
]
