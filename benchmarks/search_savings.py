"""Trials and wall time to reach 95% of the best, for random search, the model strategy learning
from scratch, and the model strategy starting from the pretrained prior (issue 15, item 6).

    python benchmarks/search_savings.py [--trials 48] [--seeds 3] [--workloads SPEC ...]
                                        [--only TEXT] [--threads 2] [--batch-size 8]
                                        [--dir DIR] [--prior NAME=FILE ...] [--methods M ...]

Workloads: by default one layer of each op class of ``tensortune.dataset``'s held-out families
(the first of each class in ``held_out_workloads()``: never trained on, by workload key), or the
specs given. Each (workload, method, seed) is a real ``tt.tune`` into a database of its own, so
no run sees another's measurements; the methods take turns within a seed so the host's drift
falls on all of them alike. The databases go to a fresh scratch folder, or to ``--dir``: a rerun
with the same ``--dir`` resumes every tune where it stopped (its earlier trials count toward
``--trials``, and its clock continues), so a long benchmark can be interrupted.

Every run's search records (the final's re-measurements left out) are read back in trial order
and scored by the rule the tuner ranks by (``rank_score``: the ratio to the default timed beside
each candidate), each config by its median over every measurement of it in the workload's runs
(``rank_configs``, the finals' re-measurements included), one scale for all runs; a measurement
whose paired reference took over ``DISTURBED`` times its median (the host stalled it) does not
score, and how many did not is printed. The reference best of a workload is the best score any
of its runs found; a run reaches 95% of it at the first trial whose score is within best / 0.95,
and its wall time is the tuner's elapsed time at that record.

A run's own final re-measures only its own leaders, so a config another run timed once at a lucky
moment could set a reference best that no run can reach. So before scoring, a referee re-measures
the ``REFEREE_TOP`` fastest configs of every run (``--referee`` rounds, each a tune of its own into
``TAG-referee-PASS-ROUND.db`` that measures them once, in a shuffled order, then runs the tuner's
final): every contender then scores by the median of several measurements taken side by side.
A config that rises into some run's top through the re-scoring is refereed in a further pass.

Printed: per workload and method the mean over seeds of trials and seconds to 95% (over the
runs that reached it, with how many did), and the final best relative to the reference best;
then the means over all workloads and seeds and issue 15's bars with PASS/MISS: pretrained
reaches 95% in <= 1/3 of random's trials and <= 1/2 of from-scratch's (a run that never reaches
it counts as trials + 1, a lower bound), and its final best is never below from-scratch's by
more than noise (the larger of the best records' measurement noise and the standard error of the
difference of the seed means).

``--prior NAME=FILE`` adds a method NAME: the model strategy starting from the prior saved at FILE
(``tensortune dataset train -o FILE``), calibrated online as the shipped one is. With a prior
trained on a restricted target's records only (``--restricted threads=1``) it tests issue 15's
last bar, that such a model beats from-scratch search on the full target: it passes when NAME
reaches 95% in fewer trials than from-scratch (means over workloads and seeds) and its final
best is not below from-scratch's by more than noise on any workload. ``--methods`` runs a subset
(a rerun into the same ``--dir`` reuses the other methods' finished databases).
"""

from __future__ import annotations

import argparse
import hashlib
import math
import random
import statistics
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tensortune as tt
from tensortune.cost_model import CostModel
from tensortune.cost_model.pretrained import (
    PRETRAINED_PATH,
    load_pretrained,
    pretrained_meta,
    untrusted_class,
)
from tensortune.cost_model.prior import PriorCalibratedModel
from tensortune.database import open_database
from tensortune.database.record import TuningRecord, rank_configs, rank_score
from tensortune.dataset import held_out_workloads, op_class
from tensortune.errors import TensorTuneError
from tensortune.search import SearchStrategy, register_strategy
from tensortune.space import Config, SearchSpace
from tensortune.tuning.session import CONFIRM

#: A method's model: a registered name, or a factory of a fresh model from the run's seed.
Model = str | Callable[[int, str], CostModel | str] | None
"""A cost model's name, or ``fresh(seed, op_class)`` building one (or naming one)."""

