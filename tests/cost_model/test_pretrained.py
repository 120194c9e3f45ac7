"""The pretrained model file: JSON round trip, size limit, and the one-warning fallback."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest

import tensortune as tt
from tensortune.cost_model import (
    PRETRAINED_PATH,
    TRANSFERABLE_FEATURES,
    LGBMCostModel,
    RandomCostModel,
    XGBCostModel,
    load_pretrained,
    save_pretrained,
    transferable_features,
)
from tensortune.cost_model import pretrained as pretrained_module
from tensortune.space.registry import design_space
from tensortune.target import Target


@pytest.fixture(autouse=True)
def _fresh_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test sees the load cache of a new process (warnings are once per process)."""
    monkeypatch.setattr(pretrained_module, "_LOADED", {})
    monkeypatch.setattr(pretrained_module, "_WARNED", set())


@pytest.fixture(scope="module")
def data(target: Target) -> tuple[np.ndarray, np.ndarray]:
    ds = design_space(tt.workload("matmul:M=32,N=32,K=32"), target)
    x = transferable_features(ds, ds.space.sample(0, 24))
    return x, np.random.default_rng(0).uniform(1e-4, 1e-3, len(x))


@pytest.mark.parametrize("cls", [LGBMCostModel, XGBCostModel])
def test_round_trip_predicts_the_same(cls, data, tmp_path: Path) -> None:
    x, y = data
    model = cls(seed=0).fit(x, y)
    save_pretrained(model, tmp_path / "m.json", meta={"records": len(y), "cpus": ["test"]})
    doc = json.loads((tmp_path / "m.json").read_text())
    assert doc["feature_names"] == list(TRANSFERABLE_FEATURES)
    assert doc["meta"] == {"records": len(y), "cpus": ["test"]}
    assert "features" not in doc and "costs" not in doc  # no training arrays
    loaded = load_pretrained(tmp_path / "m.json")
    assert isinstance(loaded, cls)
    np.testing.assert_allclose(loaded.predict(x), model.predict(x))


def test_exemplars_round_trip_and_older_files_have_none(data, tmp_path: Path) -> None:
    x, y = data
    shipped = [{"workload": "matmul:M=32,N=32,K=32", "target": "t", "cpu_kind": "k", "config": {}}]
    save_pretrained(LGBMCostModel().fit(x, y), tmp_path / "m.json", meta={}, exemplars=shipped)
    assert pretrained_module.pretrained_exemplars(tmp_path / "m.json") == shipped
    doc = json.loads((tmp_path / "m.json").read_text())
    del doc["exemplars"]  # a file written before exemplars were kept
    (tmp_path / "old.json").write_text(json.dumps(doc))
    assert pretrained_module.pretrained_exemplars(tmp_path / "old.json") == []
    assert load_pretrained(tmp_path / "old.json") is not None


def test_refuses_models_it_could_not_load_back(data, tmp_path: Path) -> None:
    x, y = data
    with pytest.raises(ValueError, match="trained model"):
        save_pretrained(LGBMCostModel(), tmp_path / "m.json", meta={})
    with pytest.raises(ValueError, match="RandomCostModel"):
        save_pretrained(RandomCostModel().fit(x, y), tmp_path / "m.json", meta={})
    with pytest.raises(ValueError, match="TRANSFERABLE_FEATURES"):
        save_pretrained(LGBMCostModel().fit(x[:, :5], y), tmp_path / "m.json", meta={})


def test_refuses_a_file_over_the_size_limit(data, tmp_path: Path, monkeypatch) -> None:
    x, y = data
    monkeypatch.setattr(pretrained_module, "MAX_BYTES", 100)
    with pytest.raises(ValueError, match="MB limit"):
        save_pretrained(LGBMCostModel().fit(x, y), tmp_path / "m.json", meta={})
    assert not (tmp_path / "m.json").exists()


def _saved(data, path: Path) -> dict:
    x, y = data
    save_pretrained(LGBMCostModel().fit(x, y), path, meta={})
    return json.loads(path.read_text())


@pytest.mark.parametrize(
    ("damage", "problem"),
    [
        (lambda doc: "{not json", "unreadable"),
        (lambda doc: json.dumps({**doc, "version": 999}), "format version 999"),
        (lambda doc: json.dumps({**doc, "feature_names": ["x"]}), "other features"),
        (lambda doc: json.dumps({**doc, "class": "Pickle"}), "unknown model class"),
        (lambda doc: json.dumps({**doc, "exemplars": [{"workload": 1}]}), "exemplars are not"),
        (
            lambda doc: json.dumps({**doc, "state": {**doc["state"], "booster": "garbage"}}),
            "does not load",
        ),
    ],
)
def test_a_bad_file_falls_back_with_one_warning(data, tmp_path: Path, damage, problem) -> None:
    path = tmp_path / "m.json"
    path.write_text(damage(_saved(data, path)))
    with pytest.warns(UserWarning) as caught:
        assert load_pretrained(path) is None
        assert load_pretrained(path) is None  # the second load is silent
    assert len(caught) == 1
    message = str(caught[0].message)
    assert str(path) in message and problem in message and "learning from scratch" in message


def test_the_default_path_is_package_data_and_its_absence_warns_once(monkeypatch, tmp_path) -> None:
    assert PRETRAINED_PATH.parts[-3:] == ("cost_model", "pretrained", "default.json")
    monkeypatch.setattr(pretrained_module, "PRETRAINED_PATH", tmp_path / "default.json")
    with pytest.warns(UserWarning, match="no such file") as caught:
        assert load_pretrained() is None
        assert load_pretrained(None) is None
    assert len(caught) == 1


def test_each_load_is_a_fresh_model(data, tmp_path: Path) -> None:
    x, y = data
    _saved(data, tmp_path / "m.json")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        first, second = load_pretrained(tmp_path / "m.json"), load_pretrained(tmp_path / "m.json")
    assert first is not second
    assert first is not None and second is not None
    first.fit(x[:4], y[:4])
    assert not second.is_fitted
