"""The XGBoost ranking model: learns, is deterministic, persists as JSON, names its extra."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from tensortune.cost_model import XGBCostModel, get_cost_model, ranking_metrics
from tensortune.errors import MissingDependency

from .test_cost_model import synthetic

pytest.importorskip("xgboost", reason='needs pip install "tensortune[xgboost]"')


def test_learns_a_synthetic_ranking() -> None:
    x, cost = synthetic(200, seed=0)
    x_test, cost_test = synthetic(300, seed=1)
    metrics = ranking_metrics(XGBCostModel(seed=0).fit(x, cost).predict(x_test), cost_test)
    assert metrics["pairwise_accuracy"] > 0.75 and metrics["top5_score"] > 0.8


def test_ranks_within_each_workload() -> None:
    x, cost = synthetic(160, seed=8)
    groups = np.repeat([1, 0], 80)  # unsorted query ids
    model = XGBCostModel(seed=0).fit(x, np.where(groups == 1, cost * 1000, cost), groups)
    x_test, cost_test = synthetic(200, seed=9)
    assert ranking_metrics(model.predict(x_test), cost_test)["pairwise_accuracy"] > 0.75


def test_deterministic_tiny_and_missing_values() -> None:
    x, cost = synthetic(60, seed=2)
    x[::7, 1] = np.nan  # a config that failed to lower
    a = XGBCostModel(seed=3).fit(x, cost).predict(x)
    np.testing.assert_array_equal(a, XGBCostModel(seed=3).fit(x, cost).predict(x))
    assert XGBCostModel().fit(x[:1], cost[:1]).predict(x).shape == (60,)


def test_save_load_round_trip(tmp_path: Path) -> None:
    x, cost = synthetic(80, seed=5)
    model = get_cost_model("xgb-rank", seed=1).fit(x, cost)
    model.save(tmp_path / "m.npz")
    loaded = XGBCostModel.load(tmp_path / "m.npz")
    np.testing.assert_allclose(loaded.predict(x), model.predict(x))
    assert loaded.update(x[:5], cost[:5]).n_samples == 85


def test_predict_before_fit_and_bad_input() -> None:
    with pytest.raises(RuntimeError, match="before fit"):
        XGBCostModel().predict(np.zeros((2, 3)))
    model = XGBCostModel().fit(*synthetic(10, seed=0))
    with pytest.raises(ValueError, match="2-D"):
        model.predict(np.zeros(3))
    assert model.predict(np.zeros((0, 6))).shape == (0,)


def test_absent_xgboost_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "xgboost", None)  # import now raises ImportError
    with pytest.raises(MissingDependency, match=r'pip install "tensortune\[xgboost\]"'):
        XGBCostModel()
