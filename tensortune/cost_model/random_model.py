"""A cost model that knows nothing: the baseline for ablations ("is the model helping?")."""

from __future__ import annotations

from typing import Any

import numpy as np

from .cost_model import CostModel


class RandomCostModel(CostModel):
    """Predicts uniform random scores, so model-guided search degrades to random search.

    Deterministic for a given ``seed`` and sequence of calls; ``save`` keeps the seed only.
    """

    def __init__(self, seed: int = 0):
        super().__init__()
        self.seed = int(seed)
        self._rng = np.random.default_rng(self.seed)

    def _fit(self, features: np.ndarray, costs: np.ndarray, groups: np.ndarray) -> None:
        """Nothing to learn."""

    def predict(self, features: np.ndarray) -> np.ndarray:
        return self._rng.random(len(np.asarray(features)))

    def _get_state(self) -> dict[str, Any]:
        return {"seed": self.seed}

    @classmethod
    def _from_state(cls, state: dict[str, Any]) -> RandomCostModel:
        return cls(state["seed"])
