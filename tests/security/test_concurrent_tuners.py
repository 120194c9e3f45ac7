"""Issue 11, item 8: tuners sharing a database share the work and never time at once.

Two tuners on one SQLite file measure each config once between them (a claimed config is left
to its claimant), and a process holding the timing lock keeps every other tensortune process
on the machine from timing, whatever kernel cache each of them uses.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path

from tensortune.database import open_database
from tensortune.measure.runner import _measure_lock
from tensortune.tuning.loop import CONFIRM

SPEC = "matmul:M=8,N=8,K=8"
TRIALS = 8
HOLD_THE_LOCK = """
import sys
from tensortune.measure.runner import _measure_lock
with _measure_lock():
    print("held", flush=True)
    sys.stdin.read()
"""


def test_timing_lock_is_exclusive_across_processes(tmp_path: Path):
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_THE_LOCK],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "TENSORTUNE_CACHE_DIR": str(tmp_path / "another-cache")},
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        acquired = threading.Event()

        def time_something() -> None:
            with _measure_lock():
                acquired.set()

        thread = threading.Thread(target=time_something)
        thread.start()
        assert not acquired.wait(1.0), "timed while another process held the timing lock"
        assert holder.stdin is not None
        holder.stdin.close()
        assert holder.wait(30) == 0
        assert acquired.wait(60), "the lock was not free once its holder let go"
        thread.join()
    finally:
        holder.kill()
        holder.wait()


def test_two_tuners_on_one_database_measure_each_config_once(tmp_path: Path):
    db = tmp_path / "shared.db"
    code = (  # both ready, then both go: they ask for the same grid configs at the same time
        "import sys, tensortune as tt\n"
        "from tensortune.target import Target\n"
        "target = Target.detect(num_threads=1)\n"
        "print('ready', flush=True)\n"
        "sys.stdin.readline()\n"
        f"tt.tune({SPEC!r}, trials={TRIALS}, strategy='grid', db={str(db)!r}, batch_size=2,\n"
        "        target=target, timeout=60)\n"
    )
    with open_database(db):  # create the schema before the race
        pass
    tuners = [
        subprocess.Popen(
            [sys.executable, "-c", code],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    try:
        for tuner in tuners:
            assert tuner.stdout is not None and tuner.stdout.readline().strip() == "ready"
        for tuner in tuners:
            assert tuner.stdin is not None
            tuner.stdin.write("go\n")
            tuner.stdin.flush()
        for tuner in tuners:
            _, stderr = tuner.communicate(timeout=300)
            assert tuner.returncode == 0, stderr[-2000:]
    finally:
        for tuner in tuners:
            tuner.kill()
            tuner.wait()
    with open_database(db) as database:
        trials = [r for r in database.records() if r.strategy != CONFIRM]
    counts = Counter(r.config_key for r in trials)
    assert max(counts.values()) == 1, f"configs measured twice: {counts.most_common(3)}"
    assert len(counts) >= TRIALS
    assert len({r.run_id for r in trials}) == 2, "both tuners did part of the work"
