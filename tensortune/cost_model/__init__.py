"""Cost models: learn from measured configs which unmeasured ones are likely fast."""

from .cost_model import CostModel, as_costs, relative_log_throughput
from .features import LOOP_FEATURES, LoopNestFeatures, loop_nest_features
from .lgbm import LGBMCostModel
from .metrics import ranking_metrics
from .random_model import RandomCostModel

__all__ = [
    "LOOP_FEATURES",
    "CostModel",
    "LGBMCostModel",
    "LoopNestFeatures",
    "RandomCostModel",
    "as_costs",
    "loop_nest_features",
    "ranking_metrics",
    "relative_log_throughput",
]
