"""The cost-model interface: learn from measured configs, score unmeasured ones.

Models predict a *score* (higher = predicted faster) rather than seconds, because search only
needs a ranking and rankings transfer across workloads whose absolute runtimes differ by orders
of magnitude. Costs are times — from the tuner, ratios to the template default timed beside
each candidate, which the host's drift does not move; ``math.inf`` marks a failed candidate
(build error, crash, timeout) and always counts as the worst.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

_M = TypeVar("_M", bound="CostModel")

#: Relative score given to failed samples: this far (in log-throughput) below the worst success.
FAILURE_MARGIN = 1.0

#: Seconds per row (inf for a failure), and an optional workload id per row.
Costs = Sequence[float] | np.ndarray
Groups = Sequence[int] | np.ndarray | None


def as_costs(costs: Costs) -> np.ndarray:
    """Costs as a float array with NaN turned into inf (a NaN timing is a failed run)."""
    out = np.asarray(costs, dtype=np.float64).reshape(-1).copy()
    out[np.isnan(out)] = np.inf
    if (out < 0).any():
        raise ValueError("costs are seconds and must be >= 0 (use math.inf for failures)")
    return out


def relative_log_throughput(costs: np.ndarray, groups: np.ndarray | None = None) -> np.ndarray:
    """``log(best / cost)`` within each group: 0 for the group's best, negative for the rest.

    Normalising per group (one group per workload) lets one model learn from workloads whose
    runtimes differ by orders of magnitude. Failures sit ``FAILURE_MARGIN`` below the worst
    success of their group (0 when a group has no success at all).
    """
    costs = as_costs(costs)
    groups = np.zeros(len(costs), dtype=np.int64) if groups is None else np.asarray(groups)
    out = np.empty(len(costs))
    for g in np.unique(groups):
        mask = groups == g
        c = np.maximum(costs[mask], 1e-12)  # a 0 s timing must not produce log(0)
        ok = np.isfinite(c)
        rel = np.zeros(len(c))
        if ok.any():
            rel[ok] = np.log(c[ok].min() / c[ok])
            rel[~ok] = rel[ok].min() - FAILURE_MARGIN
        out[mask] = rel
    return out


def _group_ids(groups: Groups, n: int) -> np.ndarray:
    """``groups`` as a flat array; all rows in group 0 when None."""
    return np.zeros(n, dtype=np.int64) if groups is None else np.asarray(groups).reshape(-1)


class CostModel(ABC):
    """Learns which configs run fast from ``(features, costs)`` pairs.

    ``fit`` replaces the training data; ``update`` appends to it and refits on everything seen,
    which is what an online tuner calls after each measured batch. ``groups`` optionally tags
    rows with a workload id so that costs are compared only within a workload.
    """

    #: The leading feature columns a prior inside the model was trained on: non-empty means
    #: ``predict`` ranks configs before any ``fit`` (a pretrained model), and the search must
    #: give it rows that start with these columns.
    prior_features: tuple[str, ...] = ()

    def __init__(self) -> None:
        self._features: np.ndarray | None = None
        self._costs: np.ndarray | None = None
        self._groups: np.ndarray | None = None

    @property
    def n_samples(self) -> int:
        """Number of training rows seen so far."""
        return 0 if self._costs is None else len(self._costs)

    @property
    def is_fitted(self) -> bool:
        return self.n_samples > 0

    def fit(self: _M, features: np.ndarray, costs: Costs, groups: Groups = None) -> _M:
        """Train from scratch on these rows (costs in seconds, inf for failures)."""
        x = np.asarray(features, dtype=np.float64)
        if x.ndim != 2:
            raise ValueError(f"features must be 2-D (rows, columns), got shape {x.shape}")
        y = as_costs(costs)
        g = _group_ids(groups, len(y))
        if not len(x) == len(y) == len(g):
            raise ValueError(f"{len(x)} feature rows, {len(y)} costs and {len(g)} group ids")
        if not len(y):
            raise ValueError("cannot fit a cost model on zero samples")
        self._features, self._costs, self._groups = x, y, g
        self._fit(x, y, g)
        return self

    def update(self: _M, features: np.ndarray, costs: Costs, groups: Groups = None) -> _M:
        """Add rows to the training data and refit on everything seen so far."""
        if self._features is None or self._costs is None or self._groups is None:
            return self.fit(features, costs, groups)
        x = np.asarray(features, dtype=np.float64)
        return self.fit(
            np.vstack([self._features, x.reshape(len(x), -1)]),
            np.concatenate([self._costs, as_costs(costs)]),
            np.concatenate([self._groups, _group_ids(groups, len(x))]),
        )

    @abstractmethod
    def _fit(self, features: np.ndarray, costs: np.ndarray, groups: np.ndarray) -> None:
        """Train on validated arrays (costs already NaN-free)."""

    @abstractmethod
    def predict(self, features: np.ndarray) -> np.ndarray:
        """One score per row; higher means predicted faster."""

    def _rows(self, features: np.ndarray, fitted: bool) -> np.ndarray:
        """``features`` as a 2-D float array, after the checks every trained model's
        ``predict`` makes (``fitted``: it has been trained)."""
        if not fitted:
            raise RuntimeError(f"{type(self).__name__}.predict called before fit")
        x = np.asarray(features, dtype=np.float64)
        if x.ndim != 2:
            raise ValueError(f"features must be 2-D (rows, columns), got shape {x.shape}")
        return x

    @abstractmethod
    def _get_state(self) -> dict[str, Any]:
        """JSON-able parameters and learned state, for ``save``."""

    @classmethod
    @abstractmethod
    def _from_state(cls: type[_M], state: dict[str, Any]) -> _M:
        """Inverse of ``_get_state``."""

    def save(self, path: str | Path) -> None:
        """Write the model and its training data (so ``update`` keeps working) to one file.

        The format is a NumPy ``.npz`` archive (no pickle, so loading is safe) holding the
        JSON state and the training arrays; the name is used as given.
        """
        arrays: dict[str, np.ndarray] = {
            "state": np.array(json.dumps({"class": type(self).__name__, **self._get_state()}))
        }
        if self._features is not None and self._costs is not None and self._groups is not None:
            arrays.update(features=self._features, costs=self._costs, groups=self._groups)
        with open(path, "wb") as f:  # a file object stops numpy from appending ".npz"
            np.savez(f, **arrays)  # type: ignore[arg-type]

    @classmethod
    def load(cls: type[_M], path: str | Path) -> _M:
        """Read a model written by ``save`` on the same class."""
        with np.load(path, allow_pickle=False) as archive:
            state = json.loads(str(archive["state"]))
            saved = state.pop("class")
            if saved != cls.__name__:
                raise ValueError(f"{path} holds a {saved}, not a {cls.__name__}")
            model = cls._from_state(state)
            if "costs" in archive:
                model._features = archive["features"]
                model._costs = archive["costs"]
                model._groups = archive["groups"]
        return model
