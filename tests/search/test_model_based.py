"""The cost-model-guided strategy: learns, explores, stays diverse, accepts custom features."""

from __future__ import annotations

import math
import statistics

import numpy as np
import pytest

import tensortune as tt
from tensortune.cost_model import LoopNestFeatures, RandomCostModel
from tensortune.search import ModelBasedSearch, make_strategy, make_tuning_strategy
from tensortune.space import Config, Constraint, Knob, SearchSpace
from tensortune.space.registry import design_space
from tensortune.target import Target

from .conftest import synthetic_cost

POW2 = (1, 2, 4, 8, 16, 32, 64, 128)
OPT = (2, 4, 1, 5, 3, 0)


def big_space() -> SearchSpace:
    """~750k configs: far too many for random search to stumble on the optimum."""
    return SearchSpace(
        [Knob(f"t{i}", POW2) for i in range(6)]
        + [Knob("order", ("ijk", "ikj", "jik")), Knob("vec", (False, True))],
        [Constraint("regs", lambda c: c["t0"] * c["t1"] <= 256)],
    )


def structured_cost(c: Config) -> float:
    """Smooth in log tile sizes, multiplicative in the categorical knobs; optimum 0.3 ms."""
    x = [math.log2(c[f"t{i}"]) - o for i, o in enumerate(OPT)]
    base = 1 + 0.3 * sum(v * v for v in x) + 0.2 * (x[0] - x[1]) ** 2
    return (
        1e-3 * base * {"ijk": 1.0, "ikj": 0.6, "jik": 1.3}[c["order"]] * (0.5 if c["vec"] else 1.0)
    )


def best_found(name: str, seed: int, batches: int = 5, **options: object) -> float:
    strategy = make_strategy(name, big_space(), seed=seed, **options)
    for _ in range(batches):
        configs = strategy.ask(16)
        strategy.tell(configs, [structured_cost(c) for c in configs])
    return strategy.best[1]


def test_model_based_beats_random_on_average() -> None:
    seeds = range(5)
    model = statistics.mean(best_found("model", s, pool_size=1024) for s in seeds)
    rand = statistics.mean(best_found("random", s) for s in seeds)
    assert model < 0.75 * rand  # measured ~0.4x; generous margin against flakiness


class SpyModel(RandomCostModel):
    """Counts predictions, to see when the strategy starts trusting its model."""

    predictions = 0

    def predict(self, features: np.ndarray) -> np.ndarray:
        self.predictions += 1
        return super().predict(features)


def test_samples_randomly_until_min_train(space: SearchSpace) -> None:
    spy = SpyModel(0)
    strategy = ModelBasedSearch(space, seed=0, model=spy, min_train=16, pool_size=64)
    for _ in range(2):
        configs = strategy.ask(8)
        strategy.tell(configs, [synthetic_cost(c) for c in configs])
    assert spy.predictions == 0 and spy.n_samples == 8  # trained on 8 but not yet trusted
    strategy.ask(8)
    assert spy.predictions > 0 and spy.n_samples == 16


def test_trains_on_every_told_result(space: SearchSpace) -> None:
    strategy = ModelBasedSearch(space, seed=0, min_train=8, pool_size=256)
    for _ in range(3):
        configs = strategy.ask(8)
        strategy.tell(configs, [synthetic_cost(c) for c in configs])
    strategy.ask(4)
    assert strategy.model.n_samples == 24


def test_batches_avoid_near_duplicates(space: SearchSpace) -> None:
    strategy = ModelBasedSearch(
        space, seed=0, epsilon=0.0, min_train=16, pool_size=512, min_distance=2
    )
    configs = strategy.ask(16)
    strategy.tell(configs, [synthetic_cost(c) for c in configs])
    batch = strategy.ask(8)
    rows = space.indices(batch)
    distances = [np.abs(rows[i] - rows[j]).sum() for i in range(8) for j in range(i)]
    assert min(distances) >= 2


def test_custom_features_replace_the_encoding(space: SearchSpace) -> None:
    calls: list[int] = []

    def features(configs: list[Config]) -> np.ndarray:
        calls.append(len(configs))
        return np.array(
            [[math.log2(c["k0"] * c["k1"]), math.log2(c["k2"] + c["k3"])] for c in configs]
        )

    strategy = ModelBasedSearch(space, seed=0, features=features, min_train=8, pool_size=128)
    for _ in range(3):
        configs = strategy.ask(8)
        strategy.tell(configs, [synthetic_cost(c) for c in configs])
    assert calls and max(calls) > 8  # the whole candidate pool was featurized
    assert strategy.model._features is not None and strategy.model._features.shape[1] == 2


