"""Strategies by name, so configs files and the CLI can say ``--strategy model``."""

from __future__ import annotations

import inspect
from typing import Any

from ..cost_model.features import LoopNestFeatures
from ..errors import StrategyError
from ..space import SearchSpace
from ..space.template import DesignSpace
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


#: Candidates scored per ask when every one must be scheduled and lowered (cached per config).
LOWERED_POOL_SIZE = 256


def make_tuning_strategy(
    name: str, design: DesignSpace, seed: int | None = None, **options: Any
) -> SearchStrategy:
    """``make_strategy`` as a tuner runs it, on a workload's whole design space.

    The model-based search then also sees what the space alone cannot show: it scores the
    lowered loop nest of each candidate (``LoopNestFeatures``), measures the template's default
    config first, and never measures two configs that build the same program.
    """
    if name == ModelBasedSearch.name:
        features = LoopNestFeatures(design)
        options = {
            "features": features,
            "program_key": features.program_key,
            "initial": [design.default],
            "pool_size": LOWERED_POOL_SIZE,
            **options,
        }
    return make_strategy(name, design.space, seed, **options)
