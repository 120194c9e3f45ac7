"""The tuning loop: ask the strategy for configs, build them in parallel, time them one at a time
in an isolated worker, commit every measurement at once, tell the strategy, repeat.

A rerun of the same tune resumes: records already in the database for this workload and target
are told to the strategy first (so it never proposes them again) and count toward the budget.

Tuners sharing a database share the work: each claims a config before measuring it (a claim row
that expires, so a tuner that died frees its configs) and skips configs another tuner holds or
has measured; records the others commit are told to the strategy and count toward the budget
like a resumed run's. Their timings never overlap (see `measure.runner`).
"""

from __future__ import annotations

import contextlib
import functools
import itertools
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
from ..measure.runner import Check, Runner, RunRequest
from ..pipeline import arg_specs, build_source, schedule_flags
from ..search.registry import make_tuning_strategy
from ..search.strategy import SearchStrategy
from ..space import SearchSpace
from ..space.registry import design_space
from ..space.template import DesignSpace
from ..target import Target
from ..version import __version__
from ..workload import Workload
from ..workload import workload as parse_workload
from .apply import ranked_records, valid_records
from .result import TuneResult

Progress = Callable[["TuneState"], None]

CONFIRM = "confirm"
"""Strategy of the re-measurements that pick the winner; they are not trials."""
CONFIRM_TOP = 4
CONFIRM_ROUNDS = 2
CLAIM_MARGIN = 600.0
"""Seconds a batch's claims outlive twice its timeouts (builds, worker start-ups, waits for the
timing lock); a tuner that dies holding claims frees those configs after this long."""


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
    known: set[str] = field(default_factory=set)
    """config_keys of the records this run has committed or been told of."""
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
        if confirm:
            self.final[canonical_json(config)] = res
        else:
            self.count(res.seconds, res.error_kind, _cost(res))
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
        )
        self.database.commit_record(rec)
        self.known.add(rec.config_key)

    def catch_up(self, search: SearchStrategy, space: SearchSpace) -> None:
        """Tell the strategy, and count, the records this run has not seen: an earlier run's (a
        rerun resumes) and those another tuner on the database committed meanwhile."""
        db, wl, key = self.database, self.wl.name, self.target_key
        if db.measured_keys(wl, key) <= self.known:
            return
        fresh = [r for r in db.records(wl, key) if r.config_key not in self.known]
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
            config_key = canonical_json(config)
            if not db.claim(wl, key, config_key, owner=self.run_id, ttl=ttl):
                continue
            if db.has(wl, key, config_key):
                db.release(wl, key, config_key, owner=self.run_id)
            else:
                mine.append(config)
        return mine

    def release(self, configs: list[dict]) -> None:
        """Drop this run's claims on `configs`."""
        for config in configs:
            self.database.release(
                self.wl.name, self.target_key, canonical_json(config), owner=self.run_id
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
    session.catch_up(search, ds.space)  # resume: these are never proposed again, and they count
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
            asked = search.ask(min(batch_size, trials - state.trials_done))
            if not asked:
                break  # the space is exhausted
            configs = session.claim(asked, ttl=CLAIM_MARGIN + 2 * timeout * len(asked))
            costs = [math.inf] * len(configs)

            def measured(index: int, trace: list, res: MeasureResult, configs=configs, costs=costs):
                session.commit(configs[index], trace, res)
                session.release([configs[index]])
                costs[index] = _cost(res)
                if progress:
                    progress(state)

            threshold = state.best_score if state.best_score is not None else 1.0
            try:
                measure_configs(
                    ds,
                    configs,
                    target,
                    runner,
                    *data,
                    measured,
                    baseline=baseline,
                    threshold=threshold,
                )
            except BaseException:
                with contextlib.suppress(TensorTuneError):  # the error in flight says more
                    session.release(configs)  # other tuners may measure them now
                raise
            search.tell(configs, costs)
            session.catch_up(search, ds.space)
        if trials:  # `--trials 0` only asks
            _final(session, ds, target, runner, *data, baseline=baseline)
    best_rec = next(iter(_valid_top(session, ds, 1)), None)
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
    request = RunRequest(library, func.name, arg_specs(func), tuple(inputs), reference)
    (checked,) = runner.run([request])
    return (library, func.name) if checked.ok else None


def _final(
    session: _Session,
    ds: DesignSpace,
    target: Target,
    runner: Runner,
    *data,
    baseline: tuple[Path, str] | None,
) -> None:
    """Re-time the fastest few configs and the template default beside the reference (alone
    when the default could not be one), taking turns, until each has 1 + CONFIRM_ROUNDS
    measurements. The database ranks a config by its median ratio to the reference, so the
    winner is the config that is fast, not the one timed at the host's luckiest moment, and the
    default, always a finalist, wins unless beaten."""
    top = [r.config for r in _valid_top(session, ds, CONFIRM_TOP)]
    finalists = list({canonical_json(c): c for c in [ds.default, *top]}.values())
    for round_ in range(1 + CONFIRM_ROUNDS):
        _remeasure(session, ds, target, runner, data, baseline, finalists, round_ + 1)
    # re-measured finalists drift up towards their true ratio, so a config measured once may
    # now lead on one lucky draw: it is re-measured too, until the leader is a confirmed one
    for _ in range(CONFIRM_TOP * CONFIRM_ROUNDS):
        leader = [r.config for r in _valid_top(session, ds, 1)]
        if not _remeasure(session, ds, target, runner, data, baseline, leader, 1 + CONFIRM_ROUNDS):
            break


def _remeasure(
    session: _Session,
    ds: DesignSpace,
    target: Target,
    runner: Runner,
    data: tuple,
    baseline: tuple[Path, str] | None,
    configs: list[dict],
    times: int,
) -> bool:
    """Measure once more (a re-measurement, not a trial) each of `configs` that this version
    has measured fewer than `times` times; False if none needed it."""
    db, wl, key = session.database, session.wl.name, session.target_key
    counts = Counter(r.config_key for r in db.records(wl, key, version=__version__) if r.ok)
    todo = [c for c in configs if counts[canonical_json(c)] < times]
    if todo:
        measure_configs(
            ds,
            todo,
            target,
            runner,
            *data,
            lambda i, trace, res: session.commit(todo[i], trace, res, confirm=True),
            baseline=baseline,
        )
    return bool(todo)


def _valid_top(session: _Session, ds: DesignSpace, k: int) -> list[TuningRecord]:
    """The k fastest configs that validate as ``compile`` checks them: a stale or foreign record
    in a shared database is never re-measured nor reported as the winner."""
    ranked = ranked_records(session.database, session.wl.name, session.target_key)
    return [rec for rec, _ in itertools.islice(valid_records(ds, ranked), k)]


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
            (special_check(ds.workload),),
            baseline=baseline,
            threshold=threshold,
        )
        runnable.append((index, trace, request))
    runner.run(
        [r for _, _, r in runnable],
        lambda k, res: on_result(runnable[k][0], runnable[k][1], res),
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


@functools.lru_cache(maxsize=4)
def special_check(wl: Workload) -> Check:
    """Inputs with NaN and infinities and NumPy's outputs on them, which every candidate must
    reproduce (inputs in [-1, 1) alone let a kernel that drops NaN win); computed once per
    workload."""
    inputs = tuple(wl.special_inputs())
    return Check(inputs, _as_tuple(wl.reference(inputs)), "inputs with NaN and +-inf")


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
