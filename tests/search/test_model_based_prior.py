"""The tuner's model search with a pretrained prior: ranks the first batch, falls back cleanly."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import tensortune as tt
from tensortune.cost_model import (
    TRANSFERABLE_FEATURES,
    LGBMCostModel,
    LoopNestFeatures,
    load_pretrained,
    save_pretrained,
    transferable_features,
)
from tensortune.cost_model import pretrained as pretrained_module
from tensortune.cost_model.prior import PriorCalibratedModel
from tensortune.errors import StrategyError
from tensortune.search import ModelBasedSearch, make_strategy, make_tuning_strategy
from tensortune.space import Knob, SearchSpace
from tensortune.space.registry import design_space
from tensortune.space.template import DesignSpace
from tensortune.target import Target

#: A prior that passed its held-out check, overall and for matmul (the op class tuned here).
PASSED = {
    "held_out": {"pairwise_accuracy": 1.0, "per_op_class": {"matmul": {"pairwise_accuracy": 1.0}}}
}
FAST = TRANSFERABLE_FEATURES.index("log_l1_traffic_per_flop")


def fake_seconds(x: np.ndarray) -> np.ndarray:
    """A made-up machine on which less L1 traffic per flop is all that matters."""
    return np.exp(np.nan_to_num(x[:, FAST], nan=10.0)) * 1e-4


@pytest.fixture(scope="module")
def design(target: Target) -> DesignSpace:
    return design_space(tt.workload("matmul:M=32,N=32,K=32"), target)


@pytest.fixture
def package_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The package's pretrained file, moved to a temporary path (nothing loaded or warned)."""
    path = tmp_path / "default.json"
    monkeypatch.setattr(pretrained_module, "PRETRAINED_PATH", path)
    monkeypatch.setattr(pretrained_module, "_LOADED", {})
    monkeypatch.setattr(pretrained_module, "_WARNED", set())
    return path


@pytest.fixture
def prior_file(design: DesignSpace, package_file: Path) -> Path:
    """A tiny prior, trained on two shapes of the same op, saved as the package's file."""
    other = design_space(tt.workload("matmul:M=48,N=32,K=64"), design.target)
    x = np.vstack(
        [
            transferable_features(other, other.space.sample(0, 48)),
            transferable_features(design, design.space.sample(2, 48)),
        ]
    )
    model = LGBMCostModel(seed=0).fit(x, fake_seconds(x), np.repeat([0, 1], 48))
    save_pretrained(model, package_file, meta=PASSED)
    return package_file


def test_the_prior_ranks_the_first_batch(design: DesignSpace, prior_file: Path) -> None:
    strategy = make_tuning_strategy("model", design, seed=0, pool_size=64, epsilon=0.0)
    assert isinstance(strategy, ModelBasedSearch)
    assert isinstance(strategy.model, PriorCalibratedModel) and not strategy.model.is_fitted
    batch = strategy.ask(9)
    assert batch[0] == design.default  # the baseline is still measured first
    prior = load_pretrained(prior_file)
    assert prior is not None
    population = prior.predict(transferable_features(design, design.space.sample(1, 100)))
    picked = prior.predict(transferable_features(design, batch[1:5]))  # half the rest
    assert picked[0] >= np.quantile(population, 0.9)  # the prior's best comes first
    scratch = make_tuning_strategy("model", design, seed=0, pool_size=64, model="lgbm")
    warm_up = prior.predict(transferable_features(design, scratch.ask(9)[1:5]))
    assert picked[0] > warm_up.max()  # from scratch, no ranking yet


@pytest.mark.parametrize(
    "checks",
    [
        {
            "held_out": {
                "pairwise_accuracy": 0.9,
                "per_op_class": {"matmul": {"pairwise_accuracy": 0.6}},
            }
        },
        {
            "held_out": {
                "pairwise_accuracy": 0.9,
                "per_op_class": {"dense": {"pairwise_accuracy": 0.9}},
            }
        },
    ],
)
def test_an_op_class_below_the_trust_bar_learns_from_scratch(
    design: DesignSpace, prior_file: Path, checks: dict
) -> None:
    """A prior trusted overall but not for this workload's op class (below the bar, or never
    checked on it) does not steer the search: zero-shot compiles keep the default there too."""
    doc = json.loads(prior_file.read_text())
    prior_file.write_text(json.dumps({**doc, "meta": checks}))
    strategy = make_tuning_strategy("model", design, seed=0, pool_size=64)
    assert isinstance(strategy, ModelBasedSearch)
    assert type(strategy.model) is LGBMCostModel
    lgbm = make_tuning_strategy("model", design, seed=0, pool_size=64, model="lgbm")
    assert strategy.ask(9) == lgbm.ask(9), "exactly the search that learns from scratch"


