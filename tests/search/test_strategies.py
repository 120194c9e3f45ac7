"""Behaviour every strategy promises through the ask/tell interface."""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterator

import pytest

from tensortune.errors import StrategyError, TensorTuneError
from tensortune.search import STRATEGIES, SearchStrategy, make_strategy
from tensortune.space import Constraint, Knob, SearchSpace

from .conftest import synthetic_cost

ALL = list(STRATEGIES)
GUIDED = ["annealing", "evolutionary", "optuna-tpe", "optuna-cmaes", "model"]


@pytest.fixture(autouse=True)
def _quiet_cmaes_fallback() -> Iterator[None]:
    """optuna-cmaes warns when it falls back to TPE (no ``cmaes`` package); fine here."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "optuna-cmaes falls back", RuntimeWarning)
        yield


def run(strategy: SearchStrategy, batches: int, batch: int = 16) -> list[dict]:
    """Ask/measure/tell loop; returns every config asked, in order."""
    asked: list[dict] = []
    for _ in range(batches):
        configs = strategy.ask(batch)
        asked += configs
        strategy.tell(configs, [synthetic_cost(c) for c in configs])
    return asked


def tiny_space() -> SearchSpace:
    return SearchSpace(
        [Knob("a", (1, 2, 4)), Knob("b", (1, 2, 4)), Knob("c", ("x", "y"))],
        [Constraint("small", lambda c: c["a"] * c["b"] <= 8)],
    )


def tiny_cost(config: dict) -> float:
    return config["a"] / config["b"] + (config["c"] == "y")


@pytest.mark.parametrize("name", ALL)
def test_never_repeats_and_respects_constraints(name: str, space: SearchSpace) -> None:
    strategy = make_strategy(name, space, seed=3)
    asked = run(strategy, batches=6)
    keys = [space.config_key(c) for c in asked]
    assert len(keys) == len(set(keys)) == 96
    assert all(space.is_valid(c) for c in asked)


@pytest.mark.parametrize("name", ALL)
def test_deterministic_per_seed(name: str, space: SearchSpace) -> None:
    first = run(make_strategy(name, space, seed=7), batches=3)
    again = run(make_strategy(name, space, seed=7), batches=3)
    assert first == again
    if name != "grid":
        assert run(make_strategy(name, space, seed=8), batches=3) != first


@pytest.mark.parametrize("name", ALL)
def test_exhausts_small_space_exactly_once(name: str) -> None:
    space = tiny_space()
    strategy = make_strategy(name, space, seed=0)
    asked: list[dict] = []
    for _ in range(50):
        configs = strategy.ask(5)
        if not configs:
            break
        assert len(configs) <= 5
        asked += configs
        strategy.tell(configs, [tiny_cost(c) for c in configs])
    everything = sorted(space.config_key(c) for c in space.enumerate())
    assert sorted(space.config_key(c) for c in asked) == everything
    assert strategy.ask(3) == []
    assert strategy.best == ({"a": 1, "b": 4, "c": "x"}, 0.25)


@pytest.mark.parametrize("name", GUIDED)
def test_guided_strategies_find_near_optimum(
    name: str, space: SearchSpace, best_cost: float
) -> None:
    strategy = make_strategy(name, space, seed=0)
    run(strategy, batches=10)  # 160 of 3456 valid configs
    assert strategy.best[1] <= 1.25 * best_cost


def test_random_search_gets_reasonably_close(space: SearchSpace, best_cost: float) -> None:
    strategy = make_strategy("random", space, seed=0)
    run(strategy, batches=10)
    assert strategy.best[1] <= 2 * best_cost


def test_grid_enumerates_in_order_and_finds_the_optimum() -> None:
    space = tiny_space()
    strategy = make_strategy("grid", space)
    asked = run_tiny_to_end(strategy)
    assert asked == list(space.enumerate())
    assert strategy.best[1] == min(tiny_cost(c) for c in space.enumerate())


def run_tiny_to_end(strategy: SearchStrategy) -> list[dict]:
    asked: list[dict] = []
    while configs := strategy.ask(4):
        asked += configs
        strategy.tell(configs, [tiny_cost(c) for c in configs])
    return asked


@pytest.mark.parametrize("name", ALL)
def test_warm_start_configs_are_not_proposed_again(name: str) -> None:
    space = tiny_space()
    strategy = make_strategy(name, space, seed=1)
    warm = list(space.enumerate())[:6]
    strategy.tell(warm, [tiny_cost(c) for c in warm])
    rest = run_tiny_to_end(strategy)
    assert not {space.config_key(c) for c in warm} & {space.config_key(c) for c in rest}
    assert len(warm) + len(rest) == sum(1 for _ in space.enumerate())


@pytest.mark.parametrize("name", ALL)
def test_failures_are_tolerated(name: str, space: SearchSpace) -> None:
    strategy = make_strategy(name, space, seed=2)
    for _ in range(3):
        configs = strategy.ask(8)
        strategy.tell(configs, [math.inf] * 4 + [float("nan")] + [1.0] * (len(configs) - 5))
    assert strategy.best[1] == 1.0
    assert len(strategy.ask(8)) == 8


def test_best_before_any_result_and_after_only_failures(space: SearchSpace) -> None:
    strategy = make_strategy("random", space, seed=0)
    assert strategy.best == (None, math.inf)
    strategy.tell(strategy.ask(2), [math.inf, math.inf])
    assert strategy.best == (None, math.inf)


def test_unknown_strategy_message(space: SearchSpace) -> None:
    with pytest.raises(StrategyError) as err:
        make_strategy("foo", space)
    assert str(err.value) == (
        "unknown strategy 'foo': choose one of grid, random, annealing, evolutionary, "
        "optuna-tpe, optuna-cmaes, model"
    )
    assert isinstance(err.value, ValueError) and isinstance(err.value, TensorTuneError)


def test_unknown_option_is_rejected_with_the_valid_ones(space: SearchSpace) -> None:
    with pytest.raises(StrategyError, match=r"no option.*tempo.*t0, cooling"):
        make_strategy("annealing", space, tempo=3)
    assert make_strategy("annealing", space, t0=0.5).t0 == 0.5


def test_ask_and_tell_validate_their_arguments(space: SearchSpace) -> None:
    strategy = make_strategy("random", space, seed=0)
    with pytest.raises(ValueError, match="n >= 1"):
        strategy.ask(0)
    configs = strategy.ask(2)
    with pytest.raises(ValueError, match="2 configs but 1 costs"):
        strategy.tell(configs, [1.0])
    with pytest.raises(ValueError, match="negative"):
        strategy.tell(configs, [1.0, -1.0])
    with pytest.raises(ValueError, match="tile_fits"):
        strategy.tell([{"k0": 128, "k1": 128, "k2": 1, "k3": 1}], [1.0])
    assert strategy.n_told == 0


def test_cmaes_falls_back_to_tpe_with_a_note_when_no_knob_is_ordered() -> None:
    categorical = SearchSpace([Knob("order", ("ij", "ji")), Knob("variant", ("a", "b", "c"))])
    with pytest.warns(RuntimeWarning, match="no knob is ordered"):
        strategy = make_strategy("optuna-cmaes", categorical, seed=0)
    assert strategy.note is not None
    assert type(strategy.study.sampler).__name__ == "TPESampler"


def test_cmaes_searches_the_ordered_knobs_of_a_mixed_space() -> None:
    """Tile sizes go to CMA-ES as indices, the categorical ``c`` to TPE beside it."""
    pytest.importorskip("cmaes")
    space = tiny_space()
    strategy = make_strategy("optuna-cmaes", space, seed=0)
    assert strategy.note is None
    assert type(strategy.study.sampler).__name__ == "CmaEsSampler"
    asked = []
    for _ in range(4):
        configs = strategy.ask(3)
        strategy.tell(configs, [tiny_cost(c) for c in configs])
        asked += configs
    keys = {space.config_key(c) for c in asked}
    assert len(keys) == len(asked) == 12 and all(space.is_valid(c) for c in asked)


def test_cmaes_uses_cma_on_ordered_spaces_when_available(space: SearchSpace) -> None:
    pytest.importorskip("cmaes")
    strategy = make_strategy("optuna-cmaes", space, seed=0)
    assert strategy.note is None
    assert type(strategy.study.sampler).__name__ == "CmaEsSampler"


def test_cmaes_without_the_cmaes_package_falls_back(
    space: SearchSpace, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "cmaes" else real(name, *a)
    )
    with pytest.warns(RuntimeWarning, match="'cmaes' package is not installed"):
        strategy = make_strategy("optuna-cmaes", space, seed=0)
    assert len(strategy.ask(4)) == 4


def test_pending_tracks_asked_but_untold(space: SearchSpace) -> None:
    strategy = make_strategy("random", space, seed=0)
    configs = strategy.ask(3)
    assert strategy.pending == configs
    strategy.tell(configs[:2], [1.0, 2.0])
    assert strategy.pending == configs[2:]
