"""The tuning loop: ask the strategy for configs, build them in parallel, time them one at a time
in an isolated worker, commit every measurement at once, tell the strategy, repeat.

A rerun of the same tune resumes: records already in the database for this workload, target
and design space are told to the strategy first (so it never proposes them again) and count
toward the budget.

Tuners sharing a database share the work: each claims a config before measuring it (a claim row
that expires, so a tuner that died frees its configs) and skips configs another tuner holds or
has measured; records the others commit are told to the strategy and count toward the budget
like a resumed run's. Their timings never overlap (see `measure.runner`).

With ``fleet=`` the candidates are built and timed on the nodes of a Ray cluster instead (see
``measuring`` and ``tensortune.fleet``); the loop, the claims and every commit stay here, so a
fleet run resumes and shares a database exactly as a run on this machine does.

The run's bookkeeping (counting, committing, claiming) is in ``session``, building and timing
candidates in ``candidates``, where they are measured in ``measuring``; this module holds the
loop and the final.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import os
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from ..cost_model import CostModel
from ..database import Database, open_database
from ..database.record import TuningRecord, canonical_json
from ..errors import StrategyError, TensorTuneError
from ..fleet import Fleet, trials_per_minute
from ..fleet import require as require_fleet
from ..measure.result import MeasureResult
from ..search.budget import Budget, Pace
from ..search.model_based import ModelBasedSearch
from ..search.registry import make_tuning_strategy, strategy_options
from ..space.registry import design_space
from ..space.template import DesignSpace
from ..target import Target
from ..version import __version__
from ..workload import Workload
from ..workload import workload as parse_workload
from .apply import ranked_records, valid_records
from .candidates import cost, measure_configs, special_check
from .measuring import Measure, OnResult, measuring_here, measuring_on_fleet
from .result import TuneResult, gflops
from .session import CONFIRM, Progress, Session, TuneState, record_of
from .zero_shot import transfer_seeds

CONFIRM_TOP = 4
CONFIRM_ROUNDS = 2
FINAL_SHARE = 0.25
"""Part of a time budget the search leaves for the final's re-measurements."""
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
    fleet: str | None = None,
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
            (``tensortune.cost_model.COST_MODELS``) or a ``CostModel`` instance. The default,
            ``pretrained``, is the package's pretrained model: it ranks candidates from the
            first batch and is calibrated on this run's measurements, which can overrule it
            (without a loadable model file it learns from scratch, after one warning).
            ``lgbm`` (LightGBM regression), ``lgbm-rank`` and ``xgb-rank`` (XGBoost pairwise
            ranking, ``pip install "tensortune[xgboost]"``) learn from scratch; ``random``
            is the ablation baseline.
        fleet: measure on the nodes of a Ray cluster instead of here (``pip install
            "tensortune[fleet]"``): ``"auto"`` (the cluster on this machine, or a new local
            one), ``"ray://HOST:PORT"`` (Ray client) or ``"HOST:PORT"`` (the head's address).
            Nodes whose target key is not the run's are refused with one line on the
            ``tensortune.fleet`` logger; a node that dies or hangs loses only the candidates it
            held, which other nodes measure. None (default): measure on this machine.

    Returns:
        A ``TuneResult``: ``workload`` and ``target`` (the database keys), ``best_config``,
        ``best_seconds``, ``gflops``, ``ratio_to_default`` and ``ratio_interval`` of the winner
        (None when nothing ran), ``trials``, ``errors`` and ``errors_by_kind`` (compile, crash,
        timeout, wrong_result, runtime: failures are recorded, not raised), ``tuning_seconds``,
        ``disturbed_rounds`` (timing rounds re-taken because the host was busy),
        ``busy_rounds`` (rounds kept from the fastest calls of each block because the host
        stayed busy), ``stop_reason``, ``trials_per_minute`` and, on a fleet, ``nodes`` (what
        each node built and measured, and its idle share).

    Raises:
        SpecError: the spec string does not parse.
        StrategyError: unknown strategy or cost model (the message lists the registered
            ones), or a cost model given to a strategy that takes none.
        DatabaseError: the database cannot be opened or written (locked, read-only, corrupt).
        EnvironmentFailure: the machine, not a candidate, failed (no working C compiler,
            unwritable kernel cache, full disk), or no node of the fleet is left to measure on;
            nothing is recorded against any config.
        MissingDependency: ``fleet`` given without Ray installed.
        TensorTuneError: a bad argument (negative ``trials``, non-positive ``timeout``...).
    """
    if timeout <= 0:
        raise TensorTuneError(f"timeout must be positive seconds, got {timeout!r}")
    try:
        budget = Budget(trials, max_seconds, early_stop)
    except ValueError as exc:
        raise TensorTuneError(str(exc)) from None
    if fleet is not None:
        require_fleet(fleet)
    wl = _as_workload(workload)
    target = target or Target.detect()
    ds = design_space(wl, target)
    search = make_tuning_strategy(strategy, ds, seed=seed, **_model_option(strategy, model))
    database = open_database(db)
    if isinstance(search, ModelBasedSearch):  # configs fast on similar workloads, for its prior
        search.add_seeds(transfer_seeds(ds, database, str(target)))
    state = TuneState(wl.name, 0, trials, None, None, 0, 0.0)
    session = Session(wl, str(target), strategy, database, state, space=ds.name)
    session.catch_up(search, ds.space)  # resume: these are never proposed again, and they count
    state.since_best = 0
    committed = [0]  # trials this call measured, for its rate
    on_fleet: Fleet | None = None
    pace = Pace()
    with contextlib.ExitStack() as stack:
        if fleet is None:
            work = trials > state.trials_done
            measure = stack.enter_context(measuring_here(ds, target, timeout, seed, work))
            if work:  # the reference was built and checked: what a measurement costs, roughly
                pace.add(time.perf_counter() - session.start, 1)
        else:
            measure, on_fleet = stack.enter_context(
                measuring_on_fleet(fleet, ds, target, timeout, seed)
            )
        measure = _paced(measure, pace)
        search_seconds = budget.room(0.0) * (1.0 - FINAL_SHARE)

        def room() -> float:
            return budget.room(time.perf_counter() - session.start)

        def fitting(wanted: int) -> int:
            return pace.fitting(wanted, room())

        while True:
            elapsed = time.perf_counter() - session.start
            stop = budget.exhausted(state.trials_done, elapsed, state.since_best)
            if stop is not None:
                break
            wanted = min(batch_size, trials - state.trials_done)
            first = committed[0] == 0
            if budget.max_seconds is not None and first:
                wanted = 1  # the reference's check is no paired timing: learn what one costs
            # the final's share is kept for confirming winners: with none yet, it may be spent
            left = budget.room(elapsed) if first else search_seconds - elapsed
            if not pace.fitting(wanted, left):
                stop = (
                    f"time budget: a measurement takes ~{pace.per_measurement:.1f}s and "
                    f"{max(0.0, left):.1f}s of the search's are left"
                )
                break
            asked = search.ask(pace.fitting(wanted, left))
            if not asked:
                stop = "the strategy has no unmeasured config left to propose"
                break
            configs = session.claim(asked, ttl=CLAIM_MARGIN + 2 * timeout * len(asked))
            costs = [math.inf] * len(configs)

            def measured(index: int, trace: list, res: MeasureResult, configs=configs, costs=costs):
                session.commit(configs[index], trace, res)
                session.release([configs[index]])
                committed[0] += 1
                costs[index] = cost(res)
                if progress:
                    progress(state)

            threshold = state.best_score if state.best_score is not None else 1.0
            try:
                measure(configs, measured, threshold=threshold)
            except BaseException:
                with contextlib.suppress(TensorTuneError):  # the error in flight says more
                    session.release(configs)  # other tuners may measure them now
                raise
            search.tell(configs, costs)
            session.catch_up(search, ds.space)
            _confirm_one(session, ds, measure, fitting, just_measured=configs)
        if trials:  # `--trials 0` only asks
            _final(session, ds, measure, fitting)
        nodes = tuple(on_fleet.report()) if on_fleet is not None else ()
    seconds = time.perf_counter() - session.start
    best_rec = next(iter(_valid_top(session, ds, 1)), None)
    margins = session.final.get(best_rec.config_key, []) if best_rec is not None else []
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
        tuning_seconds=seconds,
        errors_by_kind=dict(state.errors_by_kind),
        ratio_to_default=best_rec.ratio if best_rec is not None else None,
        ratio_interval=_interval(margins),
        disturbed_rounds=state.disturbed,
        busy_rounds=state.busy,
        stop_reason=stop,
        trials_per_minute=trials_per_minute(committed[0], seconds),
        nodes=nodes,
    )


def _interval(margins: list[MeasureResult]) -> tuple[float, float] | None:
    """From the lowest to the highest end of the winner's ratio intervals over its
    re-measurements in this run, when it has any: the spread its ratio (their median with its
    trial's) was drawn from, not only the last draw's."""
    ends = [(m.ratio_low, m.ratio_high) for m in margins]
    lows = [low for low, _ in ends if low is not None]
    highs = [high for _, high in ends if high is not None]
    return (min(lows), max(highs)) if lows and highs else None


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


def _paced(measure: Measure, pace: Pace) -> Measure:
    """``measure``, teaching ``pace`` what each call cost."""

    def timed(configs: list[dict[str, Any]], on_result: OnResult, threshold: float = 1.0) -> None:
        start = time.perf_counter()
        try:
            measure(configs, on_result, threshold)
        finally:
            pace.add(time.perf_counter() - start, len(configs))

    return timed


def _final(
    session: Session, ds: DesignSpace, measure: Measure, fitting: Callable[[int], int]
) -> None:
    """Re-time the fastest few configs and the template default beside the reference (alone
    when the default could not be one), taking turns, until each has 1 + CONFIRM_ROUNDS
    measurements. The database ranks a config by its median ratio to the reference, so the
    winner is the config that is fast, not the one timed at the host's luckiest moment, and the
    default, always a finalist, wins unless beaten. ``fitting(n)`` says how many of n more
    measurements the time budget holds; the final stops where it runs out."""
    top = [r.config for r in _valid_top(session, ds, CONFIRM_TOP)]
    finalists = list({canonical_json(c): c for c in [ds.default, *top]}.values())
    for round_ in range(1 + CONFIRM_ROUNDS):
        _remeasure(session, measure, finalists, round_ + 1, fitting)
    # re-measured finalists drift up towards their true ratio, so a config measured once may
    # now lead on one lucky draw: it is re-measured too, until the leader is a confirmed one
    for _ in range(CONFIRM_TOP * CONFIRM_ROUNDS):
        leader = [r.config for r in _valid_top(session, ds, 1)]
        if not _remeasure(session, measure, leader, 1 + CONFIRM_ROUNDS, fitting):
            break


def _confirm_one(
    session: Session,
    ds: DesignSpace,
    measure: Measure,
    fitting: Callable[[int], int],
    just_measured: list[dict[str, Any]],
) -> None:
    """Re-measure the best of the leading configs that the final would re-measure, once, after a
    batch: a config's relative speed moves with the host's state for tens of seconds at a time
    (a conv's tuned config measured 0.96 of the default for a minute, then 1.15 for the next
    ten, in one worker), so re-measurements spread over the run give a median over the states
    it met where the final's, taken back to back, would give one. A config just measured waits
    for the next batch."""
    fresh = {canonical_json(c) for c in just_measured}
    leaders = [r.config for r in _valid_top(session, ds, CONFIRM_TOP) if r.config_key not in fresh]
    _remeasure(session, measure, leaders, 1 + CONFIRM_ROUNDS, fitting, at_most=1)


def _remeasure(
    session: Session,
    measure: Measure,
    configs: list[dict[str, Any]],
    times: int,
    fitting: Callable[[int], int],
    at_most: int | None = None,
) -> bool:
    """Measure once more (a re-measurement, not a trial) each of `configs` that this version
    has measured fewer than `times` times, the first `at_most` of them, as many as the time
    left holds; False if none needed it or none fit."""
    db, wl, key = session.database, session.wl.name, session.target_key
    mine = db.records(wl, key, version=__version__, space=session.space)
    counts = Counter(r.config_key for r in mine if r.ok)
    todo = [c for c in configs if counts[canonical_json(c)] < times][:at_most]
    todo = todo[: fitting(len(todo))]
    if todo:
        measure(todo, lambda i, trace, res: session.commit(todo[i], trace, res, confirm=True))
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
