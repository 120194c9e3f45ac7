"""Shared fixtures: a fresh database per test, on every backend, and a terse record factory.

``db_location`` (and ``db`` on it) is parametrized: a SQLite file, and an empty database on
a real PostgreSQL server (see ``postgres``: started from the OS's binaries, or the server
``TENSORTUNE_TEST_DB_URL`` names; skipped with the reason when there is none, a failure under
``TENSORTUNE_REQUIRE_POSTGRES=1``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tensortune.database import Database, TuningRecord

from .postgres import postgres_server, postgres_url

#: Every backend the database must work on, as ``db_location`` parameters.
BACKENDS = ("sqlite", "postgresql")

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


@pytest.fixture(params=BACKENDS)
def db_location(request: pytest.FixtureRequest, db_path: Path) -> Path | str:
    """Where the test's database lives: a new SQLite file, or an empty PostgreSQL database."""
    if request.param == "sqlite":
        return db_path
    return str(request.getfixturevalue("postgres_url"))


def execute(location: Path | str, *statements: str) -> list[Any]:
    """Run raw SQL on a database in one transaction, as another program would (to make an
    old or damaged layout); the rows of the last statement."""
    from sqlalchemy import create_engine, text

    url = location if isinstance(location, str) else f"sqlite:///{location}"
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            result = None
            for statement in statements:
                result = conn.execute(text(statement))
            return list(result) if result is not None and result.returns_rows else []
    finally:
        engine.dispose()


@pytest.fixture
def db(db_location: Path | str) -> Iterator[Database]:
    with Database(db_location) as database:
        yield database


__all__ = ["BACKENDS", "MakeRecord", "execute", "postgres_server", "postgres_url", "record"]
