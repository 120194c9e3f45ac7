"""Opening a tuning database: locations (path or URL), SQLite engines, lock waits, and
errors explained by their cause (who holds the lock, which permission is missing).

Durability: every ``commit_record`` is its own committed transaction, so a process killed
right after it returns loses nothing. SQLite runs in WAL mode with ``synchronous=FULL``,
which additionally survives power loss / OS crashes (NORMAL only survives process death).
Measured on the dev box (ext4 on a virtio disk, SQLite 3.40, 300 commits of ~400-byte
records): FULL costs 0.5-0.7 ms per commit versus 0.26-0.37 ms for NORMAL. That is noise
next to a measurement that compiles and runs a kernel, so we take the stronger guarantee.

Concurrency: SQLite writers take the lock at BEGIN (IMMEDIATE) and wait for it up to the lock
timeout; a server (PostgreSQL) runs at READ COMMITTED with ``lock_timeout`` set to the same
bound. Errors that mean "nothing happened, try again" (SQLITE_BUSY returned without waiting,
serialization failures, deadlocks) are named by ``transient`` so the caller can retry them.
"""

from __future__ import annotations

import contextlib
import math
import os
import sqlite3
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, create_engine, event
from sqlalchemy.engine import URL, Engine, make_url
from sqlalchemy.exc import ArgumentError
from sqlalchemy.pool import StaticPool

from ..errors import DatabaseError

#: SQLite ``synchronous`` level (see module docstring for the measurement behind it).
SQLITE_SYNCHRONOUS = "FULL"

#: Seconds to wait for another process holding the SQLite write lock before giving up with an
#: error naming it; commits take about a millisecond, so only a stuck or bulk writer exceeds it.
DEFAULT_LOCK_TIMEOUT = 5.0

#: Environment variable overriding DEFAULT_LOCK_TIMEOUT (seconds).
LOCK_TIMEOUT_ENV = "TENSORTUNE_DB_LOCK_TIMEOUT"

#: Execution option marking a connection that writes: SQLite then takes its lock at BEGIN.
WRITE_OPTION = "tensortune_write"

#: SQLSTATEs after which the server rolled the transaction back and a retry can succeed:
#: serialization failure, deadlock, lock wait timed out (``lock_timeout``).
TRANSIENT_SQLSTATES = frozenset({"40001", "40P01", "55P03"})


def driver_message(exc: BaseException) -> str:
    """The first line of what the driver (or OS) objected to."""
    orig = getattr(exc, "orig", None) or exc
    text = (getattr(orig, "strerror", None) or str(orig)).strip()
    return text.splitlines()[0] if text else type(orig).__name__


def _printable(text: str) -> str:
    return "".join(ch if ch.isprintable() else " " for ch in text).strip()


def _processes_using(path: Path) -> str:
    """' (open in pid N: cmdline, ...)' from a /proc scan, or '' where /proc is unavailable.

    Tells the user which tuner to wait for or stop; SQLite itself cannot name the lock holder.
    """
    if not Path("/proc/self/fd").is_dir():
        return ""
    names = {str(path.resolve()), f"{path.resolve()}-wal"}
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            if any(os.readlink(fd) in names for fd in (proc / "fd").iterdir()):
                cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                found.append(f"pid {proc.name}: {_printable(cmd)[:100]}")
    return f" (open in {'; '.join(found[:3])})" if found else ""


def _access_problem(path: Path, readonly: bool) -> str | None:
    """Why the OS keeps us from using the SQLite file at ``path``, if it does."""
    folder = path.parent
    if not folder.is_dir():
        return f"directory '{folder}' does not exist"
    if not path.exists():
        return f"'{path}' does not exist" if readonly else f"cannot create '{path}'"
    if not os.access(path, os.R_OK):
        return f"no read permission for '{path}'"
    if not readonly and not (os.access(path, os.W_OK) and os.access(folder, os.W_OK)):
        return (
            f"no write permission for '{path}' or its directory '{folder}': tuning needs it "
            "(or pass another --db), while history, best, report and compile only read"
        )
    return None


def printable_location(location: str | os.PathLike[str]) -> str:
    """A path as given; a URL with its password masked (it goes into logs and JSON output)."""
    text = os.fspath(location)
    if "://" not in text:
        return text
    try:
        return make_url(text).render_as_string(hide_password=True)
    except ArgumentError:
        return text


def resolve(location: str | os.PathLike[str], create_dirs: bool) -> tuple[URL, str]:
    """(SQLAlchemy URL, printable location) for a path or URL; may create SQLite parent dirs."""
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
    if create_dirs:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise DatabaseError(
                f"cannot open tuning database '{path}': "
                f"cannot create directory '{path.parent}': {e.strerror}"
            ) from e
    return url, str(path)


