"""Cost models: LightGBM learns a ranking, the random baseline does not, both persist."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tensortune.cost_model import (
    LGBMCostModel,
    RandomCostModel,
    ranking_metrics,
    relative_log_throughput,
)


def synthetic(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Features in [0, 1)^6 and seconds with interactions, a cliff and a failure region."""
    rng = np.random.default_rng(seed)
    x = rng.random((n, 6))
    log_cost = (
        2 * (x[:, 0] - 0.3) ** 2
        + (x[:, 1] - 0.7) ** 2
        + x[:, 0] * x[:, 2]
        + 0.8 * (x[:, 3] > 0.6)  # a cache cliff
        + 0.05 * rng.standard_normal(n)  # timing noise
    )
    cost = 1e-3 * np.exp(log_cost)
    cost[x[:, 4] > 0.95] = np.inf  # failed builds
    return x, cost


@pytest.mark.parametrize(("objective", "floor"), [("regression", 0.8), ("rank", 0.75)])
def test_lgbm_learns_a_synthetic_ranking(objective: str, floor: float) -> None:
    x, cost = synthetic(200, seed=0)
    x_test, cost_test = synthetic(300, seed=1)
    model = LGBMCostModel(objective, seed=0).fit(x, cost)  # type: ignore[arg-type]
    metrics = ranking_metrics(model.predict(x_test), cost_test)
    assert metrics["pairwise_accuracy"] > floor
    assert metrics["top5_score"] > 0.8


def test_random_model_is_a_coin_flip() -> None:
    x_test, cost_test = synthetic(300, seed=1)
    model = RandomCostModel(0).fit(*synthetic(50, seed=0))
    assert 0.4 < ranking_metrics(model.predict(x_test), cost_test)["pairwise_accuracy"] < 0.6


def test_lgbm_is_deterministic_for_a_seed() -> None:
    x, cost = synthetic(60, seed=2)
    a = LGBMCostModel(seed=3).fit(x, cost).predict(x)
    b = LGBMCostModel(seed=3).fit(x, cost).predict(x)
    np.testing.assert_array_equal(a, b)


def test_failures_score_worst() -> None:
    x, cost = synthetic(200, seed=0)
    model = LGBMCostModel(seed=0).fit(x, cost)
    scores = model.predict(x)
    failed = ~np.isfinite(cost)
    assert failed.any() and scores[failed].max() < np.median(scores[~failed])


@pytest.mark.parametrize("n", [1, 2, 5, 20])
def test_tiny_training_sets_work(n: int) -> None:
    x, cost = synthetic(n, seed=4)
    assert LGBMCostModel(seed=0).fit(x, cost).predict(x).shape == (n,)


def test_update_equals_fitting_everything() -> None:
    x, cost = synthetic(80, seed=5)
    online = LGBMCostModel(seed=0).fit(x[:40], cost[:40]).update(x[40:], cost[40:])
    batch = LGBMCostModel(seed=0).fit(x, cost)
    assert online.n_samples == 80
    np.testing.assert_allclose(online.predict(x), batch.predict(x))


@pytest.mark.parametrize("objective", ["regression", "rank"])
def test_lgbm_save_load_round_trip(tmp_path: Path, objective: str) -> None:
    x, cost = synthetic(50, seed=6)
    model = LGBMCostModel(objective, seed=1, num_leaves=5).fit(x, cost)  # type: ignore[arg-type]
    path = tmp_path / "model.bin"
    model.save(path)
    loaded = LGBMCostModel.load(path)
    assert path.exists() and (loaded.objective, loaded.num_leaves) == (objective, 5)
    np.testing.assert_allclose(loaded.predict(x), model.predict(x))
    more_x, more_cost = synthetic(10, seed=7)
    assert loaded.update(more_x, more_cost).n_samples == 60


def test_unfitted_models_save_and_load(tmp_path: Path) -> None:
    LGBMCostModel(seed=2).save(tmp_path / "m")
    assert LGBMCostModel.load(tmp_path / "m").n_samples == 0
    RandomCostModel(9).save(tmp_path / "r")
    assert RandomCostModel.load(tmp_path / "r").seed == 9
    with pytest.raises(ValueError, match="holds a RandomCostModel"):
        LGBMCostModel.load(tmp_path / "r")


def test_input_checks() -> None:
    with pytest.raises(RuntimeError, match="before fit"):
        LGBMCostModel().predict(np.zeros((1, 2)))
    with pytest.raises(ValueError, match="2-D"):
        LGBMCostModel().fit(np.zeros(3), [1, 2, 3])
    with pytest.raises(ValueError, match="3 feature rows, 2 costs"):
        LGBMCostModel().fit(np.zeros((3, 1)), [1, 2])
    with pytest.raises(ValueError, match=">= 0"):
        LGBMCostModel().fit(np.zeros((1, 1)), [-1.0])
    with pytest.raises(ValueError, match="objective"):
        LGBMCostModel("classification")  # type: ignore[arg-type]


def test_relative_log_throughput_is_per_group() -> None:
    rel = relative_log_throughput(
        np.array([1.0, 2.0, np.inf, 10.0, 40.0, np.nan]), np.array([0, 0, 0, 1, 1, 1])
    )
    np.testing.assert_allclose(rel, [0, -np.log(2), -np.log(2) - 1, 0, -np.log(4), -np.log(4) - 1])
    np.testing.assert_array_equal(relative_log_throughput(np.array([np.inf, np.inf])), [0, 0])


def test_groups_let_one_model_rank_two_workloads() -> None:
    x, cost = synthetic(160, seed=8)
    groups = np.repeat([0, 1], 80)
    scaled = np.where(groups == 1, cost * 1000, cost)  # second workload 1000x slower
    model = LGBMCostModel(seed=0).fit(x, scaled, groups)
    x_test, cost_test = synthetic(200, seed=9)
    assert ranking_metrics(model.predict(x_test), cost_test)["pairwise_accuracy"] > 0.75
