"""Strategies registered from outside the package are chosen by name like the built-ins."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tensortune.errors import StrategyError
from tensortune.search import (
    STRATEGIES,
    RandomSearch,
    SearchStrategy,
    make_strategy,
    register_strategy,
    strategy_options,
)
from tensortune.space import Config, Knob, SearchSpace


class FirstUnseen(SearchStrategy):
    """The first configs in enumeration order that were not seen, ``skip`` of them skipped."""

    name = "first-unseen"

    def __init__(self, space: SearchSpace, seed: int | None = None, *, skip: int = 0):
        super().__init__(space, seed)
        self.skip = skip

    def _ask(self, n: int) -> list[Config]:
        unseen = [c for c in self.space.enumerate() if not self.is_seen(c)]
        return unseen[self.skip : self.skip + n]


@pytest.fixture
def registry() -> Iterator[dict]:
    """The registry, restored after the test (registration is process-wide)."""
    saved = dict(STRATEGIES)
    yield STRATEGIES
    STRATEGIES.clear()
    STRATEGIES.update(saved)


SPACE = SearchSpace([Knob("a", (1, 2, 4)), Knob("b", (True, False))])


def test_a_registered_strategy_is_made_by_name_with_its_options(registry: dict) -> None:
    register_strategy("first-unseen", FirstUnseen)
    assert strategy_options("first-unseen") == ["skip"]
    strategy = make_strategy("first-unseen", SPACE, skip=1)
    assert strategy.ask(2) == [{"a": 1, "b": False}, {"a": 2, "b": True}]
    with pytest.raises(StrategyError, match=r"has no option.*speed.*it takes: skip"):
        make_strategy("first-unseen", SPACE, speed=2)
    with pytest.raises(StrategyError, match=r"unknown strategy 'x': choose one of .*first-unseen"):
        make_strategy("x", SPACE)


def test_names_are_not_taken_twice_unless_replaced(registry: dict) -> None:
    with pytest.raises(StrategyError, match="'random' is already registered"):
        register_strategy("random", FirstUnseen)
    register_strategy("random", FirstUnseen, replace=True)
    assert isinstance(make_strategy("random", SPACE), FirstUnseen)
    with pytest.raises(StrategyError, match="must be callable"):
        register_strategy("bad", 3)  # type: ignore[arg-type]


def test_a_factory_function_works_and_must_return_a_strategy(registry: dict) -> None:
    def seeded_random(space: SearchSpace, seed: int | None) -> SearchStrategy:
        return RandomSearch(space, 1234 if seed is None else seed)

    register_strategy("seeded", seeded_random)
    assert make_strategy("seeded", SPACE).seed == 1234
    register_strategy("broken", lambda space, seed: "nope")
    with pytest.raises(StrategyError, match="returned a str, not a"):
        make_strategy("broken", SPACE)
