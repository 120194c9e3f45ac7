"""What a team database needs beyond one tuner on one file, on SQLite and PostgreSQL alike:
claims that exactly one process wins, a fresh database created once by tuners starting
together, imports that add each record once, schema versions refused or migrated, read-only
opening, and lock waits and conflicts retried inside the database layer, never shown."""

from __future__ import annotations

import json
import multiprocessing
import time
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError

from tensortune.database import Database
from tensortune.database.schema import SCHEMA_LOCK, SCHEMA_VERSION
from tensortune.errors import DatabaseError

from .conftest import MakeRecord, execute, record

W, T, KEY = "matmul(64,64,64,float32)", "cpu-x86_64-avx2", '{"tile":8}'
PROCESSES = 4


def _spawn(target: Any, *args: Any) -> list[Any]:
    """Run ``target(i, start, out, *args)`` in PROCESSES processes released together by a
    barrier; what each put on ``out``, in process order."""
    ctx = multiprocessing.get_context("spawn")
    start, out = ctx.Barrier(PROCESSES, timeout=60), ctx.Queue()
    procs = [
        ctx.Process(target=_guarded, args=(target, i, start, out, *args)) for i in range(PROCESSES)
    ]
    for p in procs:
        p.start()
    results = dict(out.get(timeout=120) for _ in procs)
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    return [results[i] for i in range(PROCESSES)]


def _guarded(target: Any, i: int, start: Any, out: Any, *args: Any) -> None:
    """``target``, its failure reported as its result (so the test fails at once, saying why)."""
    try:
        target(i, start, out, *args)
    except BaseException as e:
        out.put((i, f"{type(e).__name__}: {e}"))


def _claim_all(i: int, start: Any, out: Any, location: str, keys: list[str]) -> None:
    with Database(location) as db:
        start.wait()
        out.put((i, [db.claim(W, T, k, owner=f"tuner{i}", ttl=60) for k in keys]))


def test_processes_claiming_the_same_configs_never_both_win(db_location: Path | str) -> None:
    Database(db_location).close()
    keys = [json.dumps({"tile": i}) for i in range(25)]
    results = _spawn(_claim_all, str(db_location), keys)
    for k in range(len(keys)):
        winners = [i for i in range(PROCESSES) if results[i][k]]
        assert len(winners) == 1, f"config {k}: won by {winners}"


def test_a_claim_is_exclusive_until_it_expires_or_is_released(db: Database) -> None:
    assert db.claim(W, T, KEY, owner="a", ttl=0.2)
    assert not db.claim(W, T, KEY, owner="b", ttl=60)
    assert db.claim(W, T, KEY, owner="a", ttl=0.2), "the holder renews"
    assert db.claim(W, "other-target", KEY, owner="b", ttl=60), "claims are per key"
    time.sleep(0.3)
    assert db.claim(W, T, KEY, owner="b", ttl=60), "an expired claim is free"
    db.release(W, T, KEY, owner="a")  # a lost it: releases nothing
    assert not db.claim(W, T, KEY, owner="a", ttl=60)
    db.release(W, T, KEY, owner="b")
    assert db.claim(W, T, KEY, owner="a", ttl=60)


def _open_and_commit(i: int, start: Any, out: Any, location: str) -> None:
    start.wait()
    with Database(location) as db:
        db.commit_record(record(config={"tuner": i}, run_id=f"run{i}"))
    out.put((i, "ok"))


def test_tuners_starting_together_create_the_database_once(db_location: Path | str) -> None:
    """Four tuners opening one fresh database at once: one creates the tables, none fails."""
    assert _spawn(_open_and_commit, str(db_location)) == ["ok"] * PROCESSES
    with Database(db_location) as db:
        assert sorted(r.run_id for r in db.records()) == [f"run{i}" for i in range(PROCESSES)]
    rows = execute(db_location, "SELECT key, value FROM meta ORDER BY key")
    assert [tuple(r) for r in rows if r[0] == "schema_version"] == [
        ("schema_version", str(SCHEMA_VERSION))
    ]


def _import(i: int, start: Any, out: Any, location: str, lines: list[str]) -> None:
    recs = [json.loads(line) for line in lines]
    with Database(location) as db:
        start.wait()
        from tensortune.database import TuningRecord

        out.put((i, db.import_records(TuningRecord.from_dict(r) for r in recs)))


