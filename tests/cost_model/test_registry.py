"""Cost models by name: built-ins, plug-ins, and the errors a user sees."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from tensortune.cost_model import (
    COST_MODELS,
    LGBMCostModel,
    RandomCostModel,
    XGBCostModel,
    get_cost_model,
    register_cost_model,
)
from tensortune.errors import StrategyError
from tensortune.search import ModelBasedSearch, make_strategy
from tensortune.space import Knob, SearchSpace


@pytest.fixture
def registry() -> Iterator[dict]:
    """The registry, restored after the test (registration is process-wide)."""
    saved = dict(COST_MODELS)
    yield COST_MODELS
    COST_MODELS.clear()
    COST_MODELS.update(saved)


def test_built_ins_are_registered_and_fresh_per_call() -> None:
    assert list(COST_MODELS)[:5] == ["lgbm", "lgbm-rank", "pretrained", "xgb-rank", "random"]
    assert isinstance(get_cost_model("xgb-rank", seed=2), XGBCostModel)
    assert isinstance(get_cost_model("random", seed=3), RandomCostModel)
    lgbm = get_cost_model("lgbm-rank")
    assert isinstance(lgbm, LGBMCostModel) and lgbm.objective == "rank"
    assert get_cost_model("lgbm") is not get_cost_model("lgbm")


def test_unknown_name_lists_the_registered_ones() -> None:
    with pytest.raises(StrategyError, match=r"unknown cost model 'xgb': choose one of lgbm, "):
        get_cost_model("xgb")


def test_a_registered_model_is_built_with_the_seed(registry: dict) -> None:
    register_cost_model("coin", lambda seed: RandomCostModel(seed + 100))
    assert get_cost_model("coin", seed=1).seed == 101
    with pytest.raises(StrategyError, match="already registered"):
        register_cost_model("coin", RandomCostModel)
    with pytest.raises(StrategyError, match="already registered"):
        register_cost_model("lgbm", RandomCostModel)
    register_cost_model("coin", lambda seed: RandomCostModel(seed), replace=True)
    assert get_cost_model("coin", seed=1).seed == 1


def test_a_factory_must_make_a_cost_model(registry: dict) -> None:
    register_cost_model("broken", lambda seed: object())
    with pytest.raises(StrategyError, match="returned a object, not a"):
        get_cost_model("broken")
    with pytest.raises(StrategyError, match="cost model: the name must be a printable string"):
        register_cost_model("", RandomCostModel)


def test_the_model_strategy_takes_a_name_or_an_instance() -> None:
    space = SearchSpace([Knob("a", (1, 2, 4, 8)), Knob("b", (1, 2, 4, 8))])
    by_name = make_strategy("model", space, seed=0, model="random")
    assert isinstance(by_name, ModelBasedSearch) and isinstance(by_name.model, RandomCostModel)
    mine = RandomCostModel(7)
    assert make_strategy("model", space, model=mine).model is mine
    with pytest.raises(StrategyError, match="unknown cost model 'nope'"):
        make_strategy("model", space, model="nope")
    with pytest.raises(StrategyError, match="name or a CostModel, got int"):
        make_strategy("model", space, model=3)
    configs = by_name.ask(8)
    by_name.tell(configs, list(np.linspace(1.0, 2.0, len(configs))))
    assert len(by_name.ask(4)) == 4  # trained on the told results, then proposes more