#: Each built-in method as ``tt.tune``'s (strategy, model).
METHODS: dict[str, tuple[str, Model]] = {
    "random": ("random", None),
    "scratch": ("model", "lgbm"),
    "pretrained": ("model", "pretrained"),
}
FRACTION = 0.95
DISTURBED = 3.0
"""How far (a factor either way) a reference time may stray from its median and still count."""
SLOW_REFERENCE = 1.5
"""A reference timed at over this many times its fastest is reported as in a slow state."""
REFEREE_TOP = 3
"""How many of each run's fastest configs the referee re-measures."""
REFEREE_PASSES = 3
"""At most this many referee passes, each over the contenders the last one's scores brought up."""


@dataclass(frozen=True)
class Run:
    """One tune's search, in trial order: each trial's score (inf when it failed) and the tuner's
    elapsed seconds when it was recorded."""

    method: str
    seed: int
    scores: list[float]
    seconds: list[float]
    noise: float
    """Relative measurement noise of the run's best record (see ``relative_noise``)."""


def best_so_far(scores: Sequence[float]) -> list[float]:
    """The running minimum: the best score found after each trial."""
    curve: list[float] = []
    best = math.inf
    for s in scores:
        best = min(best, s)
        curve.append(best)
    return curve


def trials_to(curve: Sequence[float], reference: float, fraction: float = FRACTION) -> int | None:
    """The 1-based trial at which the best-so-far curve first gets within ``fraction`` of the
    reference best's speed (score <= reference / fraction), or None if it never does."""
    goal = reference / fraction
    return next((i + 1 for i, s in enumerate(curve) if s <= goal), None)


def seconds_to(run: Run, reference: float, fraction: float = FRACTION) -> float | None:
    """The tuner's elapsed seconds when ``run`` first reached the goal, or None."""
    trial = trials_to(best_so_far(run.scores), reference, fraction)
    return None if trial is None else run.seconds[trial - 1]


def relative_noise(spread: Sequence[float]) -> float:
    """Half the interquartile range of repeated times, relative to their median (0 for fewer
    than two): how far a second measurement of the same kernel may land."""
    if len(spread) < 2:
        return 0.0
    q1, median, q3 = statistics.quantiles(spread, n=4)
    return (q3 - q1) / 2 / median if median > 0 else 0.0


def disturbed(records: Sequence[TuningRecord], factor: float = DISTURBED) -> set[int]:
    """Indexes of the successful records whose paired reference (the same default kernel every
    time) took more than ``factor`` times, or less than 1/``factor`` of, its median time over
    all ``records``: the host stalled the reference (a loaded machine delays a thread pool's
    wake-up by milliseconds), so their ratio says nothing about the candidate."""
    refs = [r.reference_seconds for r in records if r.ok and r.reference_seconds]
    if not refs:
        return set()
    median = statistics.median(refs)
    return {
        i
        for i, r in enumerate(records)
        if r.ok
        and r.reference_seconds
        and not median / factor <= r.reference_seconds <= median * factor
    }


def slow_references(records: Sequence[TuningRecord], factor: float = SLOW_REFERENCE) -> int:
    """How many records timed their reference at over ``factor`` times its fastest time in
    ``records``. Not drift that moves every kernel alike: on a Zen 5 VM the C=3 stem conv's
    default (then a padded copy written by one thread and read by the other) ran 0.18 ms against
    0.10 for minutes at a time while candidates timed beside it kept their speed; why, and the
    copy per tile that escapes it, is in ``tensortune/space/conv.py``. Ratios taken in that
    state are on another scale than the rest, so the count is printed beside the scores."""
    refs = [r.reference_seconds for r in records if r.ok and r.reference_seconds]
    floor = min(refs, default=0.0)
    return sum(ref > factor * floor for ref in refs)


def config_scores(records: Sequence[TuningRecord]) -> Callable[[TuningRecord], float]:
    """Each successful record scored as its config's median measurement among ``records``
    (``rank_configs``: what a database holding them all would rank it by), so a config timed
    at a lucky or an unlucky moment ranks by its re-measurements, the final's included, as the
    tuner's own choice does. Disturbed measurements (see ``disturbed``) do not score: a config
    measured only so scores inf, as a failed trial does."""
    bad = disturbed(records)
    ok = [r for i, r in enumerate(records) if r.ok and i not in bad]
    score = rank_score(ok)
    median = {m.config_key: score(m) for m, _ in rank_configs(ok, order=lambda r: r.created_at)}
    return lambda r: median.get(r.config_key, math.inf)


