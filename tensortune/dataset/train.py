"""Fit the pretrained cost model on exported dataset records.

Features are recomputed here from (workload, target, config), never read from the files. Rows
are grouped by workload, target and CPU kind: costs (ratios to the template default timed
beside each candidate) compare only within a group. A config measured several times counts
once, by its median; a config that never succeeded is a failure (the worst of its group).
Records that timed the host rather than their config (timeouts, stalled references) are left
out (``host_events``).
Records of registered plug-in spaces are skipped (their code never travels with a record), and
so are held-out workloads: the prior never sees a layer of a held-out network.
"""

from __future__ import annotations

import datetime
import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

from ..cost_model import (
    CostModel,
    LGBMCostModel,
    XGBCostModel,
    confident_gap,
    get_cost_model,
    ranking_metrics,
)
from ..cost_model.features import LoopNestFeatures
from ..cost_model.pretrained import CONFIDENT_ACCURACY, PRETRAINED_PATH, save_pretrained
from ..database.record import canonical_json, rank_score, reference_scale, timed_in_stall
from ..space.registry import design_space
from ..workload import workload
from .records import DatasetError, on_target, target_of
from .workloads import check_no_held_out, held_out_workloads

GroupKey = tuple[str, str, str]
"""(workload, target, cpu_kind): the records whose costs may be compared."""


@dataclass
class Group:
    """One workload on one target and CPU: its distinct configs and their costs."""

    key: GroupKey
    op_class: str
    configs: list[dict[str, Any]]
    costs: list[float]
    records: int
    timings: list[list[float]] = field(default_factory=list)
    """Every successful timing of each config (aligned with ``configs``; ``costs`` holds their
    medians): how far two timings of one config disagree bounds any model's ranking."""


@dataclass
class FeatureSet:
    """Rows for ``CostModel.fit``: features, costs (inf = failed) and a group id per row."""

    features: np.ndarray
    costs: np.ndarray
    groups: np.ndarray
    info: list[Group] = field(default_factory=list)

    @property
    def records(self) -> int:
        return sum(g.records for g in self.info)


def groups_of(records: Sequence[dict[str, Any]]) -> list[Group]:
    """Records by (workload, target, CPU kind), each config once with its median cost; the
    records that timed the host rather than their config (``host_events``) are left out."""
    by_key: dict[GroupKey, list[dict[str, Any]]] = {}
    for rec in records:
        if rec.get("space", ""):
            continue
        key = (rec["workload"], rec["target"], rec["cpu_kind"])
        by_key.setdefault(key, []).append(rec)
    out = []
    for key, recs in sorted(by_key.items()):
        dropped = host_events(recs)
        recs = [r for r in recs if id(r) not in dropped]
        if not recs:
            continue
        ok = [SimpleNamespace(**r) for r in recs if r.get("error") is None]
        score = rank_score(ok) if ok else None
        times: dict[str, list[float]] = {}
        configs: dict[str, dict[str, Any]] = {}
        for r in recs:
            k = canonical_json(r["config"])
            configs.setdefault(k, r["config"])
            times.setdefault(k, [])
            if score is not None and r.get("error") is None:
                times[k].append(float(score(SimpleNamespace(**r))))
        costs = [statistics.median(t) if t else math.inf for t in times.values()]
        timings = list(times.values())
        out.append(
            Group(key, recs[0]["op_class"], list(configs.values()), costs, len(recs), timings)
        )
    return out


def host_events(records: Sequence[dict[str, Any]]) -> set[int]:
    """The ids of one group's records that measured the host, not their config.

    * a timeout: the kernels of these spaces take micro- to milliseconds, far below the
      runner's limit, so a timeout is a stalled host (or a hung kernel, which a record cannot
      tell apart): its time is unknown, not the worst;
    * a success whose paired reference ran ``STALL_FACTOR`` times the group's median reference
      (``database.record.timed_in_stall``; records of versions before the runner timed
      stalled rounds again): both blocks waited out the same time slice and their ratio says
      nothing about the config (Zen 4 records of 2026-11: 20 ms blocks of 60 us kernels).

    Left in, they mislabel configs as the slowest of their group, in training and in the
    held-out check alike."""
    ok = {id(r): SimpleNamespace(**r) for r in records if r.get("error") is None}
    scale = reference_scale(list(ok.values()))
    return {
        id(r)
        for r in records
        if r.get("error") == "timeout"
        or (id(r) in ok and scale is not None and timed_in_stall(ok[id(r)], scale))
    }


