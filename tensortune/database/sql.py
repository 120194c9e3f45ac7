"""The tuning database on SQLAlchemy Core: a local SQLite file by default, any SQL URL works.

Durability: every ``commit_record`` is its own committed transaction, so a process killed
right after it returns loses nothing. SQLite runs in WAL mode with ``synchronous=FULL``,
which additionally survives power loss / OS crashes (NORMAL only survives process death).
Measured on the dev box (ext4 on a virtio disk, SQLite 3.40, 300 commits of ~400-byte
records): FULL costs 0.5-0.7 ms per commit versus 0.26-0.37 ms for NORMAL. That is noise
next to a measurement that compiles and runs a kernel, so we take the stronger guarantee.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
from collections.abc import Iterable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from sqlalchemy import (
    Column,
    Connection,
    Float,
    Index,
    Integer,
    MetaData,
    Select,
    String,
    Table,
    Text,
    create_engine,
    event,
    insert,
    inspect,
    select,
    update,
)
from sqlalchemy.engine import URL, Engine, make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError
from sqlalchemy.pool import StaticPool

from ..errors import DatabaseError
from .database import Database
from .record import JSON_FIELDS, TuningRecord, canonical_json, current_version, rank_score

#: Bump when the table layout changes; `MIGRATIONS` brings older files up to date, and
#: files from a newer tensortune are refused.
SCHEMA_VERSION = 2

#: Statements that take a file from schema version N to N + 1.
MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: (  # paired timing: the reference's time and the ratio to it
        "ALTER TABLE records ADD COLUMN reference_seconds FLOAT",
        "ALTER TABLE records ADD COLUMN ratio FLOAT",
    ),
}

#: SQLite ``synchronous`` level (see module docstring for the measurement behind it).
SQLITE_SYNCHRONOUS = "FULL"

#: Seconds a writer waits for another process holding the SQLite write lock.
SQLITE_BUSY_TIMEOUT = 30.0

_WRITE_OPTION = "tensortune_write"
_IMPORT_CHUNK = 500

_metadata = MetaData()

meta_table = Table(
    "meta",
    _metadata,
    Column("key", String(64), primary_key=True),
    Column("value", Text, nullable=False),
)

records_table = Table(
    "records",
    _metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("workload", String, nullable=False),
    Column("target", String, nullable=False),
    Column("version", String, nullable=False),
    Column("config_key", String, nullable=False),
    Column("config", Text, nullable=False),
    Column("trace", Text, nullable=False),
    Column("seconds", Float, nullable=True),
    Column("spread", Text, nullable=False),
    Column("error", String(32), nullable=True),
    Column("error_msg", Text, nullable=True),
    Column("strategy", String, nullable=False),
    Column("trial", Integer, nullable=False),
    Column("tuning_seconds", Float, nullable=False),
    Column("created_at", Float, nullable=False),
    Column("run_id", String, nullable=False),
    Column("machine", Text, nullable=False),
    # sha256 of the record's canonical JSON: finds exact duplicates on import.
    Column("digest", String(64), nullable=False),
    Column("reference_seconds", Float, nullable=True),
    Column("ratio", Float, nullable=True),
    Index("ix_records_config", "workload", "target", "config_key"),
    Index("ix_records_rank", "workload", "target", "seconds"),
    Index("ix_records_version", "version"),
    Index("ix_records_run", "run_id"),
    Index("ix_records_digest", "digest"),
)

_ROW_ONLY = ("id", "config_key", "digest")


def _to_row(rec: TuningRecord) -> dict[str, Any]:
    row = rec.to_dict()
    for name in JSON_FIELDS:
        row[name] = canonical_json(row[name])
    row["config_key"] = rec.config_key
    row["digest"] = hashlib.sha256(rec.to_json().encode()).hexdigest()
    return row


def _from_row(row: Any) -> TuningRecord:
    data = {k: v for k, v in row._mapping.items() if k not in _ROW_ONLY}
    for name in JSON_FIELDS:
        data[name] = json.loads(data[name])
    return TuningRecord(**data)


def _describe(exc: BaseException) -> str:
    """One line saying what the driver (or OS) objected to."""
    orig = getattr(exc, "orig", None) or exc
    text = (getattr(orig, "strerror", None) or str(orig)).strip()
    line = text.splitlines()[0] if text else type(orig).__name__
    if "file is not a database" in line or "file is encrypted" in line:
        return "file is not a database (SQLite)"
    return line


def printable_location(location: str | os.PathLike[str]) -> str:
    """A path as given; a URL with its password masked (it goes into logs and JSON output)."""
    text = os.fspath(location)
    if "://" not in text:
        return text
    try:
        return make_url(text).render_as_string(hide_password=True)
    except ArgumentError:
        return text


def _resolve(location: str | os.PathLike[str]) -> tuple[URL, str]:
    """(SQLAlchemy URL, printable location) for a path or URL; creates SQLite parent dirs."""
    text = os.fspath(location)
    if "://" in text:
        try:
            url = make_url(text)
        except ArgumentError as e:
            raise DatabaseError(f"cannot open tuning database '{text}': {e}") from e
    else:
        url = URL.create("sqlite", database=str(Path(text).expanduser()))
    if url.get_backend_name() != "sqlite":
        return url, printable_location(text)
    if not url.database or url.database == ":memory:":
        return url, ":memory:"
    path = Path(url.database)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise DatabaseError(
            f"cannot open tuning database '{path}': cannot create its directory: {e.strerror}"
        ) from e
    return url, str(path)


def _sqlite_engine(url: URL) -> Engine:
    """SQLite engine in WAL mode, with BEGIN issued by us so transactions really are atomic."""
    memory = not url.database or url.database == ":memory:"
    engine = create_engine(
        url,
        connect_args={"timeout": SQLITE_BUSY_TIMEOUT, "check_same_thread": False},
        # One shared connection: otherwise each pooled connection is its own empty database.
        poolclass=StaticPool if memory else None,
    )

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        # Stop sqlite3 from issuing (or skipping) BEGIN itself; _on_begin does it instead.
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        try:
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute(f"PRAGMA synchronous={SQLITE_SYNCHRONOUS}")
        finally:
            cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        # Writers take the lock up front: a deferred read-then-write transaction can fail
        # with SQLITE_BUSY immediately (no busy-wait) when another process wrote meanwhile.
        write = conn.get_execution_options().get(_WRITE_OPTION, False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")

    return engine


class SQLDatabase(Database):
    """Tuning database in one ``records`` table, via SQLAlchemy Core.

    ``location`` is a filesystem path (a SQLite file, parent directories created) or any
    SQLAlchemy URL, e.g. ``postgresql+psycopg://host/db`` (install its driver yourself).
    Safe to share between threads and, for SQLite, between processes.
    """

    def __init__(self, location: str | os.PathLike[str]):
        url, self.location = _resolve(location)
        self._closed = False
        self._lock = threading.Lock()
        try:
            self._engine = (
                _sqlite_engine(url) if url.get_backend_name() == "sqlite" else create_engine(url)
            )
        except (SQLAlchemyError, ImportError) as e:  # unknown dialect or driver not installed
            hint = (
                f"; install the driver (e.g. pip install {e.name}) or name one in the URL"
                if isinstance(e, ImportError) and e.name
                else ""
            )
            raise DatabaseError(
                f"cannot open tuning database '{self.location}': {_describe(e)}{hint}"
            ) from e
        try:
            with self._begin(write=True) as conn:
                problem = self._prepare_schema(conn)
        except SQLAlchemyError as e:
            problem = _describe(e)
        if problem is not None:
            self._engine.dispose()
            self._closed = True
            raise self._open_error(problem)

    def __repr__(self) -> str:
        return f"SQLDatabase({self.location!r})"

    def _open_error(self, problem: str) -> DatabaseError:
        return DatabaseError(
            f"cannot open tuning database '{self.location}': {problem}; "
            "pass a new path or delete the file"
        )

    @staticmethod
    def _prepare_schema(conn: Connection) -> str | None:
        """Create the tables in an empty database; return why an existing one is unusable."""
        tables = set(inspect(conn).get_table_names())
        if meta_table.name not in tables:
            if records_table.name in tables:
                return "it has a 'records' table but no 'meta' table (not a tensortune database)"
            _metadata.create_all(conn)
            conn.execute(
                insert(meta_table),
                [
                    {"key": "schema_version", "value": str(SCHEMA_VERSION)},
                    {"key": "created_by", "value": f"tensortune {current_version()}"},
                ],
            )
            return None
        found = conn.execute(
            select(meta_table.c.value).where(meta_table.c.key == "schema_version")
        ).scalar()
        if found is None:
            return "its 'meta' table has no schema_version (not a tensortune database)"
        if not found.isdigit() or not 1 <= int(found) <= SCHEMA_VERSION:
            return (
                f"schema version {found} is not supported "
                f"(this tensortune {current_version()} reads schema versions 1 to "
                f"{SCHEMA_VERSION})"
            )
        for version in range(int(found), SCHEMA_VERSION):
            for statement in MIGRATIONS[version]:
                conn.exec_driver_sql(statement)
        if int(found) != SCHEMA_VERSION:
            conn.execute(
                update(meta_table)
                .where(meta_table.c.key == "schema_version")
                .values(value=str(SCHEMA_VERSION))
            )
        _metadata.create_all(conn)  # no-op unless a table went missing
        return None

    @contextlib.contextmanager
    def _begin(self, write: bool = False) -> Iterator[Connection]:
        """One transaction, committed on normal exit; writers lock (SQLite) immediately."""
        with self._lock, self._engine.connect() as conn:
            if write:
                conn.execution_options(**{_WRITE_OPTION: True})
            with conn.begin():
                yield conn

    @contextlib.contextmanager
    def _transaction(self, action: str, write: bool = False) -> Iterator[Connection]:
        """``_begin`` with driver errors turned into one-line DatabaseErrors."""
        if self._closed:
            raise DatabaseError(f"tuning database '{self.location}' is closed ({action})")
        try:
            with self._begin(write) as conn:
                yield conn
        except SQLAlchemyError as e:
            raise DatabaseError(
                f"tuning database '{self.location}': {action} failed: {_describe(e)}"
            ) from e

    @staticmethod
    def _select(columns: Any = records_table, **equal: str | None) -> Select[Any]:
        """SELECT from records, constrained by every non-None keyword (column == value)."""
        stmt = select(columns)
        for name, value in equal.items():
            if value is not None:
                stmt = stmt.where(records_table.c[name] == value)
        return stmt

    def commit_record(self, rec: TuningRecord) -> None:
        row = _to_row(rec)
        with self._transaction("commit_record", write=True) as conn:
            conn.execute(insert(records_table), row)

    def has(
        self, workload: str, target: str, config_key: str, *, version: str | None = None
    ) -> bool:
        stmt = self._select(
            records_table.c.id,
            workload=workload,
            target=target,
            config_key=config_key,
            version=version,
        ).limit(1)
        with self._transaction("has") as conn:
            return conn.execute(stmt).first() is not None

    def measured_keys(self, workload: str, target: str, *, version: str | None = None) -> set[str]:
        stmt = self._select(
            records_table.c.config_key, workload=workload, target=target, version=version
        ).distinct()
        with self._transaction("measured_keys") as conn:
            return set(conn.execute(stmt).scalars())

    def records(
        self,
        workload: str | None = None,
        target: str | None = None,
        run_id: str | None = None,
        *,
        version: str | None = None,
    ) -> list[TuningRecord]:
        stmt = self._select(
            workload=workload, target=target, run_id=run_id, version=version
        ).order_by(records_table.c.id)
        with self._transaction("records") as conn:
            return [_from_row(row) for row in conn.execute(stmt)]

    def top_k(
        self, workload: str, target: str, k: int = 1, *, version: str | None = None
    ) -> list[TuningRecord]:
        if k <= 0:
            return []
        c = records_table.c
        stmt = (
            self._select(workload=workload, target=target, version=version)
            .where(c.error.is_(None), c.seconds.is_not(None))
            .order_by(c.config_key, c.seconds, c.id)
        )
        by_config: dict[str, list[Any]] = {}
        with self._transaction("top_k") as conn, conn.execute(stmt) as result:
            for row in result:
                by_config.setdefault(row.config_key, []).append(row)
        score = rank_score([row for rows in by_config.values() for row in rows])
        ranked = []
        for rows in by_config.values():
            rows.sort(key=lambda row: (score(row), row.id))
            ranked.append((rows[(len(rows) - 1) // 2], min(rows, key=lambda row: row.id)))
        ranked.sort(key=lambda pair: (score(pair[0]), pair[0].config_key))
        # the median's time, the first measurement's story (who found it, when)
        return [
            replace(
                _from_row(first),
                seconds=median.seconds,
                spread=_from_row(median).spread,
                reference_seconds=median.reference_seconds,
                ratio=median.ratio,
            )
            for median, first in ranked[:k]
        ]

    def workloads(self, target: str | None = None) -> list[str]:
        c = records_table.c
        stmt = self._select(c.workload, target=target).distinct().order_by(c.workload)
        with self._transaction("workloads") as conn:
            return list(conn.execute(stmt).scalars())

    def import_records(self, records: Iterable[TuningRecord]) -> int:
        rows: dict[str, dict[str, Any]] = {}  # digest -> row, first occurrence wins
        for rec in records:
            row = _to_row(rec)
            rows.setdefault(row["digest"], row)
        if not rows:
            return 0
        digests = list(rows)
        with self._transaction("import", write=True) as conn:
            for i in range(0, len(digests), _IMPORT_CHUNK):
                chunk = digests[i : i + _IMPORT_CHUNK]
                stmt = select(records_table.c.digest).where(records_table.c.digest.in_(chunk))
                for digest in conn.execute(stmt).scalars():
                    rows.pop(digest, None)
            if rows:
                conn.execute(insert(records_table), list(rows.values()))
        return len(rows)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._engine.dispose()