def run_of(
    method: str,
    seed: int,
    records: Sequence[TuningRecord],
    score: Callable[[TuningRecord], float],
) -> Run:
    """The search records of one tune (re-measurements of its final left out) as a ``Run``,
    each successful trial scored by ``score``."""
    search = sorted((r for r in records if r.strategy != CONFIRM), key=lambda r: r.trial)
    scores = [score(r) if r.ok else math.inf for r in search]
    ok = [r for r in search if r.ok]
    noise = relative_noise(min(ok, key=score).spread) if ok else 0.0
    return Run(method, seed, scores, elapsed(search), noise)


def elapsed(search: Sequence[TuningRecord]) -> list[float]:
    """Each record's seconds since the tune began: a resumed tune's clock restarts, so each
    session's records are offset by the time the earlier sessions had taken."""
    out: list[float] = []
    offset = last = 0.0
    run_id = None
    for rec in search:
        if run_id is not None and rec.run_id != run_id:
            offset = last
        run_id = rec.run_id
        last = offset + rec.tuning_seconds
        out.append(last)
    return out


def mean_or_nan(values: Sequence[float]) -> float:
    return statistics.fmean(values) if values else math.nan


def censored_trials(run: Run, reference: float, budget: int) -> int:
    """Trials to the goal, ``budget + 1`` for a run that never reached it (a lower bound)."""
    trial = trials_to(best_so_far(run.scores), reference)
    return budget + 1 if trial is None else trial


def final_relative(run: Run, reference: float) -> float:
    """The run's final best speed relative to the reference best (1 = it found the best)."""
    final = min(run.scores, default=math.inf)
    return reference / final if math.isfinite(final) else 0.0


def noise_margin(a: Sequence[float], b: Sequence[float], measurement: float) -> float:
    """What a difference of the means of ``a`` and ``b`` must exceed to be more than noise:
    the measurement noise, or the standard error of the difference, whichever is larger."""
    var = sum(statistics.variance(x) / len(x) for x in (a, b) if len(x) >= 2)
    return max(measurement, math.sqrt(var))


def summary(runs: Sequence[Run], budget: int) -> dict[str, dict[str, float]]:
    """Per method, over its seeds: mean trials and seconds to the goal (over the runs that
    reached it), how many did, the censored mean trials, and the mean final best relative to the
    workload's reference best (the best any run found)."""
    reference = min(min(r.scores, default=math.inf) for r in runs)
    out: dict[str, dict[str, float]] = {}
    for method in dict.fromkeys(r.method for r in runs):
        mine = [r for r in runs if r.method == method]
        reached = [t for r in mine if (t := trials_to(best_so_far(r.scores), reference))]
        times = [s for r in mine if (s := seconds_to(r, reference)) is not None]
        out[method] = {
            "trials": mean_or_nan(reached),
            "seconds": mean_or_nan(times),
            "reached": len(reached),
            "runs": len(mine),
            "censored": statistics.fmean(censored_trials(r, reference, budget) for r in mine),
            "final": statistics.fmean(final_relative(r, reference) for r in mine),
        }
    return out


def final_check(runs: Sequence[Run], a: str, b: str) -> tuple[float, float, float]:
    """(mean final of ``a``, mean final of ``b``, the noise margin between them)."""
    reference = min(min(r.scores, default=math.inf) for r in runs)
    fa = [final_relative(r, reference) for r in runs if r.method == a]
    fb = [final_relative(r, reference) for r in runs if r.method == b]
    noise = max((r.noise for r in runs if r.method in (a, b)), default=0.0)
    return statistics.fmean(fa), statistics.fmean(fb), noise_margin(fa, fb, noise)


def default_workloads() -> list[str]:
    """The first held-out layer of each op class."""
    first: dict[str, str] = {}
    for spec in held_out_workloads():
        first.setdefault(op_class(spec), spec)
    return list(first.values())


