"""The tuning loop: ask the strategy for configs, build them in parallel, time them one at a time
in an isolated worker, commit every measurement at once, tell the strategy, repeat.

A rerun of the same tune resumes: records already in the database for this workload and target
are told to the strategy first (so it never proposes them again) and count toward the budget.
"""

from __future__ import annotations

import math
import os
import socket
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..database import Database, open_database
from ..database.record import TuningRecord, canonical_json, rank_score
from ..errors import TensorTuneError
from ..ir.nodes import PrimFunc
from ..measure.builder import build_candidates
from ..measure.result import MeasureResult
from ..measure.runner import Runner, RunRequest
from ..pipeline import arg_specs, build_source, schedule_flags
from ..search.registry import make_tuning_strategy
from ..space.registry import design_space
from ..space.template import DesignSpace
from ..target import Target
from ..workload import Workload
from ..workload import workload as parse_workload
from .result import TuneResult

Progress = Callable[["TuneState"], None]

CONFIRM = "confirm"
"""Strategy of the re-measurements that pick the winner; they are not trials."""
CONFIRM_TOP = 4
CONFIRM_ROUNDS = 2


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


def _as_workload(spec) -> Workload:
    if isinstance(spec, Workload):
        return spec
    if isinstance(spec, str):
        return parse_workload(spec)
    raise TensorTuneError(
        f"tune() takes a workload spec string (e.g. 'matmul:M=256,N=256,K=256') or a Workload, "
        f"got {type(spec).__name__}"
    )


def _machine() -> dict:
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    return {"hostname": socket.gethostname(), "load1": load}


@dataclass
class _Session:
    """One tune invocation: commits each measurement the moment it is known."""

    wl: Workload
    target_key: str
    strategy: str
    database: Database
    state: TuneState
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    start: float = field(default_factory=time.perf_counter)
    final: dict[str, MeasureResult] = field(default_factory=dict)
    """The last re-measurement of each finalist, by config key."""

    def count(self, seconds: float | None, error: str | None, score: float) -> None:
        st = self.state
        st.trials_done += 1
        if error is not None:
            st.errors += 1
            st.errors_by_kind[error] = st.errors_by_kind.get(error, 0) + 1
        if seconds is not None and (st.best_score is None or score < st.best_score):
            st.best_seconds, st.best_score, st.since_best = seconds, score, 0
            st.best_gflops = _gflops(self.wl, seconds)
        else:
            st.since_best += 1
        st.elapsed = time.perf_counter() - self.start

    def commit(self, config: dict, trace: list, res: MeasureResult, confirm: bool = False) -> None:
        self.state.disturbed += res.disturbed
        if not confirm:
            self.count(res.seconds, res.error_kind, _cost(res))
        else:
            self.final[canonical_json(config)] = res
        self.database.commit_record(
            record_of(
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
            )
        )


