"""Simulated annealing over ``space.mutate``, with cooling and random restarts."""

from __future__ import annotations

import math

from ..space import Config, SearchSpace
from .strategy import SearchStrategy


class SimulatedAnnealing(SearchStrategy):
    """A Metropolis walk: propose mutants of the current config, keep worse ones sometimes.

    Cost differences are taken in log-space (``log(new / current)``) so the temperature means
    the same for a 10 us kernel and a 10 s one: at ``T = 0.1`` a 10% slower config is accepted
    with probability ~1/e. The temperature decays as ``t0 * cooling**k`` over the ``k`` results
    seen since the last (re)start; after ``patience`` results without beating the walk's best,
    the walk restarts from fresh random configs at ``t0`` (measured configs are never repeated,
    so restarts cost nothing but exploration). Batches are ``n`` mutants of the current config;
    results are accepted or rejected one by one in the order they are told.
    """

    name = "annealing"

    def __init__(
        self,
        space: SearchSpace,
        seed: int | None = None,
        *,
        t0: float = 0.1,
        cooling: float = 0.97,
        patience: int = 64,
        n_knobs: int = 2,
    ):
        super().__init__(space, seed)
        if t0 <= 0 or not 0 < cooling <= 1 or patience < 1 or n_knobs < 1:
            raise ValueError("need t0 > 0, 0 < cooling <= 1, patience >= 1 and n_knobs >= 1")
        self.t0, self.cooling, self.patience, self.n_knobs = t0, cooling, patience, n_knobs
        self._current: tuple[Config, float] | None = None
        self._steps = 0  # results processed since the last (re)start
        self._walk_best = math.inf
        self._stale = 0
        self.restarts = 0

    @property
    def temperature(self) -> float:
        return self.t0 * self.cooling**self._steps

    def _ask(self, n: int) -> list[Config]:
        if self._current is None:
            return self._random_unseen(n)
        current = self._current[0]
        # widen the step when the neighbourhood is used up
        return self._propose_unseen(
            n, lambda a: self.space.mutate(current, self.rng, n_knobs=self.n_knobs + a // (4 * n))
        )

    def _tell(self, configs: list[Config], costs: list[float]) -> None:
        for config, cost in zip(configs, costs, strict=True):
            if self._current is None or self._accept(cost, self._current[1]):
                self._current = (config, cost)
            self._steps += 1
            if cost < self._walk_best:
                self._walk_best, self._stale = cost, 0
            else:
                self._stale += 1
            if self._stale >= self.patience:
                self._current, self._steps, self._walk_best, self._stale = None, 0, math.inf, 0
                self.restarts += 1

    def _accept(self, cost: float, current: float) -> bool:
        """Metropolis rule on log cost; failures are never accepted over a success."""
        if cost <= current:
            return True
        if math.isinf(cost):
            return False
        delta = math.log(cost / max(current, 1e-300))
        return bool(self.rng.random() < math.exp(-delta / max(self.temperature, 1e-12)))
