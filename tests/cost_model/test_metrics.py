"""ranking_metrics on hand-checkable cases."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tensortune.cost_model import confident_gap, ranking_metrics


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


def test_confident_gap_is_the_narrowest_gap_whose_wider_pairs_are_right_often_enough() -> None:
    """Far-apart scores ordered right, one close call wrong: at 0.9 the gap must exclude the
    close call; at 0.8 it may include it; a ranking wrong on every pair never reaches 0.9."""
    costs = [1.0, 2.0, 3.0, 4.0]
    scores = [10.0, 9.0, 0.5, 0.6]  # the (3.0, 4.0) pair is the only wrong one, 0.1 apart
    groups = [0, 0, 0, 0]
    assert confident_gap(scores, costs, groups, 0.9) == pytest.approx(1.0)
    assert confident_gap(scores, costs, groups, 0.8) == pytest.approx(0.1)
    assert confident_gap([1.0, 2.0, 3.0, 4.0], costs, groups, 0.9) == math.inf
    assert confident_gap(scores, [1.0] * 4, groups, 0.9) == math.inf  # no pair to judge


def test_confident_gap_compares_only_within_a_group_and_counts_failures_as_slowest() -> None:
    # across the groups, score 5.0 (cost 9) vs 1.0 (cost 1) would be a wide wrong pair
    costs = [1.0, math.inf, 9.0, 10.0]
    scores = [1.0, 0.0, 5.0, 4.0]
    assert confident_gap(scores, costs, [0, 0, 1, 1], 1.0) == pytest.approx(1.0)
