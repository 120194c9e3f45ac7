"""Measure sampled schedules of many workloads into a tuning database: the dataset's source.

Workloads alternate, in collection order, between random search (an unbiased sample of the
space) and the model-guided search (so fast programs, the ones a ranking model must order
correctly, are well represented). Each workload is one ``tune`` call, so its final re-timing of
the best few configs and the default (about ten measurements) is paid once, and every
measurement is committed as it is taken. The database is the state: a rerun counts what each
workload already has and continues (in the same strategy), and ``max_seconds`` /
``max_workloads`` cut collection into chunks that fit a shared machine.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import platformdirs

from ..database import Database
from ..space.registry import design_space
from ..target import Target
from ..tuning import tune
from ..tuning.session import CONFIRM
from ..workload import workload


def dataset_db_path() -> Path:
    """Where ``tensortune dataset collect`` measures by default: ``dataset.db`` in the user cache
    directory, apart from the tuning database so the dataset's records stay its own."""
    return Path(platformdirs.user_cache_dir("tensortune")) / "dataset.db"


#: The strategies workloads take in turn.
STRATEGIES = ("random", "model")


@dataclass(frozen=True)
class CollectStep:
    """What one workload got in this call (for the per-workload progress line)."""

    index: int
    total: int
    workload: str
    before: int
    after: int
    seconds: float


def measured_trials(db: Database, spec: str, target: Target) -> int:
    """Distinct configs measured as trials (re-timed finalists not counted), like ``tune``."""
    ds = design_space(workload(spec), target)
    recs = db.records(spec, str(target), space=ds.name)
    return len({r.config_key for r in recs if r.strategy != CONFIRM})


def collect(
    db: Database,
    specs: Sequence[str],
    target: Target,
    *,
    trials: int,
    max_seconds: float | None = None,
    max_workloads: int | None = None,
    seed: int = 0,
    progress: Callable[[CollectStep], None] | None = None,
) -> list[CollectStep]:
    """Bring every workload of ``specs`` (in order) to ``trials`` measured configs on
    ``target``; stop after ``max_workloads`` workloads that needed work or when
    ``max_seconds`` have passed (the workload in progress stops at its next batch)."""
    start = time.monotonic()
    steps: list[CollectStep] = []
    for index, spec in enumerate(specs):
        left = math.inf if max_seconds is None else max_seconds - (time.monotonic() - start)
        if left <= 0 or (max_workloads is not None and len(steps) >= max_workloads):
            break
        name = workload(spec).name
        before = measured_trials(db, name, target)
        if before >= trials:
            continue
        began = time.monotonic()
        tune(
            name,
            trials=trials,
            strategy=STRATEGIES[index % len(STRATEGIES)],
            db=db,
            target=target,
            seed=seed,
            max_seconds=None if math.isinf(left) else left,
        )
        step = CollectStep(
            index + 1,
            len(specs),
            name,
            before,
            measured_trials(db, name, target),
            time.monotonic() - began,
        )
        steps.append(step)
        if progress is not None:
            progress(step)
    return steps
