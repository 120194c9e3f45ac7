"""A tuning database is shared, so it is untrusted input and a contended resource (issue 11).

Read-only use never takes the write lock and works on read-only media (item 6); a record that
is malformed or hostile is refused on import, skipped with a warning on read, and printed
escaped (item 7); concurrent tuners claim configs so each is measured once (item 8).
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import multiprocessing
import os
import shutil
import sqlite3
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tensortune import cli
from tensortune.database import Database, TuningRecord
from tensortune.database.record import MAX_ERROR_MSG_CHARS, MAX_RECORD_CHARS
from tensortune.database.sql import LOCK_TIMEOUT_ENV
from tensortune.errors import DatabaseError, RecordWarning
from tensortune.space.registry import design_space
from tensortune.target import Target
from tensortune.workload import workload

SPEC = "matmul:M=8,N=16,K=8"
WORKLOAD = workload(SPEC).name
TARGET = str(Target.detect())
CONFIG = design_space(workload(SPEC), Target.detect()).default  # a record compile accepts
KEY = '{"tile":8}'


def _record(**overrides: Any) -> TuningRecord:
    fields: dict[str, Any] = {
        "workload": WORKLOAD,
        "target": TARGET,
        "config": CONFIG,
        "seconds": 1e-3,
        "strategy": "random",
        "trial": 1,
        "created_at": 1_700_000_000.0,
    }
    return TuningRecord(**{**fields, **overrides})


def _cli(*args: str, timeout: float = 120, env: dict[str, str] | None = None):
    return subprocess.run(
        [sys.executable, "-m", "tensortune.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


@pytest.fixture
def tuned_db(tmp_path: Path) -> Path:
    """A database holding one successful record of SPEC on this machine's target."""
    path = tmp_path / "tuning.db"
    with Database(path) as db:
        db.commit_record(_record())
    return path


# -- item 8 (database half): claims --------------------------------------------------------------


def _claim_all(path: str, owner: str, keys: list[str], start: Any, out: Any) -> None:
    with Database(path) as db:
        start.wait()
        out.put((owner, [db.claim(WORKLOAD, TARGET, k, owner=owner, ttl=60) for k in keys]))


def test_two_processes_claiming_the_same_configs_never_both_win(tmp_path: Path) -> None:
    path = str(tmp_path / "tuning.db")
    Database(path).close()
    keys = [json.dumps({"tile": i}) for i in range(30)]
    ctx = multiprocessing.get_context("spawn")
    start, out = ctx.Barrier(2), ctx.Queue()
    procs = [ctx.Process(target=_claim_all, args=(path, o, keys, start, out)) for o in "ab"]
    for p in procs:
        p.start()
    results = dict(out.get(timeout=120) for _ in procs)
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    for i in range(len(keys)):
        assert results["a"][i] != results["b"][i], f"config {i}: exactly one claimant wins"


def test_a_claim_is_exclusive_until_it_expires_or_is_released(tmp_path: Path) -> None:
    with Database(tmp_path / "tuning.db") as db:
        assert db.claim(WORKLOAD, TARGET, KEY, owner="a", ttl=0.2)
        assert not db.claim(WORKLOAD, TARGET, KEY, owner="b", ttl=60)
        assert db.claim(WORKLOAD, TARGET, KEY, owner="a", ttl=0.2), "the holder renews"
        assert db.claim(WORKLOAD, "other-target", KEY, owner="b", ttl=60), "claims are per key"
        time.sleep(0.3)
        assert db.claim(WORKLOAD, TARGET, KEY, owner="b", ttl=60), "an expired claim is free"
        db.release(WORKLOAD, TARGET, KEY, owner="a")  # a lost it: releases nothing
        assert not db.claim(WORKLOAD, TARGET, KEY, owner="a", ttl=60)
        db.release(WORKLOAD, TARGET, KEY, owner="b")
        assert db.claim(WORKLOAD, TARGET, KEY, owner="a", ttl=60)
        with pytest.raises(DatabaseError, match="ttl"):
            db.claim(WORKLOAD, TARGET, KEY, owner="a", ttl=float("nan"))


