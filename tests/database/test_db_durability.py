"""Crash safety and multi-process use of the tuning database, on SQLite and PostgreSQL."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

from tensortune.database import Database

# Commits records forever, printing each trial number only after commit_record returned.
_WRITER = """
import sys
from tensortune.database import Database, TuningRecord
db = Database(sys.argv[1])
run, count = sys.argv[2], int(sys.argv[3])
for trial in range(count):
    db.commit_record(TuningRecord(
        workload="conv2d(1,64,56,56)", target="cpu", config={"tile": trial, "run": run},
        seconds=1e-4 * (trial + 1), trial=trial, run_id=run, strategy="durability-test",
    ))
    print(trial, flush=True)
"""


def _writer(location: Path | str, run: str, count: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(location), run, str(count)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _integrity(path: Path) -> str:
    con = sqlite3.connect(path)
    try:
        return con.execute("PRAGMA integrity_check").fetchone()[0]
    finally:
        con.close()


def test_sigkill_loses_no_committed_record(db_location: Path | str) -> None:
    kill_after = 150
    proc = _writer(db_location, "killed", 10**9)
    assert proc.stdout is not None
    reported: list[int] = []
    try:
        while len(reported) < kill_after:
            line = proc.stdout.readline()
            assert line, f"writer died early: {proc.stderr.read() if proc.stderr else ''}"
            reported.append(int(line))
        os.kill(proc.pid, signal.SIGKILL)  # mid-loop, likely inside a transaction
        proc.wait(timeout=10)
        reported += [int(line) for line in proc.stdout.read().split()]  # printed before death
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL
    if isinstance(db_location, Path):
        assert _integrity(db_location) == "ok"
    with Database(db_location) as db:
        stored = [r.trial for r in db.records(run_id="killed")]
    assert len(stored) >= len(reported) >= kill_after
    assert set(reported) <= set(stored)
    assert stored == list(range(len(stored)))  # in order, no holes


def test_concurrent_writer_processes(db_location: Path | str) -> None:
    count = 60
    procs = [_writer(db_location, f"run{i}", count) for i in range(3)]
    for proc in procs:
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
    with Database(db_location) as db:
        for i in range(3):
            assert [r.trial for r in db.records(run_id=f"run{i}")] == list(range(count))
        assert len(db.measured_keys("conv2d(1,64,56,56)", "cpu")) == 3 * count