def record_of(
    workload: str, target: str, config: dict, trace: list, res: MeasureResult, **extra
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


def tune(
    workload,
    trials: int = 64,
    strategy: str = "model",
    db=None,
    target: Target | None = None,
    timeout: float = 10.0,
    seed: int | None = 0,
    batch_size: int = 8,
    max_seconds: float | None = None,
    early_stop: int | None = None,
    progress: Progress | None = None,
) -> TuneResult:
    """Tune ``workload`` for ``trials`` measurements (in total, counting earlier runs)."""
    if not isinstance(trials, int) or isinstance(trials, bool) or trials < 0:
        raise TensorTuneError(f"trials must be a non-negative integer, got {trials!r}")
    if timeout <= 0:
        raise TensorTuneError(f"timeout must be positive seconds, got {timeout!r}")
    wl = _as_workload(workload)
    target = target or Target.detect()
    ds = design_space(wl, target)
    search = make_tuning_strategy(strategy, ds, seed=seed)
    database = open_database(db)
    state = TuneState(wl.name, 0, trials, None, None, 0, 0.0)
    session = _Session(wl, str(target), strategy, database, state)
    previous = [
        r
        for r in database.records(wl.name, str(target))
        if r.strategy != CONFIRM and ds.space.is_valid(r.config)
    ]
    if previous:  # resume: the strategy never proposes these again, and they count
        score = rank_score([r for r in previous if r.ok])
        costs = [score(r) if r.ok else math.inf for r in previous]
        search.tell([r.config for r in previous], costs)
        for r, cost in zip(previous, costs, strict=True):
            session.count(r.seconds, r.error, cost)
        state.since_best = 0
    inputs = wl.random_inputs(seed or 0)
    reference = wl.reference(inputs)
    scale = max(1.0, float(max(abs(r).max() for r in _as_tuple(reference))))
    with Runner(timeout=timeout, target=target, rtol=1e-4, atol=1e-4 * scale) as runner:
        data = (inputs, reference)
        baseline = _baseline(ds, target, runner, *data) if trials > state.trials_done else None
        while state.trials_done < trials:
            if max_seconds is not None and time.perf_counter() - session.start >= max_seconds:
                break
            if early_stop is not None and state.since_best >= early_stop:
                break
            configs = search.ask(min(batch_size, trials - state.trials_done))
            if not configs:
                break  # the space is exhausted
            costs = [math.inf] * len(configs)

            def measured(index: int, trace: list, res: MeasureResult, configs=configs, costs=costs):
                session.commit(configs[index], trace, res)
                costs[index] = _cost(res)
                if progress:
                    progress(state)

            threshold = state.best_score if state.best_score is not None else 1.0
            measure_configs(
                ds, configs, target, runner, *data, measured, baseline=baseline, threshold=threshold
            )
            search.tell(configs, costs)
        if baseline is not None:
            _final(session, ds, target, runner, *data, baseline=baseline)
    best_rec = database.best(wl.name, str(target))
    margin = session.final.get(best_rec.config_key) if best_rec is not None else None
    if database is not db:  # a Database the caller passed in stays open for the caller
        database.close()
    return TuneResult(
        workload=wl.name,
        target=str(target),
        best_config=best_rec.config if best_rec else None,
        best_seconds=best_rec.seconds if best_rec else None,
        gflops=_gflops(wl, best_rec.seconds if best_rec else None),
        trials=state.trials_done,
        errors=state.errors,
        tuning_seconds=time.perf_counter() - session.start,
        errors_by_kind=dict(state.errors_by_kind),
        ratio_to_default=best_rec.ratio if best_rec is not None else None,
        ratio_interval=(margin.ratio_low, margin.ratio_high)
        if margin is not None and margin.ratio_low is not None
        else None,
        disturbed_rounds=state.disturbed,
    )


def _baseline(
    ds: DesignSpace, target: Target, runner: Runner, inputs: list, reference
) -> tuple[Path, str] | None:
    """The template default's kernel, which every candidate is timed beside (paired timing).

    It is run once on its own first: a default that does not build, crashes or computes
    wrong results cannot be a reference, and the run then times candidates alone."""
    prepared = _prepare(ds, ds.default, target)
    if isinstance(prepared, TensorTuneError):
        return None
    _, job, func = prepared
    (library,) = build_candidates([job], target)
    if isinstance(library, Exception):
        return None
    (checked,) = runner.run(
        [RunRequest(library, func.name, arg_specs(func), tuple(inputs), reference)]
    )
    return (library, func.name) if checked.ok else None


def _final(
    session: _Session,
    ds: DesignSpace,
    target: Target,
    runner: Runner,
    *data,
    baseline: tuple[Path, str],
) -> None:
    """Re-time the fastest few configs and the template default beside the reference, taking
    turns, until each has 1 + CONFIRM_ROUNDS measurements. The database ranks a config by its
    median ratio to the reference, so the winner is the config that is fast, not the one timed
    at the host's luckiest moment, and the default, always a finalist, wins unless beaten."""
    db, wl, key = session.database, session.wl.name, session.target_key
    top = [r.config for r in db.top_k(wl, key, CONFIRM_TOP) if ds.space.is_valid(r.config)]
    finalists = list({canonical_json(c): c for c in [ds.default, *top]}.values())
    for round_ in range(1 + CONFIRM_ROUNDS):
        times = Counter(r.config_key for r in db.records(wl, key) if r.ok)
        todo = [c for c in finalists if times[canonical_json(c)] < round_ + 1]
        if todo:
            measure_configs(
                ds,
                todo,
                target,
                runner,
                *data,
                lambda i, trace, res, todo=todo: session.commit(todo[i], trace, res, confirm=True),
                baseline=baseline,
            )


def _prepare(
    ds: DesignSpace, config: dict, target: Target
) -> tuple[list, tuple[str, ...], PrimFunc] | TensorTuneError:
    """A config's trace, build job (C source and flags) and lowered function, or why not."""
    try:
        sch = ds.schedule(config)
        source, func = build_source(sch, ds.workload.op, target)
    except TensorTuneError as exc:
        return exc
    return sch.trace, (source, *schedule_flags(sch)), func


def measure_configs(
    ds: DesignSpace,
    configs: list[dict],
    target: Target,
    runner: Runner,
    inputs: list,
    reference,
    on_result: Callable[[int, list, MeasureResult], None],
    *,
    baseline: tuple[Path, str] | None = None,
    threshold: float = 1.0,
) -> None:
    """Build every config in parallel, then run the built ones one at a time in the isolated
    worker, each beside `baseline` when there is one; ``on_result(index, trace, result)``
    hears of each as soon as it is known."""
    prepared = []
    for index, config in enumerate(configs):
        outcome = _prepare(ds, config, target)
        if isinstance(outcome, TensorTuneError):
            on_result(index, [], MeasureResult.failure("compile", str(outcome)))
        else:
            prepared.append((index, *outcome))
    t0 = time.perf_counter()
    built = build_candidates([p[2] for p in prepared], target, n_workers=os.cpu_count() or 1)
    build_seconds = (time.perf_counter() - t0) / max(1, len(prepared))
    runnable = []
    for (index, trace, _, func), lib in zip(prepared, built, strict=True):
        if isinstance(lib, Exception):
            msg = getattr(lib, "log", "") or str(lib)
            on_result(
                index, trace, MeasureResult.failure("compile", msg, build_seconds=build_seconds)
            )
            continue
        request = RunRequest(
            lib,
            func.name,
            arg_specs(func),
            tuple(inputs),
            reference,
            build_seconds,
            baseline=baseline,
            threshold=threshold,
        )
        runnable.append((index, trace, request))
    runner.run(
        [r for _, _, r in runnable],
        lambda k, res: on_result(runnable[k][0], runnable[k][1], res),
    )


def _as_tuple(x) -> tuple:
    return x if isinstance(x, tuple) else (x,)


def _cost(res: MeasureResult) -> float:
    """What the strategy minimises: the ratio to the reference, which the host's drift does
    not move (the time itself when there was no reference), infinite for a failure."""
    if res.seconds is None:
        return math.inf
    return res.ratio if res.ratio is not None else res.seconds


def _gflops(wl: Workload, seconds: float | None) -> float | None:
    return None if not seconds else wl.flops / seconds / 1e9
