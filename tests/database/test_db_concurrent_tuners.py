"""Issue 17 ("must show"): four tuners at once on one database, PostgreSQL or a SQLite file:
all four on the same workload, and two on one workload beside two on workloads of their own.

Afterwards every record each tuner committed is there, no config was measured twice for one
workload, target and space (the claims share the work), each tuner's reported trial count
matches the records, and no lock wait or write conflict reached a user. The tuners are tiny
(8x8 matmuls, a few trials, one thread) so the test fits a 2-core machine.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tensortune.database import Database
from tensortune.tuning.loop import CONFIRM

SHARED = "matmul:M=8,N=8,K=8"
SHARED_TRIALS = 4
OWN = ("matmul:M=8,N=16,K=8", "matmul:M=16,N=8,K=8")
OWN_TRIALS = 2
#: What a user must never see: the database layer retries these itself.
SURFACED = ("locked", "could not serialize", "deadlock", "lock timeout", "Traceback")

# A tuner through the Python API whose database says what it committed, once committed.
_TUNER = """
import json, sys
import tensortune as tt
from tensortune.database import Database
from tensortune.target import Target

class Logged(Database):
    def commit_record(self, rec):
        super().commit_record(rec)
        print("committed", json.dumps([rec.run_id, rec.config_key, rec.strategy]), flush=True)

spec, location, trials = sys.argv[1], sys.argv[2], int(sys.argv[3])
with Logged(location) as db:
    print("ready", flush=True)
    sys.stdin.readline()
    result = tt.tune(spec, trials=trials, strategy="grid", db=db, batch_size=2, timeout=60,
                     target=Target.detect(num_threads=1))
print("result", json.dumps(result.to_dict()), flush=True)
"""


def _api_tuner(location: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", _TUNER, SHARED, location, str(SHARED_TRIALS)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _cli_tuner(spec: str, location: str) -> subprocess.Popen[str]:
    args = ["--trials", str(OWN_TRIALS), "--strategy", "grid", "--threads", "1", "--json"]
    return subprocess.Popen(
        [sys.executable, "-m", "tensortune", "tune", spec, "--db", location, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _finish(proc: subprocess.Popen[str]) -> str:
    """The tuner's stdout, once it exited cleanly without showing a database failure."""
    out, err = proc.communicate(timeout=400)
    assert proc.returncode == 0, err[-2000:]
    for text in SURFACED:
        assert text not in err and text not in out, f"surfaced to the user: {err[-2000:]}"
    return out


@pytest.mark.slow
@pytest.mark.parametrize("shared", [4, 2], ids=["same-workload", "mixed-workloads"])
def test_four_tuners_at_once_lose_nothing_and_repeat_nothing(
    db_location: Path | str, shared: int
) -> None:
    """``shared`` tuners (Python API) on one workload, the rest (CLI) each on its own."""
    location = str(db_location)
    alone = OWN[: 4 - shared]
    api = [_api_tuner(location) for _ in range(shared)]
    procs = list(api)
    try:
        for proc in api:  # both open the fresh database at once, then tune at once
            assert proc.stdout is not None
            line = proc.stdout.readline()
            assert line.strip() == "ready", proc.stderr.read() if proc.stderr else line
        procs += [_cli_tuner(spec, location) for spec in alone]
        for proc in api:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        outputs = [_finish(proc) for proc in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()

    with Database(db_location, readonly=True) as db:
        stored = db.records()
    trials = [r for r in stored if r.strategy != CONFIRM]
    by_workload: dict[str, Counter[str]] = {}
    for r in trials:
        by_workload.setdefault(r.workload, Counter())[f"{r.target}|{r.space}|{r.config_key}"] += 1
    for workload, counts in by_workload.items():
        twice = [key for key, n in counts.items() if n > 1]
        assert not twice, f"{workload}: measured twice: {twice}"

    # the API tuners: every record each one committed is stored (as often as it committed it)
    stored_keys = Counter((r.run_id, r.config_key, r.strategy) for r in stored)
    shared_trials = len(by_workload.get("matmul:M=8,N=8,K=8", Counter()))
    for out in outputs[:shared]:
        lines = out.splitlines()
        committed = Counter(
            tuple(json.loads(line.split(" ", 1)[1]))
            for line in lines
            if line.startswith("committed ")
        )
        assert committed, "each tuner committed something (the confirm runs at least)"
        missing = committed - stored_keys
        assert not missing, f"committed but not stored: {missing}"
        result = json.loads(next(line for line in lines if line.startswith("result "))[7:])
        mine = sum(n for (_, _, strategy), n in committed.items() if strategy != CONFIRM)
        assert mine <= result["trials"] <= shared_trials  # its own and those it was told of
    assert shared_trials >= SHARED_TRIALS, "the shared budget was spent"

    # the CLI tuners: the trial count each reported is the records of its workload
    for spec, out in zip(alone, outputs[shared:], strict=True):
        result = json.loads(out.strip().splitlines()[-1])
        counted = sum(by_workload.get(result["workload"], Counter()).values())
        assert result["trials"] == counted == OWN_TRIALS, (spec, result)
