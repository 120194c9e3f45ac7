"""A real PostgreSQL server for the database tests, started from the OS's own binaries.

The team database is PostgreSQL, so the tests run against one rather than trusting SQLite to
stand in: ``initdb`` into a temporary directory, ``pg_ctl start`` listening only on a unix
socket in that directory (no TCP port another process could take or reach), one fresh
database per test. Debian's ``postgresql`` package provides the binaries and ``psycopg`` the
driver; without either the PostgreSQL tests are skipped with the reason, unless
``TENSORTUNE_REQUIRE_POSTGRES=1`` (CI), which turns the skip into a failure.
``TENSORTUNE_TEST_DB_URL`` names an existing server to use instead (its tensortune tables are
dropped before each test).
"""

from __future__ import annotations

import contextlib
import glob
import itertools
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REQUIRE_ENV = "TENSORTUNE_REQUIRE_POSTGRES"
SERVER_URL_ENV = "TENSORTUNE_TEST_DB_URL"
BIN_ENV = "TENSORTUNE_PG_BIN"
SUPERUSER = "tensortune"
TABLES = ("records", "meta", "claims", "predictions")


def _missing(reason: str) -> None:
    """Skip, or fail when the environment promises PostgreSQL (CI)."""
    if os.environ.get(REQUIRE_ENV, "").strip() not in ("", "0"):
        pytest.fail(f"{reason} ({REQUIRE_ENV} is set)", pytrace=False)
    pytest.skip(f"{reason}; set {REQUIRE_ENV}=1 to make this a failure")


def find_bin_dir() -> Path | None:
    """$TENSORTUNE_PG_BIN, else the newest /usr/lib/postgresql/<ver>/bin, else initdb on PATH."""
    if os.environ.get(BIN_ENV):
        return Path(os.environ[BIN_ENV])
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"),
        key=lambda p: [int(x) if x.isdigit() else 0 for x in Path(p).parts[-3].split(".")],
    )
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).resolve().parent if initdb else None


def _free_port() -> int:
    """A port nobody listens on: names the socket file; the server opens no TCP port."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class PostgresServer:
    """A running server: the socket directory, port and superuser to reach it by."""

    bin_dir: Path
    root: Path
    port: int
    user: pwd.struct_passwd | None
    """The unprivileged account the server runs as (PostgreSQL refuses root), or None."""

    @property
    def socket_dir(self) -> Path:
        return self.root / "socket"

    def url(self, database: str) -> str:
        """SQLAlchemy URL of ``database`` on this server (unix socket, trust auth)."""
        return (
            f"postgresql+psycopg://{SUPERUSER}@/{database}?host={self.socket_dir}&port={self.port}"
        )

    def run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """Run a server binary as the server's account; fails the test with its output."""
        cmd = [str(self.bin_dir / args[0]), *args[1:]]
        if self.user is not None:
            runuser = shutil.which("runuser")
            cmd = (
                [runuser, "-u", self.user.pw_name, "--", *cmd]
                if runuser
                else ["su", self.user.pw_name, "-s", "/bin/sh", "-c", subprocess.list2cmdline(cmd)]
            )
        proc = subprocess.run(
            cmd, capture_output=True, text=True, timeout=timeout, cwd=self.root, check=False
        )
        if proc.returncode != 0:
            log = (self.root / "server.log").read_text(errors="replace")[-2000:]
            pytest.fail(f"{args[0]} failed: {proc.stderr.strip()}\n{log}", pytrace=False)
        return proc

    def start(self) -> None:
        self.socket_dir.mkdir()
        if self.user is not None:
            for path in (self.root, self.socket_dir):
                os.chown(path, self.user.pw_uid, self.user.pw_gid)
        data = str(self.root / "data")
        # trust auth over the private socket only; --no-sync and fsync=off: a test server
        # never outlives the test session, and commits must not wait for a shared disk
        self.run(
            "initdb",
            "-D",
            data,
            "-U",
            SUPERUSER,
            "-A",
            "trust",
            "-E",
            "UTF8",
            "--locale=C",
            "--no-sync",
        )
        opts = (
            f"-p {self.port} -k {self.socket_dir} -c listen_addresses='' -c fsync=off "
            "-c full_page_writes=off -c max_connections=60 -c shared_buffers=16MB"
        )
        self.run(
            "pg_ctl",
            "-D",
            data,
            "-o",
            opts,
            "-l",
            str(self.root / "server.log"),
            "-w",
            "-t",
            "60",
            "start",
        )

    def stop(self) -> None:
        with contextlib.suppress(BaseException):
            self.run("pg_ctl", "-D", str(self.root / "data"), "-m", "immediate", "-w", "stop")

    def createdb(self, name: str) -> str:
        """A new, empty database; its SQLAlchemy URL."""
        self.run(
            "createdb",
            "-h",
            str(self.socket_dir),
            "-p",
            str(self.port),
            "-U",
            SUPERUSER,
            "-T",
            "template0",
            name,
        )
        return self.url(name)


def _server_account() -> pwd.struct_passwd | None:
    """Who runs the server: ourselves unless root, else 'postgres' (or 'nobody')."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        with contextlib.suppress(KeyError):
            return pwd.getpwnam(name)
    return None


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """A PostgreSQL server for the whole session, stopped and deleted at its end."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        _missing("PostgreSQL tests need the psycopg driver: pip install 'psycopg[binary]'")
    bin_dir = find_bin_dir()
    if bin_dir is None or not (bin_dir / "pg_ctl").exists():
        _missing(
            "PostgreSQL tests need the server binaries (apt-get install postgresql, or set "
            f"{BIN_ENV} to the directory holding initdb and pg_ctl)"
        )
    assert bin_dir is not None
    account = _server_account()
    if os.geteuid() == 0 and account is None:
        _missing("running as root with no 'postgres' or 'nobody' account to run the server as")
    # not under pytest's basetemp: the server's account must be able to reach it
    root = Path(tempfile.mkdtemp(prefix="tensortune-pg-"))
    server = PostgresServer(bin_dir, root, _free_port(), account)
    try:
        server.start()
        yield server
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


_names = itertools.count()


@pytest.fixture
def postgres_url(request: pytest.FixtureRequest) -> str:
    """URL of an empty PostgreSQL database for this test (a fresh one on our own server)."""
    existing = os.environ.get(SERVER_URL_ENV)
    if existing:
        drop_tensortune_tables(existing)
        return existing
    server: PostgresServer = request.getfixturevalue("postgres_server")
    return server.createdb(f"t{os.getpid()}_{next(_names)}")


def drop_tensortune_tables(url: str) -> None:
    """Empty a shared server of tensortune's tables, so a test starts from nothing."""
    from sqlalchemy import MetaData, create_engine

    engine = create_engine(url)
    try:
        meta = MetaData()
        meta.reflect(engine, only=lambda name, _: name in TABLES)
        meta.drop_all(engine)
    finally:
        engine.dispose()