#: Each group's feature extractor, reused across ``feature_set`` calls so that an evaluation
#: drawing many training and test subsets from one dataset lowers every config once.
FeatureCache = dict[GroupKey, LoopNestFeatures]


def feature_set(
    groups: Sequence[Group], records: Sequence[dict[str, Any]], cache: FeatureCache | None = None
) -> FeatureSet:
    """Recompute ``TRANSFERABLE_FEATURES`` of every group's configs on its own target; with a
    ``cache``, each (workload, target, CPU kind, config) is lowered once across calls."""
    first = {(r["workload"], r["target"], r["cpu_kind"]): r for r in records}
    xs: list[np.ndarray] = []
    ys: list[list[float]] = []
    gs: list[np.ndarray] = []
    kept: list[Group] = []
    for group in groups:
        extractor = None if cache is None else cache.get(group.key)
        if extractor is None:
            target = target_of(first[group.key])
            extractor = LoopNestFeatures(design_space(workload(group.key[0]), target))
            if cache is not None:
                cache[group.key] = extractor
        valid = [i for i, c in enumerate(group.configs) if extractor.design.space.is_valid(c)]
        if not valid:
            continue
        xs.append(extractor.transferable([group.configs[i] for i in valid]))
        ys.append([group.costs[i] for i in valid])
        gs.append(np.full(len(valid), len(kept)))
        kept.append(group)
    if not kept:
        raise DatasetError("no record of the dataset is a valid config of this version's spaces")
    return FeatureSet(np.vstack(xs), np.concatenate(ys), np.concatenate(gs), kept)


def ranking_check(data: FeatureSet, scores: np.ndarray) -> dict[str, Any]:
    """How well ``scores`` rank each group's configs of ``data``: the mean pairwise accuracy and
    top-5 score over groups, weighted by configs, overall and per op class (``per_op_class``).
    Groups without scores (NaN: no model scored them) are left out."""
    rows: list[tuple[str, int, dict[str, float]]] = []
    for gid, group in enumerate(data.info):
        mask = data.groups == gid
        if np.isnan(scores[mask]).any():
            continue
        metrics = ranking_metrics(scores[mask], data.costs[mask])
        if mask.sum() >= 2 and not math.isnan(metrics["pairwise_accuracy"]):
            rows.append((group.op_class, int(mask.sum()), metrics))

    def summary(chosen: Sequence[tuple[str, int, dict[str, float]]]) -> dict[str, Any]:
        def mean(name: str) -> float | None:
            if not chosen:
                return None
            weights = [n for _, n, _ in chosen]
            return float(np.average([m[name] for _, _, m in chosen], weights=weights))

        return {
            "workloads": len(chosen),
            "pairwise_accuracy": mean("pairwise_accuracy"),
            "top5_score": mean("top5_score"),
        }

    classes = sorted({cls for cls, _, _ in rows})
    return {
        **summary(rows),
        "per_op_class": {c: summary([r for r in rows if r[0] == c]) for c in classes},
    }


