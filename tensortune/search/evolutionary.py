"""A generational genetic algorithm: tournament selection, crossover, mutation, elitism."""

from __future__ import annotations

from ..space import Config, SearchSpace
from .strategy import SearchStrategy


class EvolutionarySearch(SearchStrategy):
    """Evolves a population of measured configs.

    The first ``population`` results (random samples) form generation 0. Children are bred by
    picking parents with size-``tournament`` tournaments, uniform crossover (probability
    ``crossover_prob``) and mutation of up to ``n_knobs`` knobs (probability ``mutation_prob``,
    or always when the child would repeat a seen config). Once ``population - elite`` children
    have been measured, the next generation is the ``elite`` best of the old one plus the best
    children, so the best config found is never lost.
    """

    name = "evolutionary"

    def __init__(
        self,
        space: SearchSpace,
        seed: int | None = None,
        *,
        population: int = 32,
        tournament: int = 3,
        elite: int = 4,
        crossover_prob: float = 0.9,
        mutation_prob: float = 0.5,
        n_knobs: int = 2,
    ):
        super().__init__(space, seed)
        if population < 2 or not 0 <= elite < population or tournament < 1 or n_knobs < 1:
            raise ValueError("need population >= 2, 0 <= elite < population, tournament >= 1")
        self.population_size, self.tournament, self.elite = population, tournament, elite
        self.crossover_prob, self.mutation_prob, self.n_knobs = (
            crossover_prob,
            mutation_prob,
            n_knobs,
        )
        self.population: list[tuple[Config, float]] = []
        self.generation = 0
        self._children: list[tuple[Config, float]] = []

    def _select(self) -> Config:
        picks = self.rng.integers(len(self.population), size=self.tournament)
        return min((self.population[int(i)] for i in picks), key=lambda item: item[1])[0]

    def _breed(self, extra_knobs: int) -> Config:
        child = self._select()
        if self.rng.random() < self.crossover_prob:
            child = self.space.crossover(child, self._select(), self.rng)
        if self.rng.random() < self.mutation_prob or self.is_seen(child):
            child = self.space.mutate(child, self.rng, n_knobs=self.n_knobs + extra_knobs)
        return child

    def _ask(self, n: int) -> list[Config]:
        if not self.population:
            return self._random_unseen(n)
        return self._propose_unseen(n, lambda a: self._breed(extra_knobs=a // (4 * n)))

    def _tell(self, configs: list[Config], costs: list[float]) -> None:
        self._children.extend(zip(configs, costs, strict=True))
        keep = self.elite if self.population else 0
        if len(self._children) < self.population_size - keep:
            return
        elite = sorted(self.population, key=lambda item: item[1])[:keep]
        fill = sorted(self._children, key=lambda item: item[1])[: self.population_size - keep]
        self.population = elite + fill
        self._children = []
        self.generation += 1
