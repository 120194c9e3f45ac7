"""Cost models: learn from measured configs which unmeasured ones are likely fast."""

from .cost_model import CostModel, as_costs, relative_log_throughput
from .features import LOOP_FEATURES, LoopNestFeatures, loop_nest_features
from .lgbm import LGBMCostModel
from .metrics import ranking_metrics
from .random_model import RandomCostModel
from .registry import COST_MODELS, CostModelFactory, get_cost_model, register_cost_model

__all__ = [
    "COST_MODELS",
    "LOOP_FEATURES",
    "CostModel",
    "CostModelFactory",
    "LGBMCostModel",
    "LoopNestFeatures",
    "RandomCostModel",
    "as_costs",
    "get_cost_model",
    "loop_nest_features",
    "ranking_metrics",
    "register_cost_model",
    "relative_log_throughput",
]
