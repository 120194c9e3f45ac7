"""Search strategies behind one ask/tell interface, plus the registry that names them."""

from .annealing import SimulatedAnnealing
from .budget import Budget
from .evolutionary import EvolutionarySearch
from .grid import GridSearch
from .model_based import FeatureFn, ModelBasedSearch
from .optuna_search import OptunaCmaEsSearch, OptunaTPESearch
from .random_search import RandomSearch
from .registry import (
    STRATEGIES,
    StrategyFactory,
    make_strategy,
    make_tuning_strategy,
    register_strategy,
    strategy_options,
)
from .strategy import SearchStrategy

__all__ = [
    "STRATEGIES",
    "Budget",
    "EvolutionarySearch",
    "FeatureFn",
    "GridSearch",
    "ModelBasedSearch",
    "OptunaCmaEsSearch",
    "OptunaTPESearch",
    "RandomSearch",
    "SearchStrategy",
    "SimulatedAnnealing",
    "StrategyFactory",
    "make_strategy",
    "make_tuning_strategy",
    "register_strategy",
    "strategy_options",
]
