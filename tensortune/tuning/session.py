"""One tuning run's bookkeeping: what it has counted, committed, claimed and been told.

Every measurement is committed the moment it is known, so a killed run loses nothing; records
other tuners on the same database commit (or an earlier run left) are told to the strategy and
counted toward the budget, and configs are claimed before they are measured, so tuners sharing
a database share the work instead of repeating it.
"""

from __future__ import annotations

import math
import os
import socket
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..database import Database
from ..database.record import TuningRecord, canonical_json, rank_score
from ..measure.result import MeasureResult
from ..search.strategy import SearchStrategy
from ..space import SearchSpace
from ..workload import Workload
from .candidates import cost
from .result import gflops

Progress = Callable[["TuneState"], None]

CONFIRM = "confirm"
"""Strategy of the re-measurements that pick the winner; they are not trials."""


@dataclass
class TuneState:
    """What a progress display needs; updated as each measurement is committed."""

    workload: str
    trials_done: int
    trials_total: int
    best_seconds: float | None
    best_gflops: float | None
    errors: int
    elapsed: float
    errors_by_kind: dict[str, int] = field(default_factory=dict)
    since_best: int = 0
    best_score: float | None = None
    """The best trial's ratio to the reference (or seconds when timed alone): what ranks."""
    disturbed: int = 0
    """Timing rounds the host disturbed and that were timed again."""
    busy: int = 0
    """Rounds kept from each block's fastest calls because the host stayed busy."""


def _machine() -> dict[str, Any]:
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    return {"hostname": socket.gethostname(), "load1": load}


@dataclass
class Session:
    """One tune invocation: commits each measurement the moment it is known."""

    wl: Workload
    target_key: str
    strategy: str
    database: Database
    state: TuneState
    space: str = ""
    """The design space's name, stored in every record and narrowing every query."""
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    start: float = field(default_factory=time.perf_counter)
    known: set[str] = field(default_factory=set)
    """config_keys of the records this run has committed or been told of."""
    final: dict[str, list[MeasureResult]] = field(default_factory=dict)
    """Each finalist's re-measurements in this run, by config key."""

    def count(self, seconds: float | None, error: str | None, score: float) -> None:
        st = self.state
        st.trials_done += 1
        if error is not None:
            st.errors += 1
            st.errors_by_kind[error] = st.errors_by_kind.get(error, 0) + 1
        if seconds is not None and (st.best_score is None or score < st.best_score):
            st.best_seconds, st.best_score, st.since_best = seconds, score, 0
            st.best_gflops = gflops(self.wl.flops, seconds)
        else:
            st.since_best += 1
        st.elapsed = time.perf_counter() - self.start

    def commit(self, config: dict, trace: list, res: MeasureResult, confirm: bool = False) -> None:
        self.state.disturbed += res.disturbed
        self.state.busy += res.filtered
        if confirm:
            self.final.setdefault(canonical_json(config), []).append(res)
        else:
            self.count(res.seconds, res.error_kind, cost(res))
        rec = record_of(
            self.wl.name,
            self.target_key,
            config,
            trace,
            res,
            strategy=CONFIRM if confirm else self.strategy,
            trial=self.state.trials_done,
            tuning_seconds=self.state.elapsed,
            run_id=self.run_id,
            machine=_machine(),
            space=self.space,
        )
        self.database.commit_record(rec)
        self.known.add(rec.config_key)

    def catch_up(self, search: SearchStrategy, space: SearchSpace) -> None:
        """Tell the strategy, and count, the records this run has not seen: an earlier run's (a
        rerun resumes) and those another tuner on the database committed meanwhile."""
        db, wl, key, space_name = self.database, self.wl.name, self.target_key, self.space
        if db.measured_keys(wl, key, space=space_name) <= self.known:
            return
        records = db.records(wl, key, space=space_name)
        fresh = [r for r in records if r.config_key not in self.known]
        self.known.update(r.config_key for r in fresh)
        told = [r for r in fresh if r.strategy != CONFIRM and space.is_valid(r.config)]
        if told:
            score = rank_score([r for r in told if r.ok])
            costs = [score(r) if r.ok else math.inf for r in told]
            search.tell([r.config for r in told], costs)
            for r, cost in zip(told, costs, strict=True):
                self.count(r.seconds, r.error, cost)

    def claim(self, configs: list[dict], ttl: float) -> list[dict]:
        """The configs this run now holds the claim on and nobody has measured yet; another
        tuner is measuring, or has measured, the others."""
        db, wl, key = self.database, self.wl.name, self.target_key
        mine = []
        for config in configs:
            claim_key = self._claim_key(config)
            if not db.claim(wl, key, claim_key, owner=self.run_id, ttl=ttl):
                continue
            if db.has(wl, key, canonical_json(config), space=self.space):
                db.release(wl, key, claim_key, owner=self.run_id)
            else:
                mine.append(config)
        return mine

    def release(self, configs: list[dict]) -> None:
        """Drop this run's claims on `configs`."""
        for config in configs:
            self.database.release(
                self.wl.name, self.target_key, self._claim_key(config), owner=self.run_id
            )

    def _claim_key(self, config: dict) -> str:
        """What a claim on ``config`` is taken under: its key, qualified by a registered space's
        name so that tuners of two spaces of one workload never hold each other's configs."""
        key = canonical_json(config)
        return f"{self.space}:{key}" if self.space else key


def record_of(
    workload: str,
    target: str,
    config: dict[str, Any],
    trace: list[Any],
    res: MeasureResult,
    **extra: Any,
) -> TuningRecord:
    """The database record of one measurement."""
    return TuningRecord(
        workload=workload,
        target=target,
        config=config,
        trace=trace,
        seconds=res.seconds,
        spread=list(res.spread),
        reference_seconds=res.reference_seconds,
        ratio=res.ratio,
        error=res.error_kind,
        error_msg=res.error_msg or None,
        **extra,
    )
