"""The tuning loop: ask the strategy for configs, build them in parallel, time them one at a time
in an isolated worker, commit every measurement at once, tell the strategy, repeat.

A rerun of the same tune resumes: records already in the database for this workload, target
and design space are told to the strategy first (so it never proposes them again) and count
toward the budget.

Tuners sharing a database share the work: each claims a config before measuring it (a claim row
that expires, so a tuner that died frees its configs) and skips configs another tuner holds or
has measured; records the others commit are told to the strategy and count toward the budget
like a resumed run's. Their timings never overlap (see `measure.runner`).

The run's bookkeeping (counting, committing, claiming) is in ``session``, building and timing
candidates in ``candidates``; this module holds the loop, the baseline and the final.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import os
import time
from collections import Counter
from pathlib import Path
from typing import Any

from ..cost_model import CostModel
from ..database import Database, open_database
from ..database.record import TuningRecord, canonical_json
from ..errors import StrategyError, TensorTuneError
from ..measure.builder import build_candidates
from ..measure.result import MeasureResult
from ..measure.runner import Runner, RunRequest
from ..pipeline import arg_specs
from ..search.budget import Budget
from ..search.model_based import ModelBasedSearch
from ..search.registry import make_tuning_strategy, strategy_options
from ..space.registry import design_space
from ..space.template import DesignSpace
from ..target import Target
from ..version import __version__
from ..workload import Workload
from ..workload import workload as parse_workload
from .apply import ranked_records, valid_records
from .candidates import as_tuple, cost, measure_configs, prepare, special_check
from .result import TuneResult, gflops
from .session import CONFIRM, Progress, Session, TuneState, record_of

CONFIRM_TOP = 4
CONFIRM_ROUNDS = 2
CLAIM_MARGIN = 600.0
"""Seconds a batch's claims outlive twice its timeouts (builds, worker start-ups, waits for the
timing lock); a tuner that dies holding claims frees those configs after this long."""


def _as_workload(spec: object) -> Workload:
    if isinstance(spec, Workload):
        return spec
    if isinstance(spec, str):
        return parse_workload(spec)
    raise TensorTuneError(
        f"tune() takes a workload spec string (e.g. 'matmul:M=256,N=256,K=256') or a Workload, "
        f"got {type(spec).__name__}"
    )


def tune(
    workload: str | Workload,
    trials: int = 64,
    strategy: str = "model",
    db: str | os.PathLike[str] | Database | None = None,
    target: Target | None = None,
    timeout: float = 10.0,
    seed: int | None = 0,
    batch_size: int = 8,
    max_seconds: float | None = None,
    early_stop: int | None = None,
    progress: Progress | None = None,
    model: str | CostModel | None = None,
) -> TuneResult:
    """Search the design space of ``workload`` by measuring candidates; record every one.

    Each batch of configs the strategy proposes is built in parallel, run one at a time in an
    isolated worker (checked against NumPy, also on inputs with NaN and infinities) and timed
    beside the space's default config; every measurement is committed to the database as it is
    taken, so a killed run loses nothing and a rerun resumes. At the end the fastest few configs
    and the default are re-timed, and the winner is the config with the best median ratio to the
    default. ``compile(workload, db=...)`` then builds the winner.

    Args:
        workload: a spec string (``"matmul:M=256,N=256,K=256"``) or a ``Workload``. Its design
            space is the one ``tensortune.space.design_space`` picks: a space registered for
            its op (``tensortune.space.register_space``), else the built-in template.
        trials: measurements in total for this workload, target and space, counting earlier
            runs' records in the database (default 64); 0 measures nothing and reports the
            best recorded config.
        strategy: a registered strategy name (``tensortune.search.STRATEGIES``): ``grid``,
            ``random``, ``annealing``, ``evolutionary``, ``optuna-tpe``, ``optuna-cmaes`` or
            ``model`` (default: cost-model-guided search).
        db: a SQLite path, a SQLAlchemy URL, an open ``Database`` (left open), or None for the
            default database (``$TENSORTUNE_DB``, else ``tuning.db`` in the user cache folder).
        target: the CPU to tune for; default ``Target.detect()`` (this machine).
        timeout: seconds one candidate may run before it is killed and recorded as a timeout.
        seed: seeds the strategy and the test inputs, so a run is reproducible.
        batch_size: configs asked of the strategy, and built in parallel, at a time.
        max_seconds: stop starting new batches after this many seconds (None: no limit).
        early_stop: stop after this many trials without a new best (None: never).
        progress: called with a ``TuneState`` after every committed measurement.
        model: the cost model of the ``model`` strategy: a registered name
            (``tensortune.cost_model.COST_MODELS``: ``lgbm``, the default, ``lgbm-rank``,
            ``random``) or a ``CostModel`` instance (e.g. a pre-trained one).

    Returns:
        A ``TuneResult``: ``workload`` and ``target`` (the database keys), ``best_config``,
        ``best_seconds``, ``gflops``, ``ratio_to_default`` and ``ratio_interval`` of the winner
        (None when nothing ran), ``trials``, ``errors`` and ``errors_by_kind`` (compile, crash,
        timeout, wrong_result, runtime: failures are recorded, not raised), ``tuning_seconds``,
        ``disturbed_rounds`` (timing rounds re-taken because the host was busy),
        ``busy_rounds`` (rounds kept from the fastest calls of each block because the host
        stayed busy) and ``stop_reason``.

    Raises:
        SpecError: the spec string does not parse.
        StrategyError: unknown strategy or cost model (the message lists the registered
            ones), or a cost model given to a strategy that takes none.
        DatabaseError: the database cannot be opened or written (locked, read-only, corrupt).
        EnvironmentFailure: the machine, not a candidate, failed (no working C compiler,
            unwritable kernel cache, full disk); nothing is recorded against any config.
        TensorTuneError: a bad argument (negative ``trials``, non-positive ``timeout``...).
    """
    if timeout <= 0:
        raise TensorTuneError(f"timeout must be positive seconds, got {timeout!r}")
    try:
        budget = Budget(trials, max_seconds, early_stop)
    except ValueError as exc:
        raise TensorTuneError(str(exc)) from None
    wl = _as_workload(workload)
    target = target or Target.detect()
    ds = design_space(wl, target)
    search = make_tuning_strategy(strategy, ds, seed=seed, **_model_option(strategy, model))
    database = open_database(db)
    state = TuneState(wl.name, 0, trials, None, None, 0, 0.0)
    session = Session(wl, str(target), strategy, database, state, space=ds.name)
    session.catch_up(search, ds.space)  # resume: these are never proposed again, and they count
    state.since_best = 0
    inputs = wl.random_inputs(seed or 0)
    reference = wl.reference(inputs)
    scale = max(1.0, float(max(abs(r).max() for r in as_tuple(reference))))
    with Runner(timeout=timeout, target=target, rtol=1e-4, atol=1e-4 * scale) as runner:
        data = (inputs, reference)
        baseline = _baseline(ds, target, runner, *data) if trials > state.trials_done else None
        while True:
            elapsed = time.perf_counter() - session.start
            stop = budget.exhausted(state.trials_done, elapsed, state.since_best)
            if stop is not None:
                break
            asked = search.ask(min(batch_size, trials - state.trials_done))
            if not asked:
                stop = "the strategy has no unmeasured config left to propose"
                break
            configs = session.claim(asked, ttl=CLAIM_MARGIN + 2 * timeout * len(asked))
            costs = [math.inf] * len(configs)

            def measured(index: int, trace: list, res: MeasureResult, configs=configs, costs=costs):
                session.commit(configs[index], trace, res)
                session.release([configs[index]])
                costs[index] = cost(res)
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
        gflops=gflops(wl.flops, best_rec.seconds if best_rec else None),
        trials=state.trials_done,
        errors=state.errors,
        tuning_seconds=time.perf_counter() - session.start,
        errors_by_kind=dict(state.errors_by_kind),
        ratio_to_default=best_rec.ratio if best_rec is not None else None,
        ratio_interval=_interval(margin),
        disturbed_rounds=state.disturbed,
        busy_rounds=state.busy,
        stop_reason=stop,
    )


def _interval(margin: MeasureResult | None) -> tuple[float, float] | None:
    """The winner's ratio interval in its last re-measurement, when it has one."""
    if margin is None or margin.ratio_low is None or margin.ratio_high is None:
        return None
    return (margin.ratio_low, margin.ratio_high)


