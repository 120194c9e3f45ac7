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
from collections.abc import Callable
from dataclasses import dataclass, field

from ..database import open_database
from ..database.record import TuningRecord
from ..errors import TensorTuneError
from ..measure.builder import build_candidates
from ..measure.result import MeasureResult
from ..measure.runner import Runner, RunRequest
from ..pipeline import arg_specs, build_source, schedule_flags
from ..search.registry import make_strategy
from ..space.registry import design_space
from ..target import Target
from ..workload import Workload, workload as parse_workload
from .result import TuneResult

Progress = Callable[["TuneState"], None]


@dataclass
class TuneState:
    """What a progress display needs after each batch."""

    workload: str
    trials_done: int
    trials_total: int
    best_seconds: float | None
    best_gflops: float | None
    errors: int
    elapsed: float
    errors_by_kind: dict[str, int] = field(default_factory=dict)


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
    search = make_strategy(strategy, ds.space, seed=seed)
    database = open_database(db)
    tkey, run_id, start = str(target), uuid.uuid4().hex[:12], time.perf_counter()
    previous = [r for r in database.records(wl.name, tkey) if ds.space.is_valid(r.config)]
    if previous:
        search.tell([r.config for r in previous], [_cost(r.seconds) for r in previous])
    done, errors = len(previous), sum(r.error is not None for r in previous)
    since_best, best = 0, min((r.seconds for r in previous if r.ok), default=None)
    inputs = wl.random_inputs(seed or 0)
    reference = wl.reference(inputs)
    state = TuneState(wl.name, done, trials, best, _gflops(wl, best), errors, 0.0)
    for r in previous:  # like trials_done and errors, the breakdown counts earlier runs too
        if r.error is not None:
            state.errors_by_kind[r.error] = state.errors_by_kind.get(r.error, 0) + 1
    scale = max(1.0, float(max(abs(r).max() for r in _as_tuple(reference))))
    with Runner(timeout=timeout, target=target, rtol=1e-4, atol=1e-4 * scale) as runner:
        while done < trials:
            elapsed = time.perf_counter() - start
            if max_seconds is not None and elapsed >= max_seconds:
                break
            if early_stop is not None and since_best >= early_stop:
                break
            configs = search.ask(min(batch_size, trials - done))
            if not configs:
                break  # the space is exhausted
            results = measure_configs(ds, configs, target, runner, inputs, reference)
            for config, (trace, res) in zip(configs, results, strict=True):
                done += 1
                rec = TuningRecord(
                    workload=wl.name,
                    target=tkey,
                    config=config,
                    trace=trace,
                    seconds=res.seconds,
                    spread=list(res.spread),
                    error=res.error_kind,
                    error_msg=res.error_msg or None,
                    strategy=strategy,
                    trial=done,
                    tuning_seconds=time.perf_counter() - start,
                    run_id=run_id,
                    machine=_machine(),
                )
                database.commit_record(rec)
                if res.ok and (best is None or res.seconds < best):
                    best, since_best = res.seconds, 0
                else:
                    since_best += 1
                if not res.ok:
                    errors += 1
                    state.errors_by_kind[res.error_kind] = (
                        state.errors_by_kind.get(res.error_kind, 0) + 1
                    )
            search.tell(configs, [_cost(r.seconds) for _, r in results])
            state.trials_done, state.best_seconds, state.errors = done, best, errors
            state.best_gflops, state.elapsed = _gflops(wl, best), time.perf_counter() - start
            if progress:
                progress(state)
    best_rec = database.best(wl.name, tkey)
    if database is not db:  # a Database the caller passed in stays open for the caller
        database.close()
    return TuneResult(
        workload=wl.name,
        target=tkey,
        best_config=best_rec.config if best_rec else None,
        best_seconds=best_rec.seconds if best_rec else None,
        gflops=_gflops(wl, best_rec.seconds if best_rec else None),
        trials=done,
        errors=errors,
        tuning_seconds=time.perf_counter() - start,
        errors_by_kind=dict(state.errors_by_kind),
    )


def measure_configs(ds, configs, target, runner, inputs, reference) -> list[tuple[list, MeasureResult]]:
    """(trace, result) per config: built in parallel, then run serially in the isolated worker."""
    prepared = []
    for config in configs:
        try:
            sch = ds.schedule(config)
            source, func = build_source(sch, ds.workload.op, target)
            prepared.append((sch.trace, (source, *schedule_flags(sch)), func))
        except TensorTuneError as exc:
            prepared.append(([], None, MeasureResult.failure("compile", str(exc))))
    t0 = time.perf_counter()
    jobs = [p[1] for p in prepared if p[1] is not None]
    built = iter(build_candidates(jobs, target, n_workers=max(1, os.cpu_count() or 1)))
    build_seconds = (time.perf_counter() - t0) / max(1, len(jobs))
    requests, slots = [], []
    out: list[tuple[list, MeasureResult] | None] = []
    for trace, job, func in prepared:
        if job is None:
            out.append((trace, func))
            continue
        lib = next(built)
        if isinstance(lib, Exception):
            msg = getattr(lib, "log", "") or str(lib)
            out.append((trace, MeasureResult.failure("compile", msg, build_seconds=build_seconds)))
            continue
        slots.append(len(out))
        out.append(None)
        requests.append(
            RunRequest(lib, func.name, arg_specs(func), tuple(inputs), reference, build_seconds)
        )
    for slot, res in zip(slots, runner.run(requests), strict=True):
        out[slot] = (prepared[slot][0], res)
    return out  # type: ignore[return-value]


def _as_tuple(x) -> tuple:
    return x if isinstance(x, tuple) else (x,)


def _cost(seconds: float | None) -> float:
    return math.inf if seconds is None else seconds


def _gflops(wl: Workload, seconds: float | None) -> float | None:
    return None if not seconds else wl.flops / seconds / 1e9
