"""A pretrained prior calibrated online on the run's own measurements.

Transfer that ignores the run's data can make tuning worse (tlc-pack/tenset#23: ResNet-18 got
slower after transfer-tuning). So the prior only starts the run: it ranks the very first pool,
then each refit (1) maps it onto this run's measured relative throughput by a line
``a * prior + b`` whose slope is the regression slope ``rho * sd(run) / sd(prior)`` with the
correlation ``rho`` shrunk towards 1 by ``PRIOR_WEIGHT`` pseudo-samples and never below 0
(scale-free, so a ranking prior with arbitrary score units calibrates as well as a regression
one), and (2) boosts LightGBM trees on the residuals (``init_score``). A prior that
ranks this workload badly loses its slope as measurements arrive and the trees take over,
ending where learning from scratch would; a good one keeps steering while samples are few.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .cost_model import CostModel
from .features import TRANSFERABLE_FEATURES
from .lgbm import LGBMCostModel
from .pretrained import _CLASSES, trusted_pretrained

#: How many measurements' worth of belief that the prior orders this run's configs right.
PRIOR_WEIGHT = 4.0


class PriorCalibratedModel(LGBMCostModel):
    """LightGBM regression boosted on top of a calibrated prior scored on the leading
    ``TRANSFERABLE_FEATURES`` columns of each row (any knob columns after them are the trees'
    alone). Before any fit it predicts the prior's scores."""

    prior_features = TRANSFERABLE_FEATURES

    def __init__(self, prior: CostModel, seed: int = 0, **options: Any):
        super().__init__("regression", seed, **options)
        self.prior = prior
        self.slope, self.intercept = 1.0, 0.0

    def _prior(self, features: np.ndarray) -> np.ndarray:
        x = np.asarray(features, dtype=np.float64)
        if x.ndim != 2 or x.shape[1] < len(self.prior_features):
            raise ValueError(
                f"rows must start with the {len(self.prior_features)} TRANSFERABLE_FEATURES "
                f"columns the prior was trained on, got shape {x.shape}"
            )
        return np.asarray(self.prior.predict(x[:, : len(self.prior_features)]), np.float64)

    def _base_scores(self, features: np.ndarray, rel: np.ndarray) -> np.ndarray:
        p = self._prior(features)
        sd_p, sd_r = float(p.std()), float(rel.std())
        if len(p) < 2 or sd_p == 0 or sd_r == 0:
            self.slope = 1.0  # nothing to calibrate the scale on yet: the prior as it is
        else:
            rho = float(np.corrcoef(p, rel)[0, 1])
            n = len(p)
            self.slope = sd_r / sd_p * max(rho * n + PRIOR_WEIGHT, 0.0) / (n + PRIOR_WEIGHT)
        self.intercept = float(rel.mean() - self.slope * p.mean())
        return self.slope * p + self.intercept

    def predict(self, features: np.ndarray) -> np.ndarray:
        """Calibrated prior plus the trees' correction; the bare prior before any fit."""
        x = np.asarray(features, dtype=np.float64)
        if not len(x):
            return np.zeros(0)
        base = self.slope * self._prior(x) + self.intercept
        return base if self._booster is None else base + super().predict(x)

    def _get_state(self) -> dict[str, Any]:
        return {
            **super()._get_state(),
            "prior": {"class": type(self.prior).__name__, "state": self.prior._get_state()},
            "calibration": [self.slope, self.intercept],
        }

    @classmethod
    def _from_state(cls, state: dict[str, Any]) -> PriorCalibratedModel:
        saved = state.pop("prior")
        slope, intercept = state.pop("calibration")
        booster = state.pop("booster")
        state.pop("objective")
        prior = _CLASSES[saved["class"]]._from_state(dict(saved["state"]))
        model = cls(prior, state.pop("seed"), **state)
        model.slope, model.intercept = slope, intercept
        if booster is not None:
            model._booster = model._lgb.Booster(model_str=booster)
        return model


def pretrained_or_scratch(seed: int = 0) -> LGBMCostModel:
    """The ``"pretrained"`` cost model: the package's prior calibrated online, or LightGBM
    learning from scratch when it cannot be loaded (one warning per process) or did not pass
    its held-out check (``pretrained.MIN_HELD_OUT_ACCURACY``)."""
    prior = trusted_pretrained()
    return LGBMCostModel(seed=seed) if prior is None else PriorCalibratedModel(prior, seed)