def prior_method(name: str, file: Path) -> tuple[str, Model]:
    """The model strategy starting from the prior at ``file``, calibrated online on the run's
    measurements (``PriorCalibratedModel``, as the shipped prior is): a fresh model per tune,
    or learning from scratch for an op class the file's checks do not trust (as the tuner
    treats the shipped prior: ``untrusted_class``)."""
    if load_pretrained(file) is None:  # it warned what is wrong with the file
        raise SystemExit(f"--prior {name}={file}: the model file does not load")
    meta = pretrained_meta(file) or {}

    def fresh(seed: int, cls: str) -> CostModel | str:
        if untrusted_class(cls, meta):
            return "lgbm"
        prior = load_pretrained(file)
        assert prior is not None
        return PriorCalibratedModel(prior, seed)

    return "model", fresh


class Listed(SearchStrategy):
    """Proposes the configs it was given, in their order, each once: the referee's strategy."""

    name = "listed"

    def __init__(self, space: SearchSpace, seed: int | None = None, *, configs: Sequence[Config]):
        super().__init__(space, seed)
        self._configs = [dict(c) for c in configs]

    def _ask(self, n: int) -> list[Config]:
        return [c for c in self._configs if not self.is_seen(c)][:n]


def contenders(
    measured: Sequence[tuple[str, int, list[TuningRecord]]],
    score: Callable[[TuningRecord], float],
    top: int = REFEREE_TOP,
) -> dict[str, Config]:
    """The ``top`` fastest configs by ``score`` of each run's search, by config key."""
    out: dict[str, Config] = {}
    for _, _, records in measured:
        ranked = sorted((r for r in records if r.ok and r.strategy != CONFIRM), key=score)
        best = {r.config_key: r.config for r in ranked if math.isfinite(score(r))}
        out.update(list(best.items())[:top])
    return out


def referee(
    spec: str,
    configs: dict[str, Config],
    args: argparse.Namespace,
    target: tt.Target,
    stem: Path,
) -> list[TuningRecord]:
    """Every measurement of ``configs`` in ``args.referee`` rounds, each round a tune of its own
    into ``STEM-ROUND.db`` that measures them once in a shuffled order (a rerun resumes it), then
    re-times its leaders and the default as every tune's final does."""
    records: list[TuningRecord] = []
    for round_ in range(args.referee):
        order = sorted(configs)
        random.Random(round_).shuffle(order)
        listed = [configs[key] for key in order]
        register_strategy(
            Listed.name,
            lambda space, seed=None, listed=listed: Listed(space, seed, configs=listed),
            replace=True,
        )
        db = stem.with_name(f"{stem.name}-{round_}.db")
        records += tune_or_read(
            db,
            spec,
            target,
            len(listed),
            keys=order,
            seed=round_,
            batch_size=args.batch_size,
            strategy=Listed.name,
        )
    return records


def refereed_scores(
    spec: str,
    measured: Sequence[tuple[str, int, list[TuningRecord]]],
    args: argparse.Namespace,
    target: tt.Target,
    stem: Path,
) -> Callable[[TuningRecord], float]:
    """``config_scores`` over the runs' records and the referee's re-measurements of every run's
    contenders, pass after pass until no new config rises into a run's top (see the module's
    docstring); with ``--referee 0``, over the runs' records alone."""
    records = [r for _, _, recs in measured for r in recs]
    score = config_scores(records)
    before = min(map(score, records))
    done: dict[str, Config] = {}
    for step in range(REFEREE_PASSES if args.referee else 0):
        fresh = {k: c for k, c in contenders(measured, score).items() if k not in done}
        if not fresh:
            break
        records += referee(spec, fresh, args, target, stem.with_name(f"{stem.name}-{step}"))
        done.update(fresh)
        score = config_scores(records)
    if done:
        after = min(map(score, records))
        print(
            f"  referee: {len(done)} contenders x {args.referee} rounds; the best's score "
            f"{before:.3f} before, {after:.3f} after",
            flush=True,
        )
    if bad := disturbed(records):
        print(
            f"  {len(bad)} of {len(records)} measurements disturbed (reference stalled): unscored"
        )
    if slow := slow_references(records):
        print(
            f"  {slow} of {len(records)} measurements timed the reference at over "
            f"{SLOW_REFERENCE}x its fastest: their ratios are on another scale (see "
            "slow_references)"
        )
    return score


