"""Shared by the CLI tests: a real tiny tuning run, a hand-made database, a subprocess runner."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tensortune.database import DB_ENV_VAR, TuningRecord, open_database

SPEC = "matmul:M=8,N=16,K=8"
TRIALS = 4
LONG_SPEC = (
    "conv2d:N=1,C=64,H=56,W=56,K=64,R=3,S=3,stride=1,pad=1,dilation=1,groups=1,layout=NCHW,"
    "epilogue=bias+relu"
)


def run_cli(
    *args: str, env: dict[str, str] | None = None, module: str = "tensortune", timeout: int = 300
) -> subprocess.CompletedProcess:
    """``python -m tensortune ARGS`` in a fresh process, as a user or a script would call it."""
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


@pytest.fixture(scope="session")
def tuned(tmp_path_factory) -> tuple[Path, dict]:
    """One real tuning run (random search, 4 trials) into the *default* database, which the
    environment points at a temporary file; returns (db path, the --json result)."""
    db = tmp_path_factory.mktemp("cli") / "tuning.db"
    proc = run_cli(
        "tune", SPEC, "--trials", str(TRIALS), "--strategy", "random", "--seed", "3", "--json",
        env={DB_ENV_VAR: str(db)},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    last = proc.stdout.strip().splitlines()[-1]
    return db, json.loads(last)


@pytest.fixture
def use_db(monkeypatch, tuned) -> Path:
    """Point the default database at the tuned one, as for a user with $TENSORTUNE_DB set."""
    monkeypatch.setenv(DB_ENV_VAR, str(tuned[0]))
    return tuned[0]


def write_records(db: Path, rows: list[tuple], target: str = "avx2-2t") -> Path:
    """Commit ``(workload, strategy, run_id, trial, seconds, error)`` rows, nothing measured."""
    with open_database(db) as database:
        for workload, strategy, run_id, trial, seconds, error in rows:
            database.commit_record(
                TuningRecord(
                    workload=workload, target=target, config={"t": trial}, seconds=seconds,
                    error=error, error_msg=error, strategy=strategy, trial=trial, run_id=run_id,
                )
            )  # fmt: skip
    return db


@pytest.fixture
def mixed_db(tmp_path) -> Path:
    """Two workloads, two strategies, failures of several kinds (no measuring needed)."""
    return write_records(
        tmp_path / "mixed.db",
        [
            ("matmul:M=8,N=16,K=8", "random", "r1", 1, 2e-6, None),
            ("matmul:M=8,N=16,K=8", "random", "r1", 2, None, "crash"),
            ("matmul:M=8,N=16,K=8", "random", "r1", 3, 1e-6, None),
            ("matmul:M=8,N=16,K=8", "grid", "g1", 1, None, "compile"),
            ("matmul:M=8,N=16,K=8", "grid", "g1", 2, 3e-6, None),
            ("softmax:rows=4,cols=8", "annealing", "a1", 1, None, "timeout"),
        ],
    )
