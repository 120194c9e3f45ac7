"""Strategies by name, so configs files and the CLI can say ``--strategy model``.

A strategy from outside the package joins the built-ins with ``register_strategy``: a
``SearchStrategy`` subclass (or any callable ``factory(space, seed, **options)`` returning one),
whose keyword-only parameters are the options ``make_strategy`` accepts.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from ..cost_model.features import LoopNestFeatures
from ..cost_model.pretrained import pretrained_meta, untrusted_class
from ..cost_model.registry import TUNING_COST_MODEL
from ..errors import StrategyError
from ..space import SearchSpace
from ..space.plugin import check_made, check_registration
from ..space.template import DesignSpace
from .annealing import SimulatedAnnealing
from .evolutionary import EvolutionarySearch
from .grid import GridSearch
from .model_based import ModelBasedSearch
from .optuna_search import OptunaCmaEsSearch, OptunaTPESearch
from .random_search import RandomSearch
from .strategy import SearchStrategy

StrategyFactory = Callable[..., SearchStrategy]
"""``factory(space, seed, **options) -> SearchStrategy``; a SearchStrategy subclass is one."""

#: Every strategy, by its ``name``, in the order they are listed to users.
STRATEGIES: dict[str, StrategyFactory] = {
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


def register_strategy(name: str, factory: StrategyFactory, *, replace: bool = False) -> None:
    """Make ``factory`` available as ``name`` to ``make_strategy``, ``tune(strategy=name)`` and
    the CLI's ``--strategy``. Taking a registered name (a built-in included) is refused unless
    ``replace=True``, so two plug-ins cannot silently shadow each other."""
    check_registration("strategy", name, factory, STRATEGIES, replace, StrategyError)
    STRATEGIES[name] = factory


def strategy_options(name: str) -> list[str]:
    """The options (keyword-only parameters) the strategy called ``name`` accepts."""
    return [
        p.name
        for p in inspect.signature(_factory(name)).parameters.values()
        if p.kind is inspect.Parameter.KEYWORD_ONLY
    ]


def _factory(name: str) -> StrategyFactory:
    factory = STRATEGIES.get(name)
    if factory is None:
        raise StrategyError(f"unknown strategy '{name}': choose one of {', '.join(STRATEGIES)}")
    return factory


def make_strategy(
    name: str, space: SearchSpace, seed: int | None = None, **options: Any
) -> SearchStrategy:
    """Build the strategy called ``name``; unknown names and options raise StrategyError."""
    factory = _factory(name)
    accepted = strategy_options(name)
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise StrategyError(
            f"strategy '{name}' has no option(s) {', '.join(unknown)}; "
            f"it takes: {', '.join(accepted) or 'none'}"
        )
    strategy = factory(space, seed, **options)
    check_made("strategy", name, strategy, SearchStrategy, StrategyError)
    return strategy


#: Candidates scored per ask when every one must be scheduled and lowered (cached per config).
LOWERED_POOL_SIZE = 256


def make_tuning_strategy(
    name: str, design: DesignSpace, seed: int | None = None, **options: Any
) -> SearchStrategy:
    """``make_strategy`` as a tuner runs it, on a workload's whole design space.

    The model-based search then also sees what the space alone cannot show: it scores the
    lowered loop nest of each candidate (``LoopNestFeatures``: transferable features, then the
    knobs), measures the template's default config first, and never measures two configs that
    build the same program. Its model defaults to ``"pretrained"`` (``TUNING_COST_MODEL``): the
    package's prior ranks candidates from the first batch and is calibrated on the run's
    measurements; without a loadable prior it learns from scratch after one warning, and so it
    does for an op class the prior ranked below the trust bar on workloads it never saw
    (``untrusted_class``, the rule zero-shot compiles follow): such a prior's first picks cost
    trials (on Zen 5 it proposed GEMM variants 5-25x slower than the default for a matrix-vector
    product, and needed 13.3 trials to come within 5% of the best where learning from scratch
    needed 5.0).
    """
    if name == ModelBasedSearch.name and STRATEGIES.get(name) is ModelBasedSearch:
        features = LoopNestFeatures(design)
        options = {
            "features": features,
            "program_key": features.program_key,
            "initial": [design.default],
            "pool_size": LOWERED_POOL_SIZE,
            "model": TUNING_COST_MODEL,
            **options,
        }
        op_class = design.workload.op_class
        if options["model"] == "pretrained" and untrusted_class(op_class, pretrained_meta() or {}):
            options["model"] = "lgbm"
    return make_strategy(name, design.space, seed, **options)
