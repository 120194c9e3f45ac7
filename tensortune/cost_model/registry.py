"""Cost models by name, so ``tune(..., model="random")`` and ``--model`` can choose one.

A factory takes a ``seed`` keyword and returns a fresh ``CostModel``; each tuning run gets its
own instance (models keep their training data). Register your own beside the built-ins::

    from tensortune.cost_model import register_cost_model
    register_cost_model("my-model", lambda seed: MyModel(seed=seed))
"""

from __future__ import annotations

from collections.abc import Callable

from ..errors import StrategyError
from ..space.plugin import check_made, check_registration
from .cost_model import CostModel
from .lgbm import LGBMCostModel
from .prior import pretrained_or_scratch
from .random_model import RandomCostModel
from .xgb import XGBCostModel

CostModelFactory = Callable[..., CostModel]
"""``factory(seed=int) -> CostModel``: a fresh, untrained model."""

#: Every cost model by name, in the order they are listed to users. ``"pretrained"`` is the
#: package's prior calibrated online (LightGBM from scratch when it cannot be loaded); it
#: scores ``TRANSFERABLE_FEATURES``, so only a search given them (the tuner's) can use it.
#: ``"lgbm"`` always learns from scratch.
COST_MODELS: dict[str, CostModelFactory] = {
    "lgbm": lambda seed: LGBMCostModel(seed=seed),
    "lgbm-rank": lambda seed: LGBMCostModel("rank", seed=seed),
    "pretrained": lambda seed: pretrained_or_scratch(seed),
    "xgb-rank": lambda seed: XGBCostModel(seed),
    "random": lambda seed: RandomCostModel(seed),
}

#: The model of a search over a bare ``SearchSpace`` (knob features: no prior applies).
DEFAULT_COST_MODEL = "lgbm"
#: The model of a tuning run, whose search scores the lowered programs' transferable features.
TUNING_COST_MODEL = "pretrained"


def register_cost_model(name: str, factory: CostModelFactory, *, replace: bool = False) -> None:
    """Make ``factory`` available as ``name`` to ``get_cost_model``, ``tune(model=name)`` and
    the model-based strategy. Taking a name that is already registered (a built-in included)
    is refused unless ``replace=True``, so two plug-ins cannot silently shadow each other."""
    check_registration("cost model", name, factory, COST_MODELS, replace, StrategyError)
    COST_MODELS[name] = factory


def get_cost_model(name: str, seed: int = 0) -> CostModel:
    """A fresh model of the kind registered as ``name``; unknown names raise StrategyError
    listing the registered ones."""
    factory = COST_MODELS.get(name)
    if factory is None:
        raise StrategyError(f"unknown cost model {name!r}: choose one of {', '.join(COST_MODELS)}")
    model = factory(seed=seed)
    check_made("cost model", name, model, CostModel, StrategyError)
    return model