def test_the_prior_picks_cover_every_branch(design: DesignSpace, prior_file: Path) -> None:
    """Each value of an unordered knob that the default lacks gets the prior's best config with
    it, however low the prior ranks that branch, so one wrong belief cannot hide a branch."""
    strategy = make_tuning_strategy("model", design, seed=0, pool_size=64, epsilon=0.0)
    batch = strategy.ask(9)
    picks = batch[1:5]
    assert {c["variant"] for c in picks} | {design.default["variant"]} == {"tile", "stream"}
    assert {c["order"] for c in picks} | {design.default["order"]} == {"ij", "ji"}
    other = [c for c in picks if c["variant"] != design.default["variant"]]
    assert other and other[0] in picks[:2]  # the first branch the default lacks comes right after


def test_the_run_calibrates_the_prior(design: DesignSpace, prior_file: Path) -> None:
    strategy = make_tuning_strategy("model", design, seed=0, pool_size=32)
    features = strategy.features
    assert isinstance(features, LoopNestFeatures)
    for _ in range(3):
        configs = strategy.ask(4)
        strategy.tell(configs, fake_seconds(features.transferable(configs)).tolist())
    strategy.ask(1)  # trains on everything told so far
    assert isinstance(strategy.model, PriorCalibratedModel)
    assert strategy.model.n_samples == 12 and strategy.model.slope > 0


def test_a_corrupt_file_still_tunes_and_warns_once(design: DesignSpace, package_file) -> None:
    package_file.write_text('{"format": "tensortune-cost-model", "version": 1, "stat')
    with pytest.warns(UserWarning) as caught:
        for seed in range(2):  # two runs in one process: still one warning
            strategy = make_tuning_strategy("model", design, seed=seed, pool_size=32)
            assert type(strategy.model) is LGBMCostModel
            for _ in range(3):
                configs = strategy.ask(4)
                x = transferable_features(design, configs)
                strategy.tell(configs, fake_seconds(x).tolist())
            assert strategy.best[1] < np.inf
    messages = [str(w.message) for w in caught if "pretrained" in str(w.message)]
    assert len(messages) == 1
    assert str(package_file) in messages[0] and "learning from scratch" in messages[0]


def test_a_prior_needs_the_transferable_columns(prior_file: Path) -> None:
    space = SearchSpace([Knob("a", (1, 2, 4))])
    with pytest.raises(StrategyError, match="TRANSFERABLE_FEATURES"):
        make_strategy("model", space, seed=0, model="pretrained")


def test_seeds_join_the_priors_first_pool(design: DesignSpace, prior_file: Path) -> None:
    """A config known fast on a similar workload (an exemplar, a database's best) is ranked with
    the warm-up pool: the prior's first pick is at least as good, by its own scores, as the seed,
    where from its random pool alone it is not."""
    prior = load_pretrained(prior_file)
    assert prior is not None
    sample = design.space.sample(7, 400)
    scores = prior.predict(transferable_features(design, sample))
    seed_config = sample[int(np.argmax(scores))]
    assert seed_config != design.default

    def first_pick(seeds: list) -> float:
        strategy = make_tuning_strategy(
            "model", design, seed=0, seeds=seeds, pool_size=32, epsilon=0.0
        )
        return float(prior.predict(transferable_features(design, strategy.ask(9)[1:2]))[0])

    assert first_pick([seed_config]) >= scores.max()
    assert first_pick([]) < scores.max()
    lgbm = make_tuning_strategy("model", design, seed=0, seeds=[seed_config], model="lgbm")
    scratch = make_tuning_strategy("model", design, seed=0, model="lgbm")
    assert lgbm.ask(9) == scratch.ask(9), "learning from scratch, nothing ranks the seeds"
