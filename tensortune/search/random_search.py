"""Uniform random search: the baseline every smarter strategy has to beat."""

from __future__ import annotations

from ..space import Config
from .strategy import SearchStrategy


class RandomSearch(SearchStrategy):
    """Proposes distinct unseen configs uniformly at random (knob by knob, then constraints)."""

    name = "random"

    def _ask(self, n: int) -> list[Config]:
        return self._random_unseen(n)
