"""Cost models: learn from measured configs which unmeasured ones are likely fast."""

from .cost_model import CostModel, as_costs, relative_log_throughput
from .features import (
    LOOP_FEATURES,
    TRANSFERABLE_FEATURES,
    LoopNestFeatures,
    loop_nest_features,
    transferable_features,
)
from .lgbm import LGBMCostModel
from .metrics import confident_gap, ranking_metrics
from .pretrained import PRETRAINED_PATH, load_pretrained, save_pretrained
from .random_model import RandomCostModel
from .registry import COST_MODELS, CostModelFactory, get_cost_model, register_cost_model
from .xgb import XGBCostModel

__all__ = [
    "COST_MODELS",
    "LOOP_FEATURES",
    "PRETRAINED_PATH",
    "TRANSFERABLE_FEATURES",
    "CostModel",
    "CostModelFactory",
    "LGBMCostModel",
    "LoopNestFeatures",
    "RandomCostModel",
    "XGBCostModel",
    "as_costs",
    "confident_gap",
    "get_cost_model",
    "load_pretrained",
    "loop_nest_features",
    "ranking_metrics",
    "register_cost_model",
    "relative_log_throughput",
    "save_pretrained",
    "transferable_features",
]
