"""Shared fixtures: a fresh SQLite database per test and a terse record factory."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tensortune.database import SQLDatabase, TuningRecord

MakeRecord = Callable[..., TuningRecord]


def record(**overrides: Any) -> TuningRecord:
    """A successful record with every field set; tests override only what they check."""
    fields: dict[str, Any] = {
        "workload": "matmul(64,64,64,float32)",
        "target": "cpu-x86_64-avx2",
        "config": {"tile_i": 8, "tile_j": 16, "unroll": True},
        "trace": [["split", "i", [8]], ["reorder", ["i0", "j0", "i1", "j1"]]],
        "seconds": 1.5e-3,
        "spread": [1.5e-3, 1.6e-3, 1.55e-3],
        "strategy": "random",
        "trial": 0,
        "tuning_seconds": 0.25,
        "created_at": 1_700_000_000.5,
        "run_id": "run-a",
        "machine": {"hostname": "box", "cpu": "Test CPU", "loadavg": [0.1, 0.2, 0.3]},
        "version": "0.1.0",
    }
    fields.update(overrides)
    return TuningRecord(**fields)


@pytest.fixture
def make_record() -> MakeRecord:
    return record


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "nested" / "dir" / "tuning.db"


@pytest.fixture
def db(db_path: Path) -> Iterator[SQLDatabase]:
    with SQLDatabase(db_path) as database:
        yield database
