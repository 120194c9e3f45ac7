"""Plug a search strategy and a cost model into tensortune from outside the package.

Both are registered by name, and from then on they are chosen like the built-ins:
``tt.tune(..., strategy="hill-climb")``, ``tt.tune(..., strategy="model", model="ridge")``.

    python examples/custom_strategy_and_model.py [TRIALS]   # two tiny tunes, 2 trials each

A strategy implements ask/tell over a ``SearchSpace`` (``_ask`` proposes unseen configs, the
base class guarantees no repeats); a cost model learns ``(features, costs)`` and scores
unmeasured candidates (higher = predicted faster). Neither ever sees a compiler or a timer:
the tuner builds, runs, checks and times every candidate and records it in the database.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

import tensortune as tt
from tensortune.cost_model import CostModel, register_cost_model, relative_log_throughput
from tensortune.search import SearchStrategy, register_strategy
from tensortune.space import Config

SPEC = "matmul:M=16,N=16,K=16"


class HillClimb(SearchStrategy):
    """Greedy local search: the unseen neighbours of the best config so far, random at first."""

    name = "hill-climb"

    def _ask(self, n: int) -> list[Config]:
        best, _ = self.best
        if best is None:
            return self._random_unseen(n)
        near = [c for c in self.space.neighbours(best) if not self.is_seen(c)]
        return near[:n] + self._random_unseen(n - len(near[:n]))


class RidgeModel(CostModel):
    """Ridge regression of log-throughput relative to the best: small, fast, and often enough
    to rank the candidates of one workload."""

    def __init__(self, seed: int = 0, alpha: float = 1.0):
        super().__init__()
        self.seed, self.alpha = seed, alpha
        self.weights: np.ndarray | None = None

    def _fit(self, features: np.ndarray, costs: np.ndarray, groups: np.ndarray) -> None:
        x = np.hstack([features, np.ones((len(features), 1))])
        y = relative_log_throughput(costs, groups)
        self.weights = np.linalg.solve(x.T @ x + self.alpha * np.eye(x.shape[1]), x.T @ y)

    def predict(self, features: np.ndarray) -> np.ndarray:
        features = np.asarray(features, dtype=np.float64)
        if self.weights is None:
            return np.zeros(len(features))
        return np.hstack([features, np.ones((len(features), 1))]) @ self.weights

    def _get_state(self) -> dict[str, Any]:
        weights = None if self.weights is None else self.weights.tolist()
        return {"seed": self.seed, "alpha": self.alpha, "weights": weights}

    @classmethod
    def _from_state(cls, state: dict[str, Any]) -> RidgeModel:
        model = cls(state["seed"], state["alpha"])
        if state["weights"] is not None:
            model.weights = np.array(state["weights"])
        return model


register_strategy("hill-climb", HillClimb)
register_cost_model("ridge", lambda seed: RidgeModel(seed=seed))


def main(folder: Path, trials: int = 2) -> None:
    """Tune one small matmul with each plug-in, each in its own database (a tune counts the
    records already there toward its trials), and print what was found."""
    for strategy, model in (("hill-climb", None), ("model", "ridge")):
        db = folder / f"{strategy}.db"
        result = tt.tune(SPEC, trials=trials, strategy=strategy, model=model, db=db)
        found_by = strategy + (f" + {model}" if model else "")
        ratio = f"{result.ratio_to_default:.2f}" if result.ratio_to_default else "-"
        print(
            f"{found_by}: {result.trials} trials, {result.errors} failed, best "
            f"{result.gflops or 0:.2f} GFLOP/s at {ratio} of the default's time, "
            f"config {result.best_config}"
        )


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:  # a scratch database: leave the shared one alone
        main(Path(tmp), trials=int(sys.argv[1]) if len(sys.argv) > 1 else 2)
