"""Shared fixtures: a fresh database per test and a terse record factory.

``db`` is a SQLite file; when ``TENSORTUNE_TEST_DB_URL`` names a server (e.g.
``postgresql+psycopg2://user@host/db``), every ``db`` test also runs against that server, whose
tensortune tables are dropped first so each test starts empty.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tensortune.database import SQLDatabase, TuningRecord

SERVER_URL = os.environ.get("TENSORTUNE_TEST_DB_URL")

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


@pytest.fixture(params=["sqlite", "server"] if SERVER_URL else ["sqlite"])
def db_location(request: pytest.FixtureRequest, db_path: Path) -> Path | str:
    """Where the test's database lives: a SQLite file, or the server with its tables dropped."""
    if request.param == "sqlite":
        return db_path
    from sqlalchemy import MetaData, create_engine

    engine = create_engine(SERVER_URL)
    meta = MetaData()
    meta.reflect(engine, only=lambda name, _: name in ("records", "meta", "claims"))
    meta.drop_all(engine)
    engine.dispose()
    return SERVER_URL


@pytest.fixture
def db(db_location: Path | str) -> Iterator[SQLDatabase]:
    with SQLDatabase(db_location) as database:
        yield database
