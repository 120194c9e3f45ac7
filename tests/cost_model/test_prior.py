"""The prior calibrated online: ranks before any data, and the run's data can overrule it."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

from tensortune.cost_model import (
    TRANSFERABLE_FEATURES,
    LGBMCostModel,
    XGBCostModel,
    get_cost_model,
    ranking_metrics,
    save_pretrained,
)
from tensortune.cost_model import pretrained as pretrained_module
from tensortune.cost_model.prior import PriorCalibratedModel

PASSED = {"held_out": {"pairwise_accuracy": 1.0}}  # a prior that passed its held-out check

WIDTH = len(TRANSFERABLE_FEATURES)


def rows(n: int, seed: int, knobs: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(n, WIDTH + knobs))


def seconds(x: np.ndarray, sign: float = 1.0) -> np.ndarray:
    """Fast when column 0 is high (sign 1) or low (sign -1), plus a little column-1 effect."""
    return np.exp(-sign * x[:, 0] - 0.1 * x[:, 1]) * 1e-3


@pytest.fixture(scope="module")
def prior() -> LGBMCostModel:
    x = rows(300, 0)
    return LGBMCostModel(seed=0).fit(x, seconds(x))


def test_before_any_fit_it_predicts_the_prior(prior: LGBMCostModel) -> None:
    model = PriorCalibratedModel(prior)
    x = rows(50, 1, knobs=3)  # knob columns after the transferable ones are the trees' alone
    np.testing.assert_allclose(model.predict(x), prior.predict(x[:, :WIDTH]))
    assert model.prior_features == TRANSFERABLE_FEATURES


def test_a_prior_that_agrees_keeps_its_weight(prior: LGBMCostModel) -> None:
    x = rows(24, 2)
    model = PriorCalibratedModel(prior).fit(x, seconds(x))
    assert model.slope > 0.5


def test_the_runs_data_overrules_a_prior_that_is_wrong(prior: LGBMCostModel) -> None:
    train, test = rows(96, 3), rows(200, 4)
    model = PriorCalibratedModel(prior).fit(train, seconds(train, sign=-1.0))
    assert model.slope == 0.0  # the prior ranks this run backwards: no weight left
    truth = seconds(test, sign=-1.0)
    assert ranking_metrics(model.predict(test), truth)["pairwise_accuracy"] > 0.8


def test_wrong_width_is_a_clear_error(prior: LGBMCostModel) -> None:
    with pytest.raises(ValueError, match="TRANSFERABLE_FEATURES"):
        PriorCalibratedModel(prior).predict(np.zeros((2, 3)))


@pytest.mark.parametrize("cls", [LGBMCostModel, XGBCostModel])
def test_save_and_load_keep_prior_and_calibration(cls, tmp_path: Path) -> None:
    x = rows(64, 5)
    model = PriorCalibratedModel(cls(seed=0).fit(x, seconds(x))).fit(x[:20], seconds(x[:20]))
    model.save(tmp_path / "m.npz")
    loaded = PriorCalibratedModel.load(tmp_path / "m.npz")
    np.testing.assert_allclose(loaded.predict(x), model.predict(x))
    assert (loaded.slope, loaded.intercept) == (model.slope, model.intercept)
    loaded.update(x[20:30], seconds(x[20:30]))  # keeps learning after a load
    assert loaded.n_samples == 30


def test_pretrained_name_uses_the_package_file(prior, tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(pretrained_module, "_LOADED", {})
    monkeypatch.setattr(pretrained_module, "_WARNED", set())
    monkeypatch.setattr(pretrained_module, "PRETRAINED_PATH", tmp_path / "default.json")
    with pytest.warns(UserWarning, match="no such file") as caught:
        first = get_cost_model("pretrained", seed=0)
        second = get_cost_model("pretrained", seed=1)
    assert len(caught) == 1
    assert type(first) is type(second) is LGBMCostModel  # learns from scratch
    save_pretrained(prior, tmp_path / "default.json", meta=PASSED)
    model = get_cost_model("pretrained", seed=0)
    assert isinstance(model, PriorCalibratedModel) and not model.is_fitted


def test_a_prior_below_its_held_out_bar_is_not_used(prior, tmp_path, monkeypatch) -> None:
    """The shipped state of a young dataset: learn from scratch, without a warning."""
    monkeypatch.setattr(pretrained_module, "_LOADED", {})
    monkeypatch.setattr(pretrained_module, "PRETRAINED_PATH", tmp_path / "default.json")
    save_pretrained(prior, tmp_path / "default.json", meta={"held_out": {"pairwise_accuracy": 0.5}})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert type(get_cost_model("pretrained", seed=0)) is LGBMCostModel
