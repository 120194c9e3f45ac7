"""Database behaviour: storage round trip, dedupe, ranking, JSONL and bad files."""

from __future__ import annotations

import io
import os
import sqlite3
import threading
from pathlib import Path

import pytest

from tensortune.database import (
    DB_ENV_VAR,
    Database,
    default_db_path,
    open_database,
    printable_location,
)
from tensortune.database.sql import SCHEMA_VERSION
from tensortune.errors import DatabaseError

from .conftest import MakeRecord

W, T = "matmul(64,64,64,float32)", "cpu-x86_64-avx2"


def test_round_trip_survives_reopen(
    db: Database, db_location: Path | str, make_record: MakeRecord
) -> None:
    recs = [make_record(config={"tile": i}, trial=i, seconds=1e-3 * (i + 1)) for i in range(3)] + [
        make_record(config={"tile": 9}, seconds=None, error="crash", error_msg="SIGSEGV")
    ]
    for rec in recs:
        db.commit_record(rec)
    db.close()
    with Database(db_location) as again:
        assert again.records() == recs


def test_has_and_measured_keys(db: Database, make_record: MakeRecord) -> None:
    ok = make_record(config={"tile": 4})
    failed = make_record(config={"tile": 8}, seconds=None, error="compile")
    db.commit_record(ok)
    db.commit_record(failed)
    db.commit_record(ok)  # re-measurement of the same config
    assert db.has(W, T, ok.config_key)
    assert db.has(W, T, failed.config_key)  # failures count as measured
    assert not db.has(W, T, '{"tile":16}')
    assert not db.has(W, "other-target", ok.config_key)
    assert db.measured_keys(W, T) == {ok.config_key, failed.config_key}
    assert db.measured_keys("other", T) == set()
    assert not db.has(W, T, ok.config_key, version="9.9")


def test_top_k_orders_by_time_then_config_key(db: Database, make_record: MakeRecord):
    timings = {"a": 3.0, "b": 1.0, "c": 2.0, "d": 1.0, "e": 5.0}
    for name, seconds in timings.items():
        db.commit_record(make_record(config={"k": name}, seconds=seconds))
    db.commit_record(make_record(config={"k": "a"}, seconds=0.5))  # a re-measured faster
    db.commit_record(make_record(config={"k": "z"}, seconds=None, error="wrong_result"))
    top = db.top_k(W, T, k=4)
    assert [(r.config["k"], r.seconds) for r in top] == [
        ("a", 0.5),  # the faster of its two measurements
        ("b", 1.0),  # b and d tie: broken by config_key
        ("d", 1.0),
        ("c", 2.0),
    ]
    assert len(db.top_k(W, T, k=100)) == 5  # distinct successful configs only
    assert db.top_k(W, T, k=0) == []
    best = db.best(W, T)
    assert best is not None and best.config == {"k": "a"}


def test_a_config_ranks_by_its_median_measurement(db: Database, make_record: MakeRecord):
    """One lucky measurement does not crown a config that its re-measurements say is slower."""
    for seconds in (0.5, 2.0, 2.2):
        db.commit_record(make_record(config={"k": "lucky"}, seconds=seconds))
    for seconds in (1.0, 1.1, 0.9):
        db.commit_record(make_record(config={"k": "steady"}, seconds=seconds))
    top = db.top_k(W, T, k=2)
    assert [(r.config["k"], r.seconds) for r in top] == [("steady", 1.0), ("lucky", 2.0)]


def test_queries_never_cross_targets(db: Database, make_record: MakeRecord) -> None:
    db.commit_record(make_record(target="fast-box", seconds=1e-6))
    db.commit_record(make_record(target=T, seconds=1e-3, version="0.0.9"))
    best = db.best(W, T)
    assert best is not None and best.target == T and best.version == "0.0.9"
    assert db.best(W, T, version="0.1.0") is None
    assert db.best("unmeasured", T) is None
    assert db.workloads() == [W]
    assert db.workloads(target="nowhere") == []


def test_records_filters_keep_insertion_order(db: Database, make_record: MakeRecord):
    recs = [
        make_record(workload=w, run_id=run, trial=i, created_at=1e9 - i)
        for i, (w, run) in enumerate([("w2", "r1"), ("w1", "r2"), ("w2", "r2"), ("w1", "r1")])
    ]
    for rec in recs:
        db.commit_record(rec)
    assert [r.trial for r in db.records()] == [0, 1, 2, 3]
    assert [r.trial for r in db.records(workload="w2")] == [0, 2]
    assert [r.trial for r in db.records(run_id="r2")] == [1, 2]
    assert [r.trial for r in db.records("w1", T, "r1")] == [3]
    assert db.workloads() == ["w1", "w2"]