def test_concurrent_imports_add_each_record_once(
    db_location: Path | str, make_record: MakeRecord
) -> None:
    Database(db_location).close()
    lines = [make_record(config={"t": i}, trial=i).to_json() for i in range(40)]
    added = _spawn(_import, str(db_location), lines)
    assert sum(added) == 40
    with Database(db_location) as db:
        assert sorted(r.trial for r in db.records()) == list(range(40))


def test_a_newer_schema_is_refused(db_location: Path | str) -> None:
    Database(db_location).close()
    execute(db_location, "UPDATE meta SET value = '999' WHERE key = 'schema_version'")
    for readonly in (False, True):
        with pytest.raises(DatabaseError, match="schema version 999 is not supported") as info:
            Database(db_location, readonly=readonly)
        assert "\n" not in str(info.value)


def _tables(location: Path | str) -> set[str]:
    from sqlalchemy import inspect

    url = location if isinstance(location, str) else f"sqlite:///{location}"
    engine = create_engine(url)
    try:
        return set(inspect(engine).get_table_names())
    finally:
        engine.dispose()


def test_read_only_opening(db_location: Path | str, make_record: MakeRecord) -> None:
    if isinstance(db_location, Path):  # an empty file, as a server database starts
        db_location.parent.mkdir(parents=True)
        db_location.touch()
    with pytest.raises(DatabaseError, match="holds no tensortune tables"):
        Database(db_location, readonly=True)
    assert _tables(db_location) == set(), "a read-only open creates nothing"
    with Database(db_location) as db:
        db.commit_record(make_record())
    with Database(db_location, readonly=True) as ro:
        assert ro.records() == [make_record()]
        assert ro.best(W, T) == make_record()
        with pytest.raises(DatabaseError, match="open read-only"):
            ro.commit_record(make_record(config={"c": 2}))
    execute(
        db_location,
        "ALTER TABLE records DROP COLUMN space",
        "UPDATE meta SET value = '2' WHERE key = 'schema_version'",
    )
    with pytest.raises(DatabaseError, match=f"to upgrade it to version {SCHEMA_VERSION}"):
        Database(db_location, readonly=True)
    assert execute(db_location, "SELECT value FROM meta WHERE key = 'schema_version'")[0][0] == "2"


def test_the_server_itself_refuses_writes_when_read_only(postgres_url: str) -> None:
    Database(postgres_url).close()
    with (
        Database(postgres_url, readonly=True) as ro,
        pytest.raises(DBAPIError) as info,
        ro._begin() as conn,  # past the read-only check of every public method
    ):
        conn.exec_driver_sql("DELETE FROM records")
    assert "read-only transaction" in str(info.value)


def test_a_stuck_writer_is_waited_for_a_bounded_time(postgres_url: str) -> None:
    """A server lock held by another session (a stuck migration) is one clear error after
    the lock timeout, not a hang."""
    Database(postgres_url).close()
    engine = create_engine(postgres_url)
    try:
        with engine.begin() as holder:
            holder.exec_driver_sql(f"SELECT pg_advisory_xact_lock({SCHEMA_LOCK})")
            start = time.monotonic()
            with pytest.raises(DatabaseError) as info:
                Database(postgres_url, lock_timeout=0.5)
            assert time.monotonic() - start < 10
    finally:
        engine.dispose()
    message = str(info.value)
    assert "database is locked by another writer" in message and "0.5 s" in message
    assert "\n" not in message


def test_an_unreachable_server_is_one_clear_line(postgres_url: str, tmp_path: Path) -> None:
    url = f"postgresql+psycopg://tuner:s3cret@/tuning?host={tmp_path}&port=1"
    with pytest.raises(DatabaseError) as info:
        Database(url)
    message = str(info.value)
    assert message.startswith("cannot open tuning database 'postgresql+psycopg://tuner:***@")
    assert "s3cret" not in message and "\n" not in message


class _Conflict(Exception):
    """What a driver raises for a serialization failure (SQLSTATE 40001)."""

    sqlstate = "40001"


def test_transient_failures_are_retried_and_others_are_not(
    db: Database, make_record: MakeRecord, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = db._begin
    failures: list[Exception] = []

    def flaky(write: bool = False) -> Any:
        if failures:
            raise failures.pop()
        return real(write)

    monkeypatch.setattr(db, "_begin", flaky)
    failures[:] = [OperationalError("COMMIT", {}, _Conflict("could not serialize"))] * 3
    db.commit_record(make_record())
    assert not failures and len(db.records()) == 1
    failures[:] = [IntegrityError("INSERT", {}, Exception("duplicate key"))]
    with pytest.raises(DatabaseError, match="commit_record failed: duplicate key"):
        db.commit_record(make_record())
    assert len(db.records()) == 1