def held_out_check(model: CostModel, held: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """How well ``model`` ranks the configs of the held-out families' workloads (never trained
    on), as ``ranking_check`` reports it. A zero-shot compile trusts the model only as far as
    this says (``tuning.zero_shot``): an op class it ranks worse than the bar keeps the default."""
    if not held:
        return ranking_check(FeatureSet(np.zeros((0, 0)), np.zeros(0), np.zeros(0)), np.zeros(0))
    data = feature_set(groups_of(held), held)
    return ranking_check(data, model.predict(data.features))


#: Folds and model seed of the cross-validation ``train_pretrained`` stores with the model: the
#: trust figure of an op class that no held-out family tests (``tuning.zero_shot``). Fixed, so
#: the figure is reproducible; five folds cost five more fits on 80% of the rows each.
CV_FOLDS = 5
CV_SEED = 0


def workload_folds(data: FeatureSet, k: int, units: Sequence[str] | None = None) -> np.ndarray:
    """A fold in ``0..k-1`` per row: the units of each op class (each group's workload, or the
    given ``units``, one per group, e.g. its network family) dealt round-robin over ``k`` folds
    in name order, continuing from class to class, so every fold holds whole units of most
    classes and a workload's groups on several targets and CPUs always share a fold."""
    units = [g.key[0] for g in data.info] if units is None else list(units)
    first: dict[str, str] = {}
    for unit, group in zip(units, data.info, strict=True):
        first.setdefault(unit, group.op_class)
    order = sorted(first, key=lambda u: (first[u], u))
    fold = {unit: i % k for i, unit in enumerate(order)}
    return np.array([fold[units[g]] for g in data.groups], dtype=np.int64)


def out_of_fold_scores(
    data: FeatureSet, model: str, k: int, seed: int, units: Sequence[str] | None = None
) -> np.ndarray:
    """Every row's score by a fresh ``model`` (``pretrain_model``) trained on the other folds
    (``workload_folds``): predictions for workloads the model never saw, from training data."""
    folds = workload_folds(data, k, units)
    scores = np.full(len(data.costs), np.nan)
    for f in range(k):
        train, test = folds != f, folds == f
        if train.any() and test.any():
            fitted = pretrain_model(model, seed).fit(
                data.features[train], data.costs[train], data.groups[train]
            )
            scores[test] = fitted.predict(data.features[test])
    return scores


def cross_validated_check(
    data: FeatureSet, model: str, k: int = CV_FOLDS, seed: int = CV_SEED
) -> dict[str, Any]:
    """``ranking_check`` of ``model``'s out-of-fold scores over the training groups ``data``
    (``k`` workload-grouped folds, fewer when there are fewer workloads; none below two)."""
    folds = min(k, len({g.key[0] for g in data.info}))
    if folds < 2:
        folds, scores = 0, np.full(len(data.costs), np.nan)
    else:
        scores = out_of_fold_scores(data, model, folds, seed)
    check = {"folds": folds, "seed": seed, **ranking_check(data, scores)}
    if folds:
        classes = np.array([g.op_class for g in data.info])[data.groups]
        check["confident_gap"] = _gap(scores, data.costs, data.groups)
        for cls, row in check["per_op_class"].items():
            on = classes == cls
            row["confident_gap"] = _gap(scores[on], data.costs[on], data.groups[on])
    return check


def _gap(scores: np.ndarray, costs: np.ndarray, groups: np.ndarray) -> float | None:
    """``confident_gap`` at ``CONFIDENT_ACCURACY``, None where no gap reaches it (JSON has no
    infinity)."""
    gap = confident_gap(scores, costs, groups, CONFIDENT_ACCURACY)
    return gap if math.isfinite(gap) else None


#: Each training group's fastest configs shipped with the model as zero-shot candidates.
EXEMPLARS_PER_GROUP = 2


def exemplars(
    groups: Sequence[Group], per_group: int = EXEMPLARS_PER_GROUP
) -> list[dict[str, Any]]:
    """The ``per_group`` fastest configs of each group that ran no slower than its paired
    reference (the template default when measured): what a shape nobody tuned may start from,
    since a sample of a space is mostly far slower than its best (see ``tuning/zero_shot.py``)."""
    out = []
    for g in groups:
        order = sorted(range(len(g.costs)), key=lambda i: g.costs[i])[:per_group]
        out += [
            {"workload": g.key[0], "target": g.key[1], "cpu_kind": g.key[2], "config": g.configs[i]}
            for i in order
            if g.costs[i] <= 1.0
        ]
    return out


def training_records(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records of workloads that may be trained on (held-out families removed)."""
    held = set(held_out_workloads())
    return [r for r in records if r["workload"] not in held]


#: The pretrained models' hyper-parameters, chosen by grouped cross-validation over the training
#: workloads (``benchmarks/cost_model_eval.py --cv``: every fold holds out whole workloads, so
#: the choice never sees a held-out family). A registered model's defaults suit one run's few
#: hundred samples of one workload; thousands of rows over many workloads overfit with them,
#: and trees that each see a random share of rows and columns rank unseen shapes better. LightGBM's
#: 16 leaves (not 8) added 0.005 to the cross-validated pairwise accuracy, in 7 of 8 random
#: workload splits.
PRETRAIN_MODELS: dict[str, Callable[[int], CostModel]] = {
    "lgbm-rank": lambda seed: LGBMCostModel(
        "rank", seed, n_estimators=400, num_leaves=16, learning_rate=0.05, bagging_fraction=0.8
    ),
    "xgb-rank": lambda seed: XGBCostModel(
        seed,
        n_estimators=400,
        max_depth=6,
        learning_rate=0.05,
        subsample=0.8,
        colsample_bytree=0.5,
    ),
}


def pretrain_model(name: str, seed: int = 0) -> CostModel:
    """A fresh, untrained model ``name`` with its pretraining hyper-parameters
    (``PRETRAIN_MODELS``), or the registered model's own for any other name."""
    factory = PRETRAIN_MODELS.get(name)
    return factory(seed) if factory is not None else get_cost_model(name, seed)


def fit(
    records: Sequence[dict[str, Any]],
    model: str = "lgbm-rank",
    seed: int = 0,
    cache: FeatureCache | None = None,
) -> tuple[CostModel, FeatureSet]:
    """A fresh model (``pretrain_model``) fitted on the records' recomputed features (through
    ``cache`` when given); records of a held-out family are refused (pass them through
    ``training_records`` first)."""
    check_no_held_out({r["workload"] for r in records})
    data = feature_set(groups_of(records), records, cache)
    return pretrain_model(model, seed).fit(data.features, data.costs, data.groups), data


def train_pretrained(
    records: Sequence[dict[str, Any]],
    model: str = "lgbm-rank",
    path: str | Path | None = None,
    restricted: str | None = None,
) -> tuple[Path, dict[str, Any]]:
    """Fit ``model`` on every trainable record and save it as a pretrained file (default: the
    package's); returns the path and the meta saved beside the model. With ``restricted`` (a
    target spec of ``on_target``: ``"avx2"``, ``"threads=1"``) it trains on that target's
    records only and its held-out check tests it on every other target's: how a prior from a
    smaller machine, or a cheaper collection, carries to the full one."""
    train = training_records(records)
    held_keys = set(held_out_workloads())
    held = [r for r in records if r["workload"] in held_keys]
    if restricted is not None:
        on = on_target(restricted)
        train = [r for r in train if on(r)]
        held = [r for r in held if not on(r)]
    if not train:
        raise DatasetError(
            "no record to train on: every record belongs to a held-out family"
            + ("" if restricted is None else f" or to a target other than {restricted!r}")
        )
    fitted, data = fit(train, model)
    per_class: dict[str, int] = {}
    for g in data.info:
        per_class[g.op_class] = per_class.get(g.op_class, 0) + g.records
    meta = {
        "model": model,
        "records": data.records,
        "configs": len(data.costs),
        "workloads": len({g.key[0] for g in data.info}),
        "records_per_op_class": dict(sorted(per_class.items())),
        "cpu_kinds": sorted({g.key[2] for g in data.info}),
        "targets": sorted({g.key[1] for g in data.info}),
        "restricted": restricted,
        "date": datetime.date.today().isoformat(),
        "held_out": held_out_check(fitted, held),
        "cross_validated": cross_validated_check(data, model),
    }
    out = Path(PRETRAINED_PATH if path is None else path)
    save_pretrained(fitted, out, meta=meta, exemplars=exemplars(data.info))
    return out, meta