def test_jsonl_round_trip_and_duplicates(db: Database, tmp_path: Path, make_record: MakeRecord):
    recs = [make_record(config={"t": i}, trial=i) for i in range(5)]
    recs.append(make_record(config={"t": 5}, seconds=None, error="timeout", error_msg="10 s"))
    for rec in recs:
        db.commit_record(rec)
    path = tmp_path / "out" / "dump.jsonl"
    assert db.export_jsonl(path) == 6
    assert len(path.read_text().splitlines()) == 6

    with Database(tmp_path / "other.db") as other:
        assert other.import_jsonl(path) == 6
        assert other.records() == recs
        assert other.import_jsonl(path) == 0  # everything already present
        extra = make_record(config={"t": 99})
        buf = io.StringIO(path.read_text() + "\n" + extra.to_json() + "\n" + extra.to_json())
        assert other.import_jsonl(buf) == 1  # blank line ignored, in-file duplicate skipped
        assert other.records() == [*recs, extra]
    assert db.import_records(db.records()) == 0


def test_import_bad_line_adds_nothing(db: Database, tmp_path: Path, make_record: MakeRecord):
    path = tmp_path / "bad.jsonl"
    path.write_text(make_record().to_json() + "\n{oops\n")
    with pytest.raises(DatabaseError, match=r"bad\.jsonl:2: "):
        db.import_jsonl(path)
    assert db.records() == []
    with pytest.raises(DatabaseError, match="cannot open JSONL file"):
        db.import_jsonl(tmp_path / "missing.jsonl")


@pytest.mark.parametrize(
    "content",
    [os.urandom(4096), b"this is a text file, not a database\n" * 20],
    ids=["random-bytes", "text"],
)
def test_not_a_database_is_one_clear_line(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "junk.db"
    path.write_bytes(content)
    with pytest.raises(DatabaseError) as info:
        Database(path)
    msg = str(info.value)
    assert "\n" not in msg
    assert msg == (
        f"cannot open tuning database '{path}': file is not a SQLite database or is corrupt; "
        "move it away or pass another path"
    )
    assert path.read_bytes() == content  # the file is left untouched


def _sqlite(path: Path, *statements: str) -> None:
    con = sqlite3.connect(path)
    with con:
        for sql in statements:
            con.execute(sql)
    con.close()


def test_incompatible_schema_is_refused(db_path: Path) -> None:
    Database(db_path).close()
    _sqlite(db_path, "UPDATE meta SET value = '999' WHERE key = 'schema_version'")
    with pytest.raises(DatabaseError, match=r"schema version 999 is not supported") as info:
        Database(db_path)
    assert str(db_path) in str(info.value) and "\n" not in str(info.value)


def test_foreign_records_table_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "foreign.db"
    _sqlite(path, "CREATE TABLE records (x INTEGER)")
    with pytest.raises(DatabaseError, match="not a tensortune database"):
        Database(path)


def test_unopenable_location(tmp_path: Path) -> None:
    (tmp_path / "adir.db").mkdir()
    with pytest.raises(DatabaseError, match=r"cannot open tuning database '.*adir\.db'"):
        Database(tmp_path / "adir.db")
    with pytest.raises(DatabaseError, match="nosuchdialect"):
        Database("nosuchdialect://host/db")


def test_closed_database_raises(db: Database) -> None:
    db.close()
    db.close()  # idempotent
    with pytest.raises(DatabaseError, match="is closed"):
        db.records()


def test_sqlite_file_settings(db_path: Path, make_record: MakeRecord) -> None:
    with Database(db_path) as db:
        db.commit_record(make_record())
    con = sqlite3.connect(db_path)
    try:
        assert con.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        version = con.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        assert version == (str(SCHEMA_VERSION),)
        info = con.execute("SELECT name FROM pragma_index_info('ix_records_config')")
        indexed = {name for (name,) in info}
        assert indexed == {"workload", "target", "config_key"}
    finally:
        con.close()


def test_in_memory_url_shares_one_database(make_record: MakeRecord) -> None:
    with Database("sqlite://") as mem:
        thread = threading.Thread(target=mem.commit_record, args=(make_record(),))
        thread.start()
        thread.join()
        assert len(mem.records()) == 1
        assert mem.location == ":memory:"


def test_open_database_resolution(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DB_ENV_VAR, str(tmp_path / "env.db"))
    assert default_db_path() == tmp_path / "env.db"
    with open_database() as db:
        assert isinstance(db, Database) and Path(db.location) == tmp_path / "env.db"
        assert open_database(db) is db
    monkeypatch.setenv(DB_ENV_VAR, "sqlite:///" + str(tmp_path / "url.db"))
    assert default_db_path() == "sqlite:///" + str(tmp_path / "url.db")
    monkeypatch.delenv(DB_ENV_VAR)
    default = default_db_path()
    assert isinstance(default, Path) and default.parts[-2:] == ("tensortune", "tuning.db")


@pytest.mark.parametrize(
    ("location", "shown"),
    [
        ("runs/tuning.db", "runs/tuning.db"),
        ("postgresql://tuner:s3cret@db.example/tuning", "postgresql://tuner:***@db.example/tuning"),
        ("postgresql://tuner@db.example/tuning", "postgresql://tuner@db.example/tuning"),
    ],
)
def test_printable_location_masks_passwords(location: str, shown: str) -> None:
    assert printable_location(location) == shown
