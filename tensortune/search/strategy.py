"""The one interface every search strategy implements: ask for configs, tell their costs.

Ask/tell (rather than a strategy owning an ``optimize`` loop) keeps measurement, budgets,
parallel batches and the database in the tuner, so strategies stay small, pure and testable.

Guarantees every strategy gets from this base class:

* ``ask`` only returns valid configs that were never asked or told before, even across calls
  and even if ``tell`` is called with configs the strategy never proposed (a warm start);
* when the space is exhausted ``ask`` returns fewer configs, eventually ``[]``;
* all randomness comes from ``self.rng``, seeded from ``seed``, so runs are reproducible.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from ..space import Config, SearchSpace

#: Spaces up to this size are enumerated to find the last unseen configs once random sampling
#: stops finding any, so "exhausted" really means every valid config was proposed.
ENUMERATE_LIMIT = 200_000


class SearchStrategy(ABC):
    """Proposes configs of ``space`` to measure and learns from their costs: times, or (as the
    tuner reports them) times relative to a reference kernel timed beside each candidate.

    Subclasses implement ``_ask`` (and usually ``_tell``) and take their options as keyword-only
    ``__init__`` parameters, which ``make_strategy`` checks by name.
    """

    name: ClassVar[str]

    def __init__(self, space: SearchSpace, seed: int | None = None):
        self.space = space
        self.seed = seed
        self.rng = np.random.default_rng(seed)
        self.history: list[tuple[Config, float]] = []  # every told (config, cost), in order
        self.results: dict[str, tuple[Config, float]] = {}  # config_key -> (config, last cost)
        self._seen: set[str] = set()  # asked or told
        self._pending: dict[str, Config] = {}  # asked, not yet told
        self._best: tuple[Config | None, float] = (None, math.inf)
        self._unseen_pool: list[Config] | None = None

    # -- public interface ----------------------------------------------------------------

    def ask(self, n: int = 1) -> list[Config]:
        """Up to ``n`` new valid configs to measure next; fewer (or none) once exhausted."""
        if n < 1:
            raise ValueError(f"ask(n) needs n >= 1, got {n}")
        out: list[Config] = []
        for config in self._ask(n):
            key = self.space.config_key(config)
            if key in self._seen or not self.space.is_valid(config):
                continue  # safety net: a subclass must never break the no-repeat guarantee
            self._seen.add(key)
            self._pending[key] = dict(config)
            out.append(dict(config))
            if len(out) == n:
                break
        return out

    def tell(self, configs: Sequence[Mapping[str, Any]], costs: Sequence[float]) -> None:
        """Report measured costs (``math.inf`` or NaN for failed candidates)."""
        if len(configs) != len(costs):
            raise ValueError(f"tell got {len(configs)} configs but {len(costs)} costs")
        clean: list[tuple[Config, float]] = []
        for config, cost in zip(configs, costs, strict=True):
            value = float(cost)
            if math.isnan(value):
                value = math.inf
            if value < 0:
                raise ValueError(f"cost {value} is negative; costs are (relative) times")
            self.space.validate(config)
            clean.append((self.space.complete(config), value))
        for config, value in clean:
            key = self.space.config_key(config)
            self._seen.add(key)
            self._pending.pop(key, None)
            self.results[key] = (config, value)
            self.history.append((config, value))
            if value < self._best[1]:
                self._best = (config, value)
        self._tell([c for c, _ in clean], [v for _, v in clean])

    @property
    def best(self) -> tuple[Config | None, float]:
        """Fastest (config, cost) told so far; ``(None, inf)`` before any successful run."""
        config, cost = self._best
        return (None if config is None else dict(config)), cost

    @property
    def n_told(self) -> int:
        return len(self.history)

    @property
    def pending(self) -> list[Config]:
        """Configs asked but not told yet (e.g. to re-queue them after a tuner crash)."""
        return [dict(c) for c in self._pending.values()]

    def is_seen(self, config: Mapping[str, Any]) -> bool:
        """True once a config was asked or told (so asking it again would be a repeat)."""
        return self.space.config_key(config) in self._seen

    def __repr__(self) -> str:
        return f"{type(self).__name__}(seed={self.seed}, told={self.n_told}, best={self.best[1]})"

    # -- for subclasses ------------------------------------------------------------------

    @abstractmethod
    def _ask(self, n: int) -> list[Config]:
        """Propose up to ``n`` distinct, valid, unseen configs (the base class re-checks)."""

    def _tell(self, configs: list[Config], costs: list[float]) -> None:  # noqa: B027
        """Learn from results; ``self.history``/``self.results`` are already updated."""

    def _top_told(self, k: int) -> list[tuple[Config, float]]:
        """The ``k`` fastest distinct told configs (failures last), fastest first."""
        return sorted(self.results.values(), key=lambda item: item[1])[:k]

    def _propose_unseen(self, n: int, make: Callable[[int], Config]) -> list[Config]:
        """Up to ``n`` distinct unseen configs from ``make(attempt)``, topped up at random.

        ``make`` gets the attempt number so it can take bigger steps when small ones keep
        landing on seen configs; after ``20 * n`` attempts the rest is filled randomly.
        """
        out: list[Config] = []
        taken: set[str] = set()
        for attempt in range(20 * n):
            if len(out) == n:
                return out
            config = make(attempt)
            key = self.space.config_key(config)
            if key not in taken and key not in self._seen:
                taken.add(key)
                out.append(config)
        return out + self._random_unseen(n - len(out), exclude=taken)

    def _random_unseen(self, n: int, exclude: set[str] | None = None) -> list[Config]:
        """Up to ``n`` distinct valid configs never seen (nor in ``exclude``), chosen at random.

        Rejection-samples first; when that stops finding new configs and the space is small
        enough, enumerates the remaining valid configs once so the tail of a nearly exhausted
        space is still found.
        """
        out: list[Config] = []
        if n <= 0:
            return out
        taken = set(exclude or ())

        def take(candidates: Sequence[Config]) -> None:
            for config in candidates:
                key = self.space.config_key(config)
                if len(out) < n and key not in self._seen and key not in taken:
                    taken.add(key)
                    out.append(config)

        if self._unseen_pool is None:
            for _ in range(4):
                take(self.space.sample(self.rng, 4 * n))
                if len(out) == n:
                    return out
            if self.space.size > ENUMERATE_LIMIT:
                return out
            self._unseen_pool = list(self.space.enumerate())
        self._unseen_pool = [c for c in self._unseen_pool if not self.is_seen(c)]
        take([self._unseen_pool[int(i)] for i in self.rng.permutation(len(self._unseen_pool))])
        return out
