"""Cost models: learn from measured configs which unmeasured ones are likely fast."""

from .cost_model import CostModel, as_costs, relative_log_throughput
from .lgbm import LGBMCostModel
from .metrics import ranking_metrics
from .random_model import RandomCostModel

__all__ = [
    "CostModel",
    "LGBMCostModel",
    "RandomCostModel",
    "as_costs",
    "ranking_metrics",
    "relative_log_throughput",
]
