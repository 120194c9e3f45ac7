"""Gradient-boosted-tree ranking model on XGBoost (the only module that imports xgboost).

A second, independently implemented learner behind the same interface, so evaluations can tell
what the features carry from what one library's defaults happen to do (TenSet's strongest CPU
model was an XGBoost ranker). ``rank:pairwise`` with one query per workload learns the order
within a workload directly; its state is XGBoost's own JSON model text.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import MissingDependency
from .cost_model import CostModel, relative_log_throughput

#: Below this many samples the model shrinks (fewer, shallower trees) so it does not overfit.
SMALL_DATA = 32


def _import_xgboost() -> Any:
    try:
        import xgboost
    except ImportError as e:
        raise MissingDependency(
            'the "xgb-rank" cost model needs XGBoost: pip install "tensortune[xgboost]"'
        ) from e
    return xgboost


class XGBCostModel(CostModel):
    """XGBoost pairwise ranker of configs within each workload (``groups`` = queries).

    Labels are the relative log-throughput ``log(best / cost)`` (failures below the worst
    success), so pairs are ordered by measured speed. ``subsample`` and ``colsample_bytree`` < 1
    train each tree on a random share of the rows and columns. Single-threaded (never disturbs
    timing runs) and deterministic for a given ``seed``.
    """

    def __init__(
        self,
        seed: int = 0,
        *,
        n_estimators: int | None = None,
        max_depth: int | None = None,
        learning_rate: float = 0.1,
        subsample: float = 1.0,
        colsample_bytree: float = 1.0,
    ):
        super().__init__()
        self._xgb = _import_xgboost()
        self.seed = int(seed)
        self.n_estimators = n_estimators
        self.max_depth = max_depth
        self.learning_rate = learning_rate
        self.subsample = subsample
        self.colsample_bytree = colsample_bytree
        self._booster: Any = None

    def _params(self, n_samples: int) -> tuple[dict[str, Any], int]:
        """XGBoost parameters and number of rounds, shrunk for small training sets."""
        small = n_samples < SMALL_DATA
        params = {
            "objective": "rank:pairwise",
            "eta": self.learning_rate,
            "max_depth": self.max_depth or (3 if small else 6),
            "min_child_weight": 1e-3,
            "subsample": self.subsample,
            "colsample_bytree": self.colsample_bytree,
            "nthread": 1,
            "seed": self.seed,
            "tree_method": "hist",
            "verbosity": 0,
        }
        return params, self.n_estimators or (50 if small else 200)

    def _fit(self, features: np.ndarray, costs: np.ndarray, groups: np.ndarray) -> None:
        params, rounds = self._params(len(costs))
        rel = relative_log_throughput(costs, groups)
        order = np.argsort(groups, kind="stable")  # XGBoost wants each query contiguous
        _, sizes = np.unique(groups[order], return_counts=True)
        data = self._xgb.DMatrix(features[order], label=rel[order], group=sizes, missing=np.nan)
        self._booster = self._xgb.train(params, data, num_boost_round=rounds)

    def predict(self, features: np.ndarray) -> np.ndarray:
        """Ranking score per row; higher = predicted faster (comparable within one workload)."""
        x = self._rows(features, self._booster is not None)
        if not len(x):
            return np.zeros(0)
        return np.asarray(self._booster.predict(self._xgb.DMatrix(x, missing=np.nan)), np.float64)

    def _get_state(self) -> dict[str, Any]:
        raw = None if self._booster is None else bytes(self._booster.save_raw("json")).decode()
        return {
            "seed": self.seed,
            "n_estimators": self.n_estimators,
            "max_depth": self.max_depth,
            "learning_rate": self.learning_rate,
            "subsample": self.subsample,
            "colsample_bytree": self.colsample_bytree,
            "booster": raw,
        }

    @classmethod
    def _from_state(cls, state: dict[str, Any]) -> XGBCostModel:
        booster = state.pop("booster")
        model = cls(state.pop("seed"), **state)
        if booster is not None:
            model._booster = model._xgb.Booster()
            model._booster.load_model(bytearray(booster.encode()))
        return model
