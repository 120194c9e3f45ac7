"""How well cost models trained on the dataset rank configs of networks they never saw.

    python benchmarks/cost_model_eval.py [data/dataset] [--models lgbm-rank,xgb-rank,random]
                                         [--cv 5] [--collect-held-out --max-seconds 600]

Trains each model on the records of the training families (and random shapes) and scores it on
the records of the held-out families (``tensortune.dataset.HELD_OUT_FAMILIES``: every layer
excluded from training by workload key), TenSet's protocol. Per held-out workload (one group per
workload, target and CPU kind): pairwise ranking accuracy, Spearman's rank correlation between
predicted score and true throughput, and the top-1 / top-5 score (best true throughput among the
model's top k, divided by the best measured; ``ranking_metrics``). Printed per op class and
overall, each a mean over workloads weighted by their measured configs (the definition of the
model file's own held-out check, which decides an op class's trust), for:

- every model of ``--models`` trained on all training records;
- on the test configs timed at least twice: one timing ranked against the others (no model:
  the ceiling the host's noise leaves) beside the first model on the same configs;
- the template default alone (top-1 only: how far the fixed default is from the best measured);
- a model trained only on a restricted target's records (``--restricted``: ``avx2`` or
  ``threads=1``), evaluated on the held-out records of every other target, when such records
  exist;
- the prior as shipped (``tensortune/cost_model/pretrained/default.json``), on each CPU kind's
  held-out records;
- when the dataset holds more than one CPU kind, per kind of the held-out records (this host's
  first): the first model trained (a) on the *other* kinds' records, (b) on every kind's and
  (c) on that kind's only, all three tested on that kind's held-out records.

``--cv K`` first prints grouped K-fold cross-validation over the *training* workloads (each fold
holds out whole workloads, spread over op classes; ``--cv-by family`` whole training networks,
as the held-out evaluation does): the figures to choose features and hyper-parameters by, so
the held-out families are only ever reported on, never tuned on.

Each figure names the CPU kinds its training and test records come from. With no held-out
records in the dataset it says so; ``--collect-held-out`` then measures them first (into the
dataset's tuning database, ``--db``) and evaluates on what it collected.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

import tensortune as tt
from tensortune.cost_model import CostModel, ranking_metrics
from tensortune.cost_model.pretrained import PRETRAINED_PATH, load_pretrained, pretrained_meta
from tensortune.database import open_database
from tensortune.database.record import canonical_json
from tensortune.dataset import (
    HELD_OUT_FAMILIES,
    TRAINING_FAMILIES,
    collect,
    collection_order,
    cpu_kind,
    dataset_db_path,
    export_dataset,
    feature_set,
    fit,
    groups_of,
    held_out_workloads,
    on_target,
    read_records,
    target_of,
    training_records,
)
from tensortune.dataset.train import FeatureCache, FeatureSet, Group, out_of_fold_scores
from tensortune.space.registry import design_space
from tensortune.target import cpu_family_model
from tensortune.workload.zoo import layers

Records = list[dict[str, Any]]
METRICS = ("pairwise_accuracy", "spearman", "top1_score", "top5_score")
HEADER = ("pairwise", "spearman", "top-1", "top-5")


def _ranks(x: np.ndarray) -> np.ndarray:
    """Ranks with ties averaged (what Spearman's coefficient correlates)."""
    order = np.argsort(x, kind="stable")
    ranks = np.empty(len(x))
    ranks[order] = np.arange(len(x))
    _, inverse, counts = np.unique(x, return_inverse=True, return_counts=True)
    sums = np.bincount(inverse, weights=ranks)
    return (sums / counts)[inverse]


def spearman(scores: np.ndarray, costs: np.ndarray) -> float:
    """Rank correlation of predicted score with true throughput (a failure's is 0)."""
    throughput = np.where(np.isfinite(costs), 1.0 / np.maximum(costs, 1e-300), 0.0)
    a, b = _ranks(scores), _ranks(throughput)
    if a.std() == 0 or b.std() == 0:
        return math.nan
    return float(np.corrcoef(a, b)[0, 1])


def group_metrics(scores: np.ndarray, costs: np.ndarray) -> dict[str, float]:
    return {**ranking_metrics(scores, costs), "spearman": spearman(scores, costs)}


def evaluate(
    predict: Callable[[np.ndarray], np.ndarray], test: Records, cache: FeatureCache
) -> dict[str, Any]:
    """Per-workload metrics of ``predict`` on the test records, by op class and overall."""
    data = feature_set(groups_of(test), test, cache)
    scores = predict(data.features)
    rows: dict[str, list[tuple[int, dict[str, float]]]] = {}
    for gid, group in enumerate(data.info):
        mask = data.groups == gid
        if mask.sum() < 2:
            continue
        rows.setdefault(group.op_class, []).append(
            (int(mask.sum()), group_metrics(scores[mask], data.costs[mask]))
        )
    return summarise(rows)


def summarise(rows: dict[str, list[tuple[int, dict[str, float]]]]) -> dict[str, Any]:
    def mean(items: Sequence[tuple[int, dict[str, float]]], key: str) -> float:
        vals = [(n, m[key]) for n, m in items if not math.isnan(m[key])]
        total = sum(w for w, _ in vals)
        return sum(w * v for w, v in vals) / total if total else math.nan

    per_class = {
        cls: {
            "groups": len(items),
            "configs": sum(n for n, _ in items),
            **{k: mean(items, k) for k in METRICS},
        }
        for cls, items in sorted(rows.items())
    }
    everything = [item for items in rows.values() for item in items]
    overall = {
        "groups": len(everything),
        "configs": sum(n for n, _ in everything),
        **{k: mean(everything, k) for k in METRICS},
    }
    return {"per_class": per_class, "overall": overall}


def cv_units(data: FeatureSet, by: str) -> list[str]:
    """What each group's fold is decided by: its workload, or (``by="family"``) the network
    family whose layer it is (a random shape, in no family, is a unit of its own), so the folds
    hold out whole networks as the held-out evaluation does."""
    family: dict[str, str] = {}
    if by == "family":
        for layer in layers(TRAINING_FAMILIES):
            family.setdefault(tt.workload(layer.spec).name, layer.family)
    return [family.get(group.key[0], group.key[0]) for group in data.info]


def cross_validate(
    name: str, data: FeatureSet, k: int, seed: int, by: str = "workload"
) -> dict[str, Any]:
    """Grouped ``k``-fold cross-validation of model ``name`` (``pretrain_model``) over ``data``:
    every workload is scored by a model trained on the other folds' workloads (or families)."""
    scores = out_of_fold_scores(data, name, k, seed, cv_units(data, by))
    rows: dict[str, list[tuple[int, dict[str, float]]]] = {}
    for gid, group in enumerate(data.info):
        mask = data.groups == gid
        if mask.sum() >= 2:
            rows.setdefault(group.op_class, []).append(
                (int(mask.sum()), group_metrics(scores[mask], data.costs[mask]))
            )
    return summarise(rows)


def default_top1(test: Records) -> dict[str, Any]:
    """The template default's top-1 score per workload: a model must beat it to be useful."""
    rows: dict[str, list[tuple[int, dict[str, float]]]] = {}
    first = {(r["workload"], r["target"], r["cpu_kind"]): r for r in test}
    for group in groups_of(test):
        space = design_space(tt.workload(group.key[0]), target_of(first[group.key]))
        default = space.default
        # spelled out in full: a record taken before a knob was added lacks it
        keys = [canonical_json(space.space.complete(c)) for c in group.configs]
        if canonical_json(default) not in keys or len(keys) < 2:
            continue
        scores = np.array([1.0 if k == canonical_json(default) else 0.0 for k in keys])
        m = ranking_metrics(scores, np.array(group.costs))
        rows.setdefault(group.op_class, []).append(
            (
                len(keys),
                {
                    "pairwise_accuracy": math.nan,
                    "spearman": math.nan,
                    "top1_score": m["top1_score"],
                    "top5_score": math.nan,
                },
            )
        )
    return summarise(rows)


def kinds(records: Records) -> str:
    return ", ".join(sorted({r["cpu_kind"] for r in records})) or "none"


def show(title: str, result: dict[str, Any], train: Records | None, test: Records) -> None:
    used = f"train: {kinds(train)} ({len(train)} records); " if train is not None else ""
    print(f"\n{title}\n  {used}test: {kinds(test)} ({len(test)} records)")
    print(f"  {'op class':18} {'groups':>6} {'configs':>7} " + " ".join(f"{h:>9}" for h in HEADER))
    for cls, m in [*result["per_class"].items(), ("overall (weighted)", result["overall"])]:
        values = " ".join(f"{m[k]:9.3f}" for k in METRICS)
        print(f"  {cls:18} {m['groups']:6d} {m['configs']:7d} {values}")


def model_figure(
    title: str, name: str, train: Records, test: Records, seed: int, cache: FeatureCache
) -> CostModel | None:
    """Train ``name`` on ``train``, print its figures on ``test``, and return it."""
    if not train or not test:
        print(f"\n{title}\n  skipped: no {'training' if not train else 'test'} records")
        return None
    model, _ = fit(train, name, seed, cache)
    show(title, evaluate(model.predict, test, cache), train, test)
    return model


def repeat_timing(name: str, model: CostModel, test: Records, cache: FeatureCache) -> None:
    """What the host's noise leaves to rank: on the configs of each test group timed at least
    twice (at least 3 of them), each one's first timing ranked against the median of its
    other timings, as a model is scored; and ``model`` on the same configs against the median
    of all their timings. A model judged against measured times cannot beat the first by much."""
    repeated = []
    for g in groups_of(test):
        keep = [i for i, t in enumerate(g.timings) if len(t) >= 2]
        if len(keep) >= 3:
            pick = [g.configs[i] for i in keep], [g.costs[i] for i in keep]
            repeated.append(
                Group(g.key, g.op_class, *pick, g.records, [g.timings[i] for i in keep])
            )
    if not repeated:
        print("\nrepeat timing: no test config was timed twice")
        return
    data = feature_set(repeated, test, cache)
    scores = model.predict(data.features)
    noise: dict[str, list[tuple[int, dict[str, float]]]] = {}
    ranked: dict[str, list[tuple[int, dict[str, float]]]] = {}
    for gid, group in enumerate(data.info):
        mask = data.groups == gid
        space = cache[group.key].design.space  # feature_set's rows: the valid configs, in order
        times = [t for c, t in zip(group.configs, group.timings, strict=True) if space.is_valid(c)]
        first = np.array([-t[0] for t in times])
        others = np.array([statistics.median(t[1:]) for t in times])
        noise.setdefault(group.op_class, []).append((len(times), group_metrics(first, others)))
        ranked.setdefault(group.op_class, []).append(
            (len(times), group_metrics(scores[mask], data.costs[mask]))
        )
    show(
        "repeat timing (no model): a config's first timing ranked against the median of its "
        "others, on the test configs timed at least twice",
        summarise(noise),
        None,
        test,
    )
    show(
        f"{name} on the same configs, against the median of all their timings",
        summarise(ranked),
        None,
        test,
    )


def by_kind(records: Records, here: str) -> dict[str, Records]:
    """The records of each CPU kind, this host's kind first."""
    out: dict[str, Records] = {}
    for r in sorted(records, key=lambda r: r["cpu_kind"] != here):
        out.setdefault(r["cpu_kind"], []).append(r)
    return out


def shipped_prior(test: Records, here: str, cache: FeatureCache) -> None:
    """The package's prior as it is, per CPU kind of the test records: the figure a retrained
    prior must not fall below."""
    model = load_pretrained(PRETRAINED_PATH)
    if model is None:
        print(f"\nthe shipped prior\n  skipped: {PRETRAINED_PATH} is missing or unreadable")
        return
    meta = pretrained_meta(PRETRAINED_PATH) or {}
    trained = ", ".join(meta.get("cpu_kinds", ["?"]))
    for kind, records in by_kind(test, here).items():
        title = (
            f"the shipped prior ({meta.get('model', '?')}, trained on {trained}, "
            f"{meta.get('records', '?')} records), tested on {kind}"
        )
        show(title, evaluate(model.predict, records, cache), None, records)


def cross_cpu(
    name: str, train: Records, test: Records, here: str, seed: int, cache: FeatureCache
) -> None:
    """Per CPU kind of the held-out records: model ``name`` trained on the other kinds (does
    it transfer?), on every kind, and on that kind alone, all tested on that kind."""
    if len({r["cpu_kind"] for r in [*train, *test]}) < 2:
        print(f"\ncross-CPU: the dataset holds one CPU kind ({kinds(test)}); nothing to transfer")
        return
    for kind, records in by_kind(test, here).items():
        where = "this host's kind" if kind == here else "another host's kind"
        subsets = {
            "the other CPU kinds": [r for r in train if r["cpu_kind"] != kind],
            "every CPU kind": train,
            f"{kind} only": [r for r in train if r["cpu_kind"] == kind],
        }
        for label, subset in subsets.items():
            title = f"{name}: trained on {label}, tested on {kind} ({where})"
            model_figure(title, name, subset, records, seed, cache)


def collect_held_out(db_path: str, max_seconds: float, trials: int) -> Records:
    target = tt.Target.detect()
    with open_database(db_path) as db:
        steps = collect(
            db,
            collection_order(held_out_workloads()),
            target,
            trials=trials,
            max_seconds=max_seconds,
            progress=lambda s: print(
                f"  [{s.index}/{s.total}] {s.workload}: {s.before} -> {s.after} configs", flush=True
            ),
        )
        print(f"collected {sum(s.after - s.before for s in steps)} configs of held-out workloads")
        with tempfile.TemporaryDirectory() as tmp:
            export_dataset(db, Path(tmp) / "held_out.jsonl.gz", host=target)
            return read_records([tmp])


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("inputs", nargs="*", default=["data/dataset"], help="dataset files or dirs")
    ap.add_argument(
        "--models",
        default="lgbm-rank,xgb-rank,random",
        help="registered cost models, comma-separated",
    )
    ap.add_argument("--restricted", default="threads=1", help="avx2 or threads=N")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--cv",
        type=int,
        default=0,
        metavar="K",
        help="first print grouped K-fold cross-validation over the training workloads",
    )
    ap.add_argument(
        "--cv-by",
        choices=("workload", "family"),
        default="workload",
        help="what each cross-validation fold holds out whole: workloads or network families",
    )
    ap.add_argument(
        "--collect-held-out",
        action="store_true",
        help="measure the held-out families first when the dataset has none",
    )
    ap.add_argument(
        "--db",
        default=None,
        help="tuning database to collect into (default: dataset.db in the user cache directory)",
    )
    ap.add_argument("--max-seconds", type=float, default=600.0, help="collection budget")
    ap.add_argument("--trials-per-workload", type=int, default=12)
    args = ap.parse_args(argv)

    records = read_records(args.inputs)
    held = set(held_out_workloads())
    train = training_records(records)
    test = [r for r in records if r["workload"] in held]
    if not test:
        print(
            f"the dataset has no records of the held-out families ({', '.join(HELD_OUT_FAMILIES)})"
        )
        if not args.collect_held_out:
            print("rerun with --collect-held-out to measure them first")
            return 1
        test = [
            r
            for r in collect_held_out(
                args.db or str(dataset_db_path()), args.max_seconds, args.trials_per_workload
            )
            if r["workload"] in held
        ]
        if not test:
            print("no held-out records could be collected in the budget")
            return 1
    host = tt.Target.detect()
    here = cpu_kind(host.name, host.isa, cpu_family_model())
    print(
        f"held-out families: {', '.join(HELD_OUT_FAMILIES)}; this host: "
        f"{here}; {len(train)} training and {len(test)} test records"
    )
    cache: FeatureCache = {}  # every config is lowered once, whatever figures it enters
    if args.cv > 1:
        data = feature_set(groups_of(train), train, cache)
        for name in args.models.split(","):
            show(
                f"{name}: {args.cv}-fold cross-validation over the training workloads, "
                f"grouped by {args.cv_by}",
                cross_validate(name, data, args.cv, args.seed, args.cv_by),
                None,
                train,
            )
    models = {
        name: model_figure(
            f"{name}: trained on the training families", name, train, test, args.seed, cache
        )
        for name in args.models.split(",")
    }
    name = args.models.split(",")[0]
    if models[name] is not None:
        repeat_timing(name, models[name], test, cache)
    show(
        "template default (no model): top-1 = default's throughput / best measured",
        default_top1(test),
        None,
        test,
    )
    on = on_target(args.restricted)
    model_figure(
        f"{name}: trained only on {args.restricted} records, tested on the other targets",
        name,
        [r for r in train if on(r)],
        [r for r in test if not on(r)],
        args.seed,
        cache,
    )
    shipped_prior(test, here, cache)
    cross_cpu(name, train, test, here, args.seed, cache)
    return 0


if __name__ == "__main__":
    sys.exit(main())
