"""A tiny dataset database, built through the Database API (no compiling, no timing)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from tensortune.database import TuningRecord, open_database
from tensortune.space.registry import design_space
from tensortune.workload import workload

SPECS = ("matmul:M=32,N=32,K=32", "softmax:rows=16,cols=64", "dense:M=1,N=1000,K=1280")
"""Two training workloads and one layer of a held-out family (mobilenet_v2's classifier)."""


def fill(db_path: Path, target, n: int = 12, seed: int = 0) -> None:
    """``n`` configs per workload with synthetic paired times (one failure each)."""
    rng = random.Random(seed)
    with open_database(db_path) as db:
        for spec in SPECS:
            wl = workload(spec)
            ds = design_space(wl, target)
            for i, config in enumerate(ds.space.sample(seed, n)):
                ratio = 0.2 + rng.random()
                common = dict(workload=wl.name, target=str(target), config=config, trial=i + 1)
                if i == n - 1:
                    db.commit_record(TuningRecord(**common, error="compile", error_msg="x"))
                    continue
                db.commit_record(
                    TuningRecord(
                        **common,
                        seconds=ratio * 1e-4,
                        reference_seconds=1e-4,
                        ratio=ratio,
                        strategy="random",
                        machine={"hostname": "test", "load1": 0.0},
                    )
                )


@pytest.fixture(scope="session")
def tiny_db(tmp_path_factory: pytest.TempPathFactory, target) -> Path:
    path = tmp_path_factory.mktemp("dataset") / "tiny.db"
    fill(path, target)
    return path