def lock_timeout(seconds: float | None) -> float:
    """The lock wait: ``seconds``, else $TENSORTUNE_DB_LOCK_TIMEOUT, else the default."""
    if seconds is None:
        text = os.environ.get(LOCK_TIMEOUT_ENV, "").strip()
        try:
            seconds = float(text) if text else DEFAULT_LOCK_TIMEOUT
        except ValueError:
            message = f"{LOCK_TIMEOUT_ENV} must be a number of seconds, got {text!r}"
            raise DatabaseError(message) from None
    if not math.isfinite(seconds) or seconds < 0:
        raise DatabaseError(f"the lock timeout must be finite seconds >= 0, got {seconds!r}")
    return seconds


def _read_only_connector(path: Path, timeout: float) -> Any:
    """sqlite3 connections that never write: ``mode=ro``, else ``immutable=1``.

    A read-only open of a WAL database needs its ``-shm`` file; on read-only media (or without
    write permission on the directory) that cannot be created, and nobody can be writing there
    either, so the file is read as immutable.
    """
    uri = path.resolve().as_uri()

    def connect() -> sqlite3.Connection:
        conn = sqlite3.connect(f"{uri}?mode=ro", uri=True, timeout=timeout, check_same_thread=False)
        try:
            conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()
        except sqlite3.OperationalError as e:
            conn.close()
            if "unable to open" not in str(e):
                raise
            conn = sqlite3.connect(
                f"{uri}?mode=ro&immutable=1", uri=True, timeout=timeout, check_same_thread=False
            )
        return conn

    return connect


def sqlite_engine(url: URL, readonly: bool, timeout: float) -> Engine:
    """SQLite engine in WAL mode, with BEGIN issued by us so transactions really are atomic."""
    memory = not url.database or url.database == ":memory:"
    options: dict[str, Any] = {"poolclass": StaticPool} if memory else {}
    if readonly:
        options["creator"] = _read_only_connector(Path(url.database or ""), timeout)
    engine = create_engine(
        url,
        connect_args={"timeout": timeout, "check_same_thread": False},
        **options,
    )

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        # Stop sqlite3 from issuing (or skipping) BEGIN itself; _on_begin does it instead.
        dbapi_conn.isolation_level = None
        if readonly:  # both pragmas below write to the file
            return
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
        write = conn.get_execution_options().get(WRITE_OPTION, False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")

    return engine


def server_engine(url: URL, readonly: bool, timeout: float) -> Engine:
    """Engine for a database server: stale pooled connections are replaced (a restarted
    server is not an error), and lock waits are bounded like SQLite's; on PostgreSQL a
    read-only database runs read-only transactions, so the server itself refuses writes."""
    postgres = url.get_backend_name() == "postgresql"
    options: dict[str, Any] = {"postgresql_readonly": True} if readonly and postgres else {}
    engine = create_engine(url, pool_pre_ping=True, execution_options=options)
    if postgres:
        # 0 would mean "wait forever" to PostgreSQL; the smallest real bound is 1 ms
        millis = max(1, round(timeout * 1000))

        @event.listens_for(engine, "connect")
        def _on_connect(dbapi_conn: Any, _record: Any) -> None:
            cur = dbapi_conn.cursor()
            try:
                cur.execute(f"SET lock_timeout = {millis}")
            finally:
                cur.close()
            dbapi_conn.commit()

    return engine


def sqlstate(exc: BaseException) -> str | None:
    """The SQLSTATE a server reported (psycopg 3 and psycopg2 spell it differently)."""
    orig = getattr(exc, "orig", None) or exc
    code = getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)
    return code if isinstance(code, str) else None


def transient(exc: BaseException) -> bool:
    """Whether the failed transaction was rolled back for a reason that can pass: another
    writer held the lock, or the server picked this transaction to fail a conflict."""
    if sqlstate(exc) in TRANSIENT_SQLSTATES:
        return True
    if isinstance(getattr(exc, "orig", None), sqlite3.OperationalError):
        low = driver_message(exc).lower()
        return "locked" in low or "busy" in low
    return False


def serialize(conn: Connection, key: int) -> None:
    """Hold a server-wide lock named ``key`` until ``conn``'s transaction ends, on PostgreSQL.

    For writes that read first and must not interleave with the same write elsewhere
    (creating the tables, migrating them, importing without duplicates). SQLite needs none:
    its writers already hold the whole file's lock.
    """
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({int(key)})")


def explain(exc: BaseException, path: Path | None, readonly: bool, lock_timeout: float) -> str:
    """What went wrong, named by its cause (lock holder, permission, not a database...);
    ``path`` is the SQLite file (None for a server)."""
    line = driver_message(exc)
    low = line.lower()
    if "locked" in low or "busy" in low or sqlstate(exc) in TRANSIENT_SQLSTATES:
        return (
            "database is locked by another writer (another tensortune tune?)"
            f"{_processes_using(path) if path else ''}; gave up after "
            f"{lock_timeout:g} s (set {LOCK_TIMEOUT_ENV} to wait longer)"
        )
    if path is None:
        return line
    if "not a database" in low or "encrypted" in low or "malformed" in low:
        return "file is not a SQLite database or is corrupt; move it away or pass another path"
    if "readonly" in low or "unable to open" in low:
        return _access_problem(path, readonly) or line
    return line