def test_an_old_database_gains_the_claims_table(tmp_path: Path) -> None:
    path = tmp_path / "tuning.db"
    Database(path).close()
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        conn.execute("DROP TABLE claims")
    with Database(path) as db:
        assert db.claim(WORKLOAD, TARGET, KEY, owner="a", ttl=60)


# -- item 6: read-only use, bounded lock waits, causes named ----------------------------------


def _read_only_mount_works(folder: Path) -> bool:
    probe = 'mount --bind -o ro "$0" "$0" && ! touch "$0/probe" 2>/dev/null'
    if shutil.which("unshare") is None:
        return False
    proc = subprocess.run(["unshare", "-m", "sh", "-c", probe, str(folder)], capture_output=True)
    return proc.returncode == 0


def _cli_on_read_only_media(folder: Path, *args: str) -> subprocess.CompletedProcess:
    """The CLI with ``folder`` bind-mounted read-only over itself, in a private mount namespace
    (so even root, which ignores file permissions, cannot write there)."""
    script = 'mount --bind -o ro "$0" "$0" && exec "$@"'
    cmd = [sys.executable, "-m", "tensortune.cli", *args]
    return subprocess.run(
        ["unshare", "-m", "sh", "-c", script, str(folder), *cmd],
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_read_only_commands_work_on_read_only_media(tuned_db: Path) -> None:
    folder = tuned_db.parent
    if not _read_only_mount_works(folder):
        pytest.skip("needs unshare and CAP_SYS_ADMIN to mount the database read-only")
    before = sorted(p.name for p in folder.iterdir())
    db = ["--db", str(tuned_db)]
    out = {}
    for args in (["history"], ["best", SPEC, "--json"], ["compile", SPEC]):
        proc = _cli_on_read_only_media(folder, *args, *db)
        assert proc.returncode == 0, (args, proc.stderr)
        out[args[0]] = proc.stdout
    assert json.loads(out["best"])["config"] == CONFIG
    assert "tuned schedule" in out["compile"]
    proc = _cli_on_read_only_media(folder, "tune", SPEC, "--trials", "1", *db)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1, proc.stderr
    assert f"no write permission for '{tuned_db}'" in proc.stderr
    assert "delete" not in proc.stderr
    assert sorted(p.name for p in folder.iterdir()) == before


@pytest.fixture
def write_locked(tuned_db: Path):
    """Another process holding the database's write lock (a tuner mid-commit, or stuck)."""
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sqlite3, sys\n"
            f"c = sqlite3.connect({str(tuned_db)!r}, isolation_level=None)\n"
            "c.execute('BEGIN IMMEDIATE')\n"
            "print('locked', flush=True)\n"
            "sys.stdin.read()\n",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
    yield holder
    assert holder.stdin is not None
    holder.stdin.close()
    holder.wait(timeout=60)


def test_queries_do_not_wait_for_a_writer(tuned_db: Path, write_locked: Any) -> None:
    with Database(tuned_db, readonly=True) as db:
        assert db.best(WORKLOAD, TARGET) == _record()
    for args in (["history"], ["best", SPEC]):
        start = time.monotonic()
        proc = _cli(*args, "--db", str(tuned_db), timeout=60)
        assert proc.returncode == 0, proc.stderr
        assert time.monotonic() - start < 20, "the old code waited 30 s for the write lock"


def test_a_writer_waits_a_bounded_time_and_names_the_lock_holder(
    tuned_db: Path, write_locked: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(LOCK_TIMEOUT_ENV, "0.5")
    start = time.monotonic()
    with pytest.raises(DatabaseError) as info:
        Database(tuned_db)
    assert time.monotonic() - start < 5
    message = str(info.value)
    assert "database is locked by another writer (another tensortune tune?)" in message
    assert f"pid {write_locked.pid}" in message
    assert LOCK_TIMEOUT_ENV in message


def test_open_errors_name_the_cause(tmp_path: Path) -> None:
    missing_dir = tmp_path / "no" / "such" / "tuning.db"
    with pytest.raises(DatabaseError, match=f"directory '{missing_dir.parent}' does not exist"):
        Database(missing_dir, readonly=True)
    assert not (tmp_path / "no").exists(), "a read-only open creates nothing"
    missing = tmp_path / "tuning.db"
    with pytest.raises(DatabaseError, match=f"'{missing}' does not exist"):
        Database(missing, readonly=True)
    assert not missing.exists()
    missing.write_text("not a database\n" * 100)
    for readonly in (True, False):
        with pytest.raises(DatabaseError) as info:
            Database(missing, readonly=readonly)
        assert "not a SQLite database or is corrupt; move it away" in str(info.value)
        assert "delete" not in str(info.value)


# -- item 7: hostile or malformed record text ----------------------------------------------------


def _jsonl(tmp_path: Path, *lines: str) -> Path:
    path = tmp_path / "records.jsonl"
    path.write_text("".join(line + "\n" for line in lines))
    return path


def _run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli.main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_markup_in_records_is_printed_as_text(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hostile = _record(strategy="[/oops]", run_id="[bold red]x", config={"tile": "[/]"})
    db_path = tmp_path / "tuning.db"
    with Database(db_path) as db:
        assert db.import_jsonl(_jsonl(tmp_path, hostile.to_json())) == 1
    db = ["--db", str(db_path)]
    code, out, err = _run_cli(capsys, "history", *db)
    assert code == 0, err
    assert "[/oops]" in out and "tile=[/]" in out
    code, out, err = _run_cli(capsys, "best", SPEC, *db)  # a config of no knob is not the best
    assert code == 1 and "[bold red]x" in err and "tile" in err
    valid = _record(strategy="[/oops]", run_id="[bold red]x")
    with Database(db_path) as database:
        database.commit_record(valid)
    code, out, err = _run_cli(capsys, "best", SPEC, *db)
    assert code == 0, err
    assert "found by [/oops] search (run [bold red]x)" in out


def test_math_text_in_a_strategy_does_not_break_the_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("matplotlib")
    db_path = tmp_path / "tuning.db"
    with Database(db_path) as db:
        db.commit_record(_record(strategy="$\\oops{$"))
    code, _, err = _run_cli(capsys, "report", "--db", str(db_path), "-o", str(tmp_path / "r.html"))
    assert code == 0, err


@pytest.mark.parametrize(
    ("field", "value", "problem"),
    [
        ("trial", "x", "'trial' must be an integer"),
        ("trial", 1.5, "'trial' must be an integer"),
        ("strategy", 7, "'strategy' must be a string"),
        ("workload", "matmul\x1b[2J", "'workload' must be printable"),
        ("run_id", "r" * 5000, "'run_id' must be printable and at most"),
        ("config", {"tile": "\x1b]0;pwned\x07"}, "'config' holds a non-printable string"),
        ("config", {"a": json.loads("[" * 40 + "]" * 40)}, "nests deeper than"),
        ("created_at", "yesterday", "'created_at' must be a finite number"),
    ],
    ids=[
        "trial-text",
        "trial-float",
        "strategy-int",
        "workload-escape",
        "run_id-long",
        "config-escape",
        "config-deep",
        "created_at-text",
    ],
)
def test_a_malformed_record_is_refused_on_import(
    tmp_path: Path, field: str, value: Any, problem: str
) -> None:
    line = json.dumps({**_record().to_dict(), field: value})
    with Database(tmp_path / "tuning.db") as db:
        with pytest.raises(DatabaseError, match=f"records.jsonl:2: .*{problem}"):
            db.import_jsonl(_jsonl(tmp_path, _record(trial=0).to_json(), line))
        assert db.records() == [], "a bad line adds nothing"


def test_a_deeply_nested_json_line_is_a_clear_error(tmp_path: Path) -> None:
    depth = 100_000
    line = '{"workload":"w","target":"t","config":' + "[" * depth + "]" * depth + "}"
    with (
        Database(tmp_path / "tuning.db") as db,
        pytest.raises(DatabaseError, match=r"records\.jsonl:1: tuning record nests too deeply"),
    ):
        db.import_jsonl(_jsonl(tmp_path, line))


@pytest.mark.parametrize(
    ("column", "value"),
    [
        ("trial", "x"),
        ("strategy", "bad\nline"),
        ("trace", "[" * 100_000 + "]" * 100_000),
        ("config", "not json"),
        ("seconds", "fast"),
    ],
    ids=["trial", "strategy", "deep-trace", "config", "seconds"],
)
def test_a_malformed_stored_record_is_skipped_with_one_warning(
    tuned_db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], column: str, value: str
) -> None:
    """A row another program wrote (a shared server, an older or newer tensortune)."""
    with Database(tuned_db) as db:
        db.commit_record(_record(seconds=2e-3, trial=2))
    with contextlib.closing(sqlite3.connect(tuned_db)) as conn, conn:
        conn.execute(f"UPDATE records SET {column} = ? WHERE id = 1", (value,))
    with Database(tuned_db, readonly=True) as db:
        with pytest.warns(RecordWarning, match="skipping record 1: ") as caught:
            assert [r.trial for r in db.records()] == [2]
        assert len(caught) == 1
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RecordWarning)
            assert db.best(WORKLOAD, TARGET).seconds == 2e-3
    out_html = str(tmp_path / "report.html")
    for args in (["history"], ["best", SPEC], ["report", "-o", out_html]):
        if args[0] == "report" and not _has("matplotlib"):
            continue
        code, _, err = _run_cli(capsys, *args, "--db", str(tuned_db))
        assert code == 0, err
        assert err.startswith("warning: ") and "skipping record 1" in err
        assert "Traceback" not in err


def _has(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


# -- fuzz: JSON Lines records ----------------------------------------------------------------------

_text = st.text(st.characters(blacklist_categories=()), max_size=12)  # surrogates too
_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | _text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_text, inner, max_size=4),
    max_leaves=20,
)
_FIELDS = [f.name for f in dataclasses.fields(TuningRecord)]
_near_valid = st.dictionaries(st.sampled_from([*_FIELDS, "extra"]), _json, max_size=3).map(
    lambda changes: {**_record().to_dict(), **changes}
)
_anything = st.dictionaries(st.sampled_from([*_FIELDS, "extra"]) | _text, _json, max_size=8)
_lines = st.one_of(
    _near_valid.map(json.dumps),
    _anything.map(json.dumps),
    _json.map(json.dumps),
    _text,
    st.integers(1, 3000).map(lambda n: '{"config":' + "[" * n + "]" * n + "}"),
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines=st.lists(_lines, min_size=1, max_size=3))
def test_fuzzed_json_lines_give_clear_errors_only(lines: list[str]) -> None:
    """Whatever a JSON Lines file holds, import either adds valid records or raises a
    DatabaseError, and what it adds reads back unchanged without warnings."""
    with Database("sqlite://") as db:
        try:
            added = db.import_jsonl(io.StringIO("\n".join(lines) + "\n"))
        except DatabaseError:
            assert db.records() == [], "a bad line adds nothing"
            return
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            stored = db.records()
        assert len(stored) == added
        for rec in stored:
            assert TuningRecord.from_json(rec.to_json()) == rec


def test_an_oversized_json_line_is_refused_without_reading_it_whole(tmp_path: Path) -> None:
    line = json.dumps({**_record().to_dict(), "error_msg": "x" * MAX_RECORD_CHARS})
    with (
        Database(tmp_path / "tuning.db") as db,
        pytest.raises(DatabaseError, match=r"records\.jsonl:1: .* is longer than"),
    ):
        db.import_jsonl(_jsonl(tmp_path, line))


def test_free_text_is_normalised_so_it_can_always_be_stored(tmp_path: Path) -> None:
    """A compiler log is bounded, and a lone surrogate (a JSON escape, an undecodable path)
    becomes '?' instead of failing the commit."""
    line = json.dumps(
        {**_record(seconds=None, error="compile").to_dict(), "error_msg": "\ud800" + "x" * 10**6}
    )
    with Database(tmp_path / "tuning.db") as db:
        assert db.import_jsonl(_jsonl(tmp_path, line)) == 1
        (rec,) = db.records()
    assert rec.error_msg is not None and rec.error_msg.startswith("?x")
    assert len(rec.error_msg) == MAX_ERROR_MSG_CHARS and rec.error_msg.endswith("(truncated)")