def test_bad_feature_function_is_reported(space: SearchSpace) -> None:
    strategy = ModelBasedSearch(space, seed=0, features=lambda cs: np.zeros(len(cs)))
    strategy.tell(strategy.ask(16), [1.0] * 16)
    with pytest.raises(ValueError, match="one row per config"):
        strategy.ask(1)


def test_random_model_ablation_runs(space: SearchSpace) -> None:
    strategy = ModelBasedSearch(space, seed=0, model=RandomCostModel(0), min_train=8, pool_size=64)
    for _ in range(3):
        configs = strategy.ask(8)
        assert len(configs) == 8
        strategy.tell(configs, [synthetic_cost(c) for c in configs])


def test_initial_configs_come_first(space: SearchSpace) -> None:
    first = {"k0": 8, "k1": 32, "k2": 2, "k3": 16}
    strategy = ModelBasedSearch(space, seed=0, initial=[first], pool_size=64)
    assert strategy.ask(4)[0] == first


def test_never_proposes_a_program_twice(space: SearchSpace) -> None:
    """Configs differing only in a knob the program ignores (here k3) are measured once."""
    strategy = ModelBasedSearch(
        space, seed=0, min_train=8, pool_size=128, program_key=lambda c: str(c["k0"] * c["k1"])
    )
    programs = []
    for _ in range(4):
        configs = strategy.ask(8)
        strategy.tell(configs, [synthetic_cost(c) for c in configs])
        programs += [c["k0"] * c["k1"] for c in configs]
    assert len(programs) == len(set(programs)) > 8


def test_tuning_strategy_scores_lowered_loop_nests(target: Target) -> None:
    design = design_space(tt.workload("matmul:M=64,N=64,K=64"), target)
    strategy = make_tuning_strategy("model", design, seed=0, pool_size=32)
    assert isinstance(strategy, ModelBasedSearch)
    assert isinstance(strategy.features, LoopNestFeatures)
    for _ in range(3):
        configs = strategy.ask(4)
        strategy.tell(configs, [1e-3 * (1 + c["mr"] % 3) for c in configs])
    assert strategy.history[0][0] == design.default
    assert make_tuning_strategy("random", design, seed=0).name == "random"


def test_first_batch_spreads_over_every_knob(space: SearchSpace) -> None:
    """Random picks repeat knob values by chance; the first batch is chosen to avoid that."""

    def coverage(name: str) -> int:
        batches = [make_strategy(name, space, seed=s).ask(8) for s in range(5)]
        return sum(len({c[k.name] for c in b}) for b in batches for k in space.knobs)

    assert coverage("model") > coverage("random")


def test_first_batch_varies_the_initial_config_one_knob_at_a_time(space: SearchSpace) -> None:
    """After the default, part of the first batch is its one-knob neighbours, each varying a
    different knob; the rest is spread over the space."""
    first = {"k0": 8, "k1": 32, "k2": 2, "k3": 16}
    strategy = ModelBasedSearch(space, seed=0, initial=[first], pool_size=64, near_initial=0.5)
    batch = strategy.ask(9)
    assert batch[0] == first
    changed = [[k for k in first if c[k] != first[k]] for c in batch[1:5]]
    assert all(len(knobs) == 1 for knobs in changed)
    assert len({knobs[0] for knobs in changed}) == 4
    assert all(sum(c[k] != first[k] for k in first) >= 1 for c in batch[5:])


def test_no_neighbours_without_an_initial_config(space: SearchSpace) -> None:
    batch = ModelBasedSearch(space, seed=0, pool_size=64, near_initial=1.0).ask(8)
    assert len({space.config_key(c) for c in batch}) == 8


def test_an_initial_config_from_before_a_knob_gets_neighbours(space: SearchSpace) -> None:
    """A default (or a warm start) that leaves a later knob to its ``absent_means`` is varied
    like any other: the knob is spelled out, not a KeyError."""
    later = SearchSpace([*space.knobs, Knob("late", (False, True), absent_means=False)])
    first = {"k0": 8, "k1": 32, "k2": 2, "k3": 16}
    strategy = ModelBasedSearch(later, seed=0, initial=[first], pool_size=64, near_initial=1.0)
    batch = strategy.ask(6)
    assert batch[0] == {**first, "late": False}
    changed = [[k for k in batch[0] if c[k] != batch[0][k]] for c in batch[1:]]
    assert all(len(knobs) == 1 for knobs in changed)
    assert ["late"] in changed
