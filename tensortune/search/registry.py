"""Strategies by name, so configs files and the CLI can say ``--strategy model``."""

from __future__ import annotations

import inspect
from typing import Any

from ..errors import StrategyError
from ..space import SearchSpace
from .annealing import SimulatedAnnealing
from .evolutionary import EvolutionarySearch
from .grid import GridSearch
from .model_based import ModelBasedSearch
from .optuna_search import OptunaCmaEsSearch, OptunaTPESearch
from .random_search import RandomSearch
from .strategy import SearchStrategy

#: Every strategy, by its ``name``, in the order they are listed to users.
STRATEGIES: dict[str, type[SearchStrategy]] = {
    cls.name: cls
    for cls in (
        GridSearch,
        RandomSearch,
        SimulatedAnnealing,
        EvolutionarySearch,
        OptunaTPESearch,
        OptunaCmaEsSearch,
        ModelBasedSearch,
    )
}


def make_strategy(
    name: str, space: SearchSpace, seed: int | None = None, **options: Any
) -> SearchStrategy:
    """Build the strategy called ``name``; unknown names and options raise StrategyError."""
    cls = STRATEGIES.get(name)
    if cls is None:
        raise StrategyError(f"unknown strategy '{name}': choose one of {', '.join(STRATEGIES)}")
    accepted = [
        p.name
        for p in inspect.signature(cls.__init__).parameters.values()
        if p.kind is inspect.Parameter.KEYWORD_ONLY
    ]
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise StrategyError(
            f"strategy '{name}' has no option(s) {', '.join(unknown)}; "
            f"it takes: {', '.join(accepted) or 'none'}"
        )
    return cls(space, seed, **options)
