"""ranking_metrics on hand-checkable cases."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tensortune.cost_model import ranking_metrics


def test_perfect_and_reversed_rankings() -> None:
    cost = np.array([4.0, 1.0, 2.0, 8.0, 3.0, 5.0])
    perfect = ranking_metrics(-cost, cost)
    assert perfect == {"pairwise_accuracy": 1.0, "top1_score": 1.0, "top5_score": 1.0}
    reversed_ = ranking_metrics(cost, cost)
    assert reversed_["pairwise_accuracy"] == 0.0
    assert reversed_["top1_score"] == pytest.approx(1 / 8)  # picked the 8 s one; best is 1 s
    assert reversed_["top5_score"] == pytest.approx(1 / 2)  # best of the slowest five is 2 s


def test_ties_and_failures() -> None:
    cost = [1.0, 2.0, math.inf]
    tied = ranking_metrics([0.0, 0.0, 0.0], cost)
    assert tied["pairwise_accuracy"] == 0.5
    failed_first = ranking_metrics([0.0, 1.0, 2.0], cost)
    assert failed_first["top1_score"] == 0.0  # the model's pick failed
    assert failed_first["pairwise_accuracy"] == 0.0


def test_undefined_cases_are_nan() -> None:
    assert math.isnan(ranking_metrics([1.0, 2.0], [math.inf, math.inf])["top1_score"])
    assert math.isnan(ranking_metrics([1.0, 2.0], [3.0, 3.0])["pairwise_accuracy"])
    with pytest.raises(ValueError, match="2 predictions for 3 costs"):
        ranking_metrics([1.0, 2.0], [1.0, 2.0, 3.0])


def test_chunked_pairwise_count_matches_brute_force() -> None:
    rng = np.random.default_rng(0)
    cost = rng.integers(1, 50, 1300).astype(float)  # many ties in the truth
    scores = -cost + rng.normal(0, 10, 1300)
    i, j = np.triu_indices(1300, k=1)
    differ = cost[i] != cost[j]
    right = np.sign(scores[i] - scores[j]) == np.sign(cost[j] - cost[i])
    expected = right[differ].mean()
    assert ranking_metrics(scores, cost)["pairwise_accuracy"] == pytest.approx(expected)
