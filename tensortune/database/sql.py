"""The tuning database on SQLAlchemy Core: a local SQLite file by default, any SQL URL works.

The tables and their migrations live in ``schema``, opening and error explanations in
``connect``; this module holds the queries, the writes and the claims.
"""

from __future__ import annotations

import contextlib
import math
import os
import random
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import Connection, Select, delete, insert, or_, select, update
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from ..errors import DatabaseError, RecordWarning
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
from .database import Database
from .prediction_store import PredictionStore
from .record import TuningRecord, rank_configs
from .schema import (
    IMPORT_LOCK,
    MIGRATIONS,
    SCHEMA_VERSION,
    claims_table,
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


class SQLDatabase(PredictionStore, Database):
    """Tuning database in SQL tables, via SQLAlchemy Core.

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
        return f"SQLDatabase({self.location!r})"

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
    def _select(columns: Any = records_table, **equal: str | None) -> Select[Any]:
        """SELECT from records, constrained by every non-None keyword (column == value)."""
        stmt = select(columns)
        for name, value in equal.items():
            if value is not None:
                stmt = stmt.where(records_table.c[name] == value)
        return stmt

    def commit_record(self, rec: TuningRecord) -> None:
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
        stmt = self._select(
            records_table.c.id,
            workload=workload,
            target=target,
            config_key=config_key,
            version=version,
            space=space,
        ).limit(1)
        return self._run("has", lambda conn: conn.execute(stmt).first() is not None)

    def measured_keys(
        self, workload: str, target: str, *, version: str | None = None, space: str | None = None
    ) -> set[str]:
        stmt = self._select(
            records_table.c.config_key,
            workload=workload,
            target=target,
            version=version,
            space=space,
        ).distinct()
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
        stmt = self._select(
            workload=workload, target=target, run_id=run_id, version=version, space=space
        ).order_by(records_table.c.id)
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
        if k <= 0:
            return []
        c = records_table.c
        stmt = (
            self._select(workload=workload, target=target, version=version, space=space)
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

    def workloads(self, target: str | None = None) -> list[str]:
        c = records_table.c
        stmt = self._select(c.workload, target=target).distinct().order_by(c.workload)
        return self._run("workloads", lambda conn: list(conn.execute(stmt).scalars()))

    def import_records(self, records: Iterable[TuningRecord]) -> int:
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

    def claim(self, workload: str, target: str, config_key: str, *, owner: str, ttl: float) -> bool:
        if not owner:
            raise DatabaseError("a claim needs a non-empty owner")
        if not (isinstance(ttl, (int, float)) and math.isfinite(ttl) and ttl > 0):
            raise DatabaseError(f"a claim needs a finite ttl > 0 seconds, got {ttl!r}")
        c = claims_table.c
        key = (c.workload == workload) & (c.target == target) & (c.config_key == config_key)

        def take(conn: Connection) -> bool:
            now = time.time()  # read on every attempt: a retry must not extend a stale claim
            renew_or_expired = or_(c.owner == owner, c.expires_at <= now)
            stmt = update(claims_table).where(key, renew_or_expired)
            if conn.execute(stmt.values(owner=owner, expires_at=now + ttl)).rowcount:
                return True
            if conn.execute(select(c.owner).where(key)).first() is not None:
                return False
            conn.execute(
                insert(claims_table).values(
                    workload=workload,
                    target=target,
                    config_key=config_key,
                    owner=owner,
                    expires_at=now + ttl,
                )
            )
            return True

        try:
            return self._run("claim", take, write=True)
        except DatabaseError as e:
            if isinstance(e.__cause__, IntegrityError):  # a server: another owner inserted first
                return False
            raise

    def release(self, workload: str, target: str, config_key: str, *, owner: str) -> None:
        c = claims_table.c
        stmt = delete(claims_table).where(
            c.workload == workload,
            c.target == target,
            c.config_key == config_key,
            c.owner == owner,
        )
        self._run("release", lambda conn: conn.execute(stmt), write=True)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._engine.dispose()


__all__ = [
    "DEFAULT_LOCK_TIMEOUT",
    "LOCK_TIMEOUT_ENV",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "SQLITE_SYNCHRONOUS",
    "SQLDatabase",
    "meta_table",
    "printable_location",
    "records_table",
]
