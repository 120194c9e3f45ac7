"""A user's own design space: tuned, recorded and compiled like a built-in one.

Records name the space they were measured in; ``compile`` applies only records of the space the
op has now, rebuilt through that space's code (never anything from the database), and ratios of
two spaces (timed beside two different defaults) are never ranked together.
"""

from __future__ import annotations

import subprocess
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import tensortune as tt
from tensortune import te
from tensortune.database import TuningRecord, open_database
from tensortune.errors import RecordWarning
from tensortune.space import SPACES, Constraint, DesignSpace, Knob, SearchSpace, register_space
from tensortune.space.registry import design_space
from tensortune.target import Target
from tensortune.tuning.apply import tuned_schedule
from tensortune.version import __version__

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "own_search_space.py"


def scaled_relu() -> tt.Workload:
    X = te.placeholder((8, 32), name="X")
    Y = te.compute((8, 32), lambda i, j: te.max(X[i, j] * 2.0, 0.0), name="Y")
    return tt.Workload("scaled_relu:R=8,C=32", "scaled_relu", (("R", 8),), (X,), (Y,), 256.0)


def scaled_relu_space(wl: tt.Workload, target: Target) -> DesignSpace:
    space = SearchSpace(
        [Knob("rows", (1, 2, 4, 8)), Knob("lanes", (4, 8))],
        [Constraint("no_single_row_tiles", lambda c: c["rows"] > 1)],
    )

    def build(config: dict) -> tt.Schedule:
        s = tt.Schedule(wl.outputs)
        s.split("Y", "i", config["rows"])
        _, lanes = s.split("Y", "j", config["lanes"])
        s.vectorize("Y", lanes)
        return s

    return DesignSpace(wl, target, space, build, {"rows": 8, "lanes": 8})


@pytest.fixture
def registered() -> Iterator[None]:
    saved = dict(SPACES)
    register_space("scaled_relu", scaled_relu_space)
    yield
    SPACES.clear()
    SPACES.update(saved)


def measured(wl: tt.Workload, target: Target, config: dict, ratio: float, **extra) -> TuningRecord:
    return TuningRecord(
        workload=wl.name,
        target=str(target),
        config=config,
        seconds=ratio * 1e-6,
        reference_seconds=1e-6,
        ratio=ratio,
        version=__version__,
        **extra,
    )


def test_compile_applies_the_best_record_of_the_space_the_op_has_now(
    registered: None, target: Target, tmp_path: Path
) -> None:
    wl, db = scaled_relu(), tmp_path / "mine.db"
    mine = design_space(wl, target)  # registered: the user's space
    assert mine.name == "scaled_relu"
    with open_database(db) as database:
        for rec in (
            measured(wl, target, {"rows": 4, "lanes": 4}, 0.5, space="scaled_relu"),
            measured(wl, target, {"rows": 2, "lanes": 8}, 0.8, space="scaled_relu"),
            measured(wl, target, {"rows": 2, "lanes": 4}, 0.1, space="an-older-version"),
        ):
            database.commit_record(rec)
    rec, schedule = tuned_schedule(wl, db, target)
    assert rec is not None and rec.config == {"rows": 4, "lanes": 4}
    assert schedule.trace == mine.schedule(rec.config).trace
    kernel = tt.compile(wl, db=db)
    (x,) = wl.random_inputs()
    assert np.allclose(kernel(x), np.maximum(x * 2.0, 0.0))

    SPACES.pop("scaled_relu")  # a process that never registered the space
    rec, _ = tuned_schedule(wl, db, target)
    assert rec is None, "records of a space that is not registered are never applied"


def test_a_record_that_is_not_a_point_of_the_space_is_passed_over(
    registered: None, target: Target, tmp_path: Path
) -> None:
    wl, db = scaled_relu(), tmp_path / "mine.db"
    with open_database(db) as database:
        database.commit_record(
            measured(wl, target, {"rows": 1, "lanes": 4}, 0.2, space="scaled_relu")
        )
        database.commit_record(
            measured(wl, target, {"rows": 8, "lanes": 4}, 0.9, space="scaled_relu")
        )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rec, _ = tuned_schedule(wl, db, target)
    assert rec is not None and rec.config == {"rows": 8, "lanes": 4}
    assert any(
        issubclass(w.category, RecordWarning) and "no_single_row_tiles" in str(w.message)
        for w in caught
    )


@pytest.mark.slow
def test_the_example_tunes_records_and_compiles_its_own_space() -> None:
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), "2"], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert "2 trials" in lines[0] and "best config {" in lines[0]
    assert lines[1] == "records name the space: ['matmul_relu']"
    assert lines[2] == "compiled the best schedule: matches NumPy"