def tune_or_read(
    db: Path, spec: str, target: tt.Target, trials: int, keys: Sequence[str] = (), **tune: Any
) -> list[TuningRecord]:
    """The records of ``db`` after a ``tt.tune`` of ``trials`` into it; a run that already holds
    them, ``keys`` among them, and its final (a rerun into the same ``--dir``) is read without
    entering ``tt.tune``, whose resume starts a measuring worker and builds the reference only to
    find nothing left to do (minutes per workload)."""
    key = tt.workload(spec).name
    if db.exists():
        with open_database(db) as database:
            records = database.records(key, str(target))
        done = {r.config_key for r in records if r.strategy != CONFIRM}
        finals = any(r.strategy == CONFIRM for r in records)
        if len(done) >= trials and done.issuperset(keys) and finals:
            return records
    result = tt.tune(spec, trials=trials, db=db, target=target, **tune)
    with open_database(db) as database:
        return database.records(result.workload, result.target)


def tune_runs(
    spec: str,
    args: argparse.Namespace,
    target: tt.Target,
    folder: Path,
    methods: dict[str, tuple[str, Model]],
) -> list[Run]:
    """Every (seed, method) tune of ``spec``, each into its own database, as scored runs."""
    tag = hashlib.sha1(spec.encode()).hexdigest()[:10]
    measured: list[tuple[str, int, list[TuningRecord]]] = []
    for seed in range(args.seeds):
        for method, (strategy, model) in methods.items():
            db = folder / f"{tag}-{method}-{seed}.db"
            records = tune_or_read(
                db,
                spec,
                target,
                args.trials,
                seed=seed,
                batch_size=args.batch_size,
                strategy=strategy,
                model=model(seed, op_class(spec)) if callable(model) else model,
            )
            measured.append((method, seed, records))
            trials = len({r.config_key for r in records if r.strategy != CONFIRM})
            print(f"  seed {seed} {method:10s} {trials} trials", flush=True)
    if not any(r.ok for _, _, recs in measured for r in recs):
        raise SystemExit(f"{spec}: no run measured any config successfully: nothing to compare")
    score = refereed_scores(spec, measured, args, target, folder / f"{tag}-referee")
    return [run_of(method, seed, recs, score) for method, seed, recs in measured]


def cell(value: float, width: int, fmt: str) -> str:
    return f"{'-':>{width}s}" if math.isnan(value) else f"{value:{width}{fmt}}"


def print_table(table: dict[str, dict[str, dict[str, float]]]) -> None:
    print(
        f"\n{'workload':60s} {'method':10s} {'trials→95%':>10s} {'reached':>7s} "
        f"{'s→95%':>7s} {'final÷best':>10s}"
    )
    for spec, by_method in table.items():
        for method, row in by_method.items():
            print(
                f"{spec[:60]:60s} {method:10s} {cell(row['trials'], 10, '.1f')} "
                f"{int(row['reached']):3d}/{int(row['runs']):<3d} "
                f"{cell(row['seconds'], 7, '.1f')} {row['final']:10.3f}"
            )


def final_verdict(finals: dict[str, tuple[float, float, float]], method: str) -> None:
    """PASS when ``method``'s final best is below from-scratch's by more than noise nowhere."""
    below = {s: f for s, f in finals.items() if f[0] < f[1] - f[2]}
    worst = min(finals, key=lambda s: finals[s][0] - finals[s][1])
    mine, scratch, noise = finals[worst]
    print(
        f"{'MISS' if below else 'PASS'}: {method}'s final best below from-scratch's by more than "
        f"noise on {len(below)}/{len(finals)} workloads (closest: {worst}: "
        f"{mine:.3f} vs {scratch:.3f}, noise {noise:.3f})"
    )


