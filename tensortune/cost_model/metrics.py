"""How well a cost model *ranks* configs, with TenSet's definitions.

Search only ever asks "which of these is faster?", so these metrics judge orderings, never
predicted seconds.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from .cost_model import as_costs

_CHUNK = 1024  # rows per block in the O(n^2) pairwise count, to bound memory


def ranking_metrics(
    pred_scores: Sequence[float] | np.ndarray, true_costs: Sequence[float] | np.ndarray
) -> dict[str, float]:
    """``pairwise_accuracy``, ``top1_score`` and ``top5_score`` of predictions (higher = faster).

    * pairwise accuracy: over all pairs with different true costs, the fraction the model orders
      correctly (tied predictions count one half);
    * top-k score: best true throughput among the model's k highest-scored configs, divided by
      the best true throughput overall (1.0 = the model's top-k contains the optimum).

    Failed runs (inf cost) have throughput 0. Scores are NaN when undefined (no pair with
    different costs, or no successful run at all). The pairwise figure is TenSet's
    (``metric_pairwise_comp_accuracy``: every pair counts, near-ties too) wherever true costs
    and predictions are distinct; TenSet scores a tie by its index order, we drop equal costs
    and give tied predictions one half.
    """
    scores = np.asarray(pred_scores, dtype=np.float64).reshape(-1)
    throughput = _throughput(true_costs)
    if len(scores) != len(throughput):
        raise ValueError(f"{len(scores)} predictions for {len(throughput)} costs")
    return {
        "pairwise_accuracy": _pairwise_accuracy(scores, throughput),
        "top1_score": _top_k_score(scores, throughput, 1),
        "top5_score": _top_k_score(scores, throughput, 5),
    }


def _throughput(true_costs: Sequence[float] | np.ndarray) -> np.ndarray:
    """Runs per second: failed runs (inf cost) have throughput 0."""
    costs = as_costs(true_costs)
    return np.where(np.isfinite(costs), 1.0 / np.maximum(costs, 1e-300), 0.0)


def _pairwise_accuracy(scores: np.ndarray, throughput: np.ndarray) -> float:
    right = total = 0.0
    for start in range(0, len(scores), _CHUNK):
        s, t = scores[start : start + _CHUNK, None], throughput[start : start + _CHUNK, None]
        true_sign = np.sign(t - throughput[None, :])
        pred_sign = np.sign(s - scores[None, :])
        counted = true_sign != 0  # each unordered pair appears twice; the ratio is unaffected
        total += counted.sum()
        right += ((pred_sign == true_sign) & counted).sum() + 0.5 * (
            (pred_sign == 0) & counted
        ).sum()
    return float(right / total) if total else float("nan")


def confident_gap(
    pred_scores: Sequence[float] | np.ndarray,
    true_costs: Sequence[float] | np.ndarray,
    groups: Sequence[int] | np.ndarray,
    accuracy: float,
) -> float:
    """The smallest score gap at which predictions are right at least ``accuracy`` of the time:
    over the pairs of one group with different true costs that the scores put at least that far
    apart, the share ordered correctly. A ranking model's scores have no unit, so how far apart
    two must be before the order can be believed is a property of the model, read off scores
    it gave configs of workloads it never saw. ``inf`` when no gap reaches ``accuracy``."""
    scores = np.asarray(pred_scores, dtype=np.float64).reshape(-1)
    throughput = _throughput(true_costs)
    ids = np.asarray(groups).reshape(-1)
    gaps, right = [], []
    for gid in np.unique(ids):
        s, t = scores[ids == gid], throughput[ids == gid]
        i, j = np.triu_indices(len(s), k=1)
        counted = (t[i] != t[j]) & np.isfinite(s[i]) & np.isfinite(s[j])
        i, j = i[counted], j[counted]
        gaps.append(np.abs(s[i] - s[j]))
        right.append(np.sign(s[i] - s[j]) == np.sign(t[i] - t[j]))
    if not gaps or not sum(len(g) for g in gaps):
        return math.inf
    gap, ok = np.concatenate(gaps), np.concatenate(right)
    order = np.argsort(-gap, kind="stable")  # widest first: the share right among the widest n
    share = np.cumsum(ok[order]) / np.arange(1, len(order) + 1)
    reached = np.flatnonzero(share >= accuracy)
    return float(gap[order][reached[-1]]) if len(reached) else math.inf


def _top_k_score(scores: np.ndarray, throughput: np.ndarray, k: int) -> float:
    best = throughput.max(initial=0.0)
    if best <= 0:
        return float("nan")
    top = np.argsort(-scores, kind="stable")[:k]
    return float(throughput[top].max() / best)
