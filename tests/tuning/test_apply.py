"""`compile` from the database only reads it: it creates nothing and never waits for a tuner."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import numpy as np

import tensortune as tt
from tensortune.database import open_database

SPEC = "matmul:M=8,N=16,K=8"


def test_compiling_from_a_missing_database_creates_nothing(tmp_path: Path, target) -> None:
    missing = tmp_path / "nowhere" / "tuning.db"
    kernel = tt.compile(SPEC, db=missing, target=target)
    wl = tt.workload(SPEC)
    inputs = wl.random_inputs(0)
    np.testing.assert_allclose(kernel(*inputs), wl.reference(inputs), rtol=1e-4, atol=1e-5)
    assert not missing.parent.exists()


def test_compiling_does_not_wait_for_a_writer(tmp_path: Path, target) -> None:
    path = tmp_path / "tuning.db"
    with open_database(path):
        pass  # the file and its tables exist
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")  # a tuner in the middle of a commit
    try:
        start = time.perf_counter()
        tt.compile(SPEC, db=path, target=target)
        assert time.perf_counter() - start < 4.0  # a writer would wait the 5 s lock timeout
    finally:
        writer.execute("ROLLBACK")
        writer.close()