def _model_option(strategy: str, model: str | CostModel | None) -> dict[str, Any]:
    """``tune``'s ``model`` as the strategy's option; a strategy without one refuses it."""
    if model is None:
        return {}
    if "model" not in strategy_options(strategy):
        raise StrategyError(
            f"strategy '{strategy}' uses no cost model, so model={model!r} does not apply; "
            f"the model-based strategy ('{ModelBasedSearch.name}') does"
        )
    return {"model": model}


def _baseline(
    ds: DesignSpace, target: Target, runner: Runner, inputs: list[Any], reference: Any
) -> tuple[Path, str] | None:
    """The template default's kernel, which every candidate is timed beside (paired timing).

    It is run once on its own first: a default that does not build, crashes or computes
    wrong results cannot be a reference, and the run then times candidates alone."""
    prepared = prepare(ds, ds.default, target)
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
    session: Session,
    ds: DesignSpace,
    target: Target,
    runner: Runner,
    *data: Any,
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
    session: Session,
    ds: DesignSpace,
    target: Target,
    runner: Runner,
    data: tuple[list[Any], Any],
    baseline: tuple[Path, str] | None,
    configs: list[dict[str, Any]],
    times: int,
) -> bool:
    """Measure once more (a re-measurement, not a trial) each of `configs` that this version
    has measured fewer than `times` times; False if none needed it."""
    db, wl, key = session.database, session.wl.name, session.target_key
    mine = db.records(wl, key, version=__version__, space=session.space)
    counts = Counter(r.config_key for r in mine if r.ok)
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


def _valid_top(session: Session, ds: DesignSpace, k: int) -> list[TuningRecord]:
    """The k fastest configs that validate as ``compile`` checks them: a stale or foreign record
    in a shared database is never re-measured nor reported as the winner."""
    ranked = ranked_records(session.database, session.wl.name, session.target_key, ds.name)
    return [rec for rec, _ in itertools.islice(valid_records(ds, ranked), k)]


__all__ = [
    "CONFIRM",
    "Progress",
    "TuneState",
    "measure_configs",
    "record_of",
    "special_check",
    "tune",
]