def print_verdict(
    table: dict[str, dict[str, dict[str, float]]],
    finals: dict[str, dict[str, tuple[float, float, float]]],
    budget: int,
) -> None:
    """The means over workloads and seeds, then the bars: the shipped prior's against random
    and from-scratch, and every ``--prior`` method's against from-scratch."""
    methods = list(next(iter(table.values())))
    overall = {
        m: {k: statistics.fmean(t[m][k] for t in table.values()) for k in ("censored", "final")}
        for m in methods
    }
    reached = {m: sum(int(t[m]["reached"]) for t in table.values()) for m in methods}
    runs = {m: sum(int(t[m]["runs"]) for t in table.values()) for m in methods}
    print(f"\nmeans over workloads and seeds (never reached = {budget + 1} trials, a lower bound):")
    for m, row in overall.items():
        print(
            f"  {m:10s} trials→95% {row['censored']:6.1f}  reached {reached[m]}/{runs[m]}  "
            f"final÷best {row['final']:.3f}"
        )
    for method in finals:
        mine = overall[method]["censored"]
        bars = (("random", 3), ("scratch", 2)) if method == "pretrained" else (("scratch", 1),)
        for other, share in bars:
            if other not in overall:
                continue
            bound = overall[other]["censored"] / share
            passed = mine <= bound if share > 1 else mine < bound
            relation = f"≤ 1/{share} of" if share > 1 else "<"
            print(
                f"{'PASS' if passed else 'MISS'}: {method} {mine:.1f} trials {relation} {other}'s "
                f"{overall[other]['censored']:.1f}" + (f" = {bound:.1f}" if share > 1 else "")
            )
        final_verdict(finals[method], method)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workloads", nargs="+", metavar="SPEC", help="default: held out")
    parser.add_argument("--only", help="run only the workloads whose spec contains this text")
    parser.add_argument("--trials", type=int, default=48, help="trials per tune")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--dir", type=Path, help="keep the databases here (default: scratch)")
    parser.add_argument(
        "--prior",
        action="append",
        default=[],
        metavar="NAME=FILE",
        help="add method NAME: the model strategy from the prior saved at FILE",
    )
    parser.add_argument("--methods", nargs="+", metavar="M", help="run only these methods")
    parser.add_argument(
        "--referee",
        type=int,
        default=3,
        metavar="ROUNDS",
        help="re-measure every run's top configs this many times before scoring (0: never)",
    )
    args = parser.parse_args()
    if args.trials < 1 or args.seeds < 1 or args.referee < 0:
        parser.error(
            f"--trials and --seeds must be >= 1 and --referee >= 0, got {args.trials}, "
            f"{args.seeds} and {args.referee}"
        )
    specs = [s for s in args.workloads or default_workloads() if not args.only or args.only in s]
    if not specs:
        parser.error(f"--only {args.only!r} matches none of the workloads")
    for spec in specs:
        try:
            tt.workload(spec)
        except TensorTuneError as exc:
            parser.error(f"workload {spec!r}: {exc}")
    methods = dict(METHODS)
    for given in args.prior:
        name, sep, file = given.partition("=")
        if not sep or not name or not file or name in METHODS:
            parser.error(f"--prior {given!r}: want NAME=FILE with a NAME not in {list(METHODS)}")
        methods[name] = prior_method(name, Path(file))
        print(f"prior {name} ({file}): {pretrained_meta(Path(file))}")
    if args.methods:
        if unknown := [m for m in args.methods if m not in methods]:
            parser.error(f"--methods {unknown}: choose from {list(methods)}")
        methods = {m: methods[m] for m in args.methods}
    if "pretrained" in methods:
        meta = pretrained_meta()
        if meta is None:
            raise SystemExit(f"the pretrained model {PRETRAINED_PATH} does not load")
        print(f"prior {PRETRAINED_PATH.name}: {meta}")
    folder = args.dir or Path(tempfile.mkdtemp(prefix="search_savings_"))
    folder.mkdir(parents=True, exist_ok=True)
    target = tt.Target.detect(num_threads=args.threads)
    print(
        f"CPU {target.name}: target {target} ({target.isa}, {target.vector_bits}-bit vectors, "
        f"{target.num_threads} threads)"
    )
    print(
        f"{args.trials} trials x {args.seeds} seeds x {len(methods)} methods; databases in {folder}"
    )
    # the methods with a prior, each held against learning from scratch
    compared = [m for m in methods if m not in METHODS or m == "pretrained"]
    compared = compared if "scratch" in methods else []
    table: dict[str, dict[str, dict[str, float]]] = {}
    finals: dict[str, dict[str, tuple[float, float, float]]] = {m: {} for m in compared}
    for spec in specs:
        print(f"{op_class(spec)}: {spec}", flush=True)
        runs = tune_runs(spec, args, target, folder, methods)
        table[spec] = summary(runs, args.trials)
        for m in compared:
            finals[m][spec] = final_check(runs, m, "scratch")
    print_table(table)
    print_verdict(table, finals, args.trials)


if __name__ == "__main__":
    main()
