"""Exhaustive search: every valid config once, in the space's lexicographic order."""

from __future__ import annotations

from ..space import Config, SearchSpace
from .strategy import SearchStrategy


class GridSearch(SearchStrategy):
    """Walks ``space.enumerate()``; the ground truth for small spaces and for tests.

    Configs already told (e.g. a warm start from the database) are skipped, not re-measured.
    """

    name = "grid"

    def __init__(self, space: SearchSpace, seed: int | None = None):
        super().__init__(space, seed)
        self._configs = space.enumerate()

    def _ask(self, n: int) -> list[Config]:
        out: list[Config] = []
        for config in self._configs:
            if not self.is_seen(config):
                out.append(config)
                if len(out) == n:
                    break
        return out
