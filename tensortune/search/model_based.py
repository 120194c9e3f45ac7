"""Cost-model-guided search: measure few configs, let a learned model pick which ones.

Compiling and timing a candidate costs ~0.1-1 s while scoring one with a tree model costs
microseconds, so each batch is chosen by searching thousands of *unmeasured* configs with the
model and measuring only the most promising, plus a little exploration (AutoTVM/Ansor style).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Sequence

import numpy as np

from ..cost_model import CostModel
from ..cost_model.registry import DEFAULT_COST_MODEL, get_cost_model
from ..errors import StrategyError
from ..space import Config, SearchSpace
from .strategy import SearchStrategy

FeatureFn = Callable[[list[Config]], np.ndarray]
ProgramKey = Callable[[Config], str]


class ModelBasedSearch(SearchStrategy):
    """Proposes the configs a cost model predicts fastest, with exploration and diversity.

    Each ``ask(n)``:

    1. Until the model has ``min_train`` samples, returns the ``initial`` configs (e.g. the
       template's hand-picked default), then one-knob variations of them (``near_initial``
       of the rest of the first batch: a good default's neighbours are often better, and the
       model learns what each knob does around it), then configs spread over the space.
    2. Otherwise refits the model (``update``) on every result told since the last ask.
    3. Builds a candidate pool, all unseen and valid: ``pool_size / 2`` uniform random samples
       plus ``pool_size / 4`` mutants and crossovers of the ``n_parents`` fastest *measured*
       configs; then ``evolution_rounds`` rounds of model-guided evolution each breed
       ``pool_size / (4 * rounds)`` more from the ``n_parents`` best-*predicted* candidates.
       Every candidate is scored by the model (a few thousand predictions per ask).
    4. Fills the batch slot by slot: with probability ``epsilon`` a random unseen config
       (exploration, so a wrong model cannot trap the search), otherwise the best-scored
       candidate that is not a near-duplicate of one already in the batch, i.e. at least
       ``min_distance`` apart (L1 over choice indices of ordered knobs, +1 per differing
       unordered knob). If diversity rules out everything left, the rule is dropped.

    ``model`` is a registered cost model's name (``tensortune.cost_model.COST_MODELS``, built
    fresh with a seed drawn from ``seed``; default ``"lgbm"``, learning from scratch) or a
    ``CostModel`` instance: ``"random"`` for ablations, or a trained model to transfer (it is
    then trusted from the first ask if it already holds ``min_train`` samples). A model with a
    pretrained prior (``prior_features``, e.g. ``"pretrained"``, the tuner's default) ranks from
    the first ask: during the warm-up of step 1, half of each batch after the ``initial``
    configs is the prior's picks (its best-ranked candidate, then its best in each branch of an
    unordered knob the batch lacks: see ``_covering``), the rest the usual spread; its rows must
    start with the prior's columns (``features`` with matching ``names``, as
    ``LoopNestFeatures`` has). ``seeds`` are configs measured fast on similar workloads (the
    prior's exemplars, a database's best of the nearest workloads): with a prior, they and
    their one-step neighbours join its warm-up pool, so its first picks are chosen from what a
    zero-shot compile would choose from, not from random samples alone. ``features`` maps a
    list of configs to a 2-D feature matrix (e.g. loop-nest features of the lowered program)
    and replaces ``space.encode_batch``; it is called on the whole candidate pool, so lower
    ``pool_size`` if it is expensive. ``program_key`` names the program a config builds (e.g.
    its schedule trace): configs whose program was already proposed are never proposed again,
    so knobs a variant ignores cost no trials.
    """

    name = "model"

    def __init__(
        self,
        space: SearchSpace,
        seed: int | None = None,
        *,
        model: CostModel | str | None = None,
        features: FeatureFn | None = None,
        min_train: int = 8,
        epsilon: float = 0.05,
        pool_size: int = 2048,
        n_parents: int = 16,
        evolution_rounds: int = 4,
        min_distance: int = 1,
        initial: Sequence[Config] = (),
        near_initial: float = 0.5,
        program_key: ProgramKey | None = None,
        seeds: Sequence[Config] = (),
    ):
        super().__init__(space, seed)
        if not 0 <= epsilon <= 1 or not 0 <= near_initial <= 1:
            raise ValueError("need 0 <= epsilon <= 1 and 0 <= near_initial <= 1")
        if min_train < 1 or pool_size < 8 or n_parents < 1:
            raise ValueError("need min_train >= 1, pool_size >= 8, n_parents >= 1")
        if model is None or isinstance(model, str):
            model = get_cost_model(model or DEFAULT_COST_MODEL, seed=int(self.rng.integers(2**31)))
        elif not isinstance(model, CostModel):
            raise StrategyError(
                f"model must be a cost model's name or a CostModel, got {type(model).__name__}"
            )
        prior = model.prior_features
        if prior and tuple(getattr(features, "names", ())[: len(prior)]) != prior:
            raise StrategyError(
                f"cost model {type(model).__name__} holds a prior trained on "
                f"TRANSFERABLE_FEATURES: give features whose leading columns are those "
                f"(LoopNestFeatures(design), as tune() does), or choose a model such as 'lgbm'"
            )
        self.model: CostModel = model
        self.features = features
        self.min_train, self.epsilon, self.pool_size = min_train, epsilon, pool_size
        self.n_parents, self.evolution_rounds = n_parents, max(evolution_rounds, 0)
        self.min_distance = min_distance
        # spelled out in full (a knob left to its ``absent_means`` named), so that a variation
        # of one knob can be compared with its parent knob by knob
        self.initial = [space.complete(c) for c in initial if space.is_valid(c)]
        self.near_initial = near_initial
        self.seeds: list[Config] = []
        self.add_seeds(seeds)
        self.program_key = program_key
        self._programs: set[str] = set()  # programs of every config asked or told
        self._n_trained = 0  # history entries already given to the model
        self._ordered = np.array([k.ordered for k in space.knobs])

    # -- model -----------------------------------------------------------------------------

    def _featurize(self, configs: list[Config]) -> np.ndarray:
        if self.features is None:
            return self.space.encode_batch(configs)
        x = np.asarray(self.features(configs), dtype=np.float64)
        if x.ndim != 2 or len(x) != len(configs):
            raise ValueError(
                f"features() must return one row per config: got shape {x.shape} "
                f"for {len(configs)} configs"
            )
        return x

    def _train(self) -> None:
        """Feed the model every result told since the last training."""
        fresh = self.history[self._n_trained :]
        if fresh:
            self.model.update(self._featurize([c for c, _ in fresh]), [v for _, v in fresh])
            self._n_trained = len(self.history)

    def _score(self, configs: list[Config]) -> np.ndarray:
        if not configs:
            return np.zeros(0)
        return np.asarray(self.model.predict(self._featurize(configs)), dtype=np.float64)

    # -- candidate generation --------------------------------------------------------------

    def _offspring(self, parents: Sequence[Config], count: int) -> list[Config]:
        """``count`` children of ``parents``: 1-2 knob mutants, a quarter after crossover."""
        out: list[Config] = []
        for i in range(count if parents else 0):
            child = parents[i % len(parents)]
            if len(parents) > 1 and self.rng.random() < 0.25:
                other = parents[int(self.rng.integers(len(parents)))]
                child = self.space.crossover(child, other, self.rng)
            out.append(self.space.mutate(child, self.rng, n_knobs=1 + int(self.rng.integers(2))))
        return out

    def _ranked_candidates(self, extra: Sequence[Config] = ()) -> list[Config]:
        """Unseen valid candidates, ``extra`` among them, best predicted first (ties keep
        generation order)."""
        pool: dict[str, Config] = {}
        scores: dict[str, float] = {}

        def add(configs: list[Config]) -> None:
            new: dict[str, Config] = {}
            for config in configs:
                key = self.space.config_key(config)
                fresh = key not in pool and key not in new and key not in self._seen
                if fresh and self._is_new_program(config):
                    new[key] = config
            pool.update(new)
            scores.update(zip(new, self._score(list(new.values())).tolist(), strict=True))

        measured = [c for c, cost in self._top_told(self.n_parents) if math.isfinite(cost)]
        add(list(extra))
        add(self.space.sample(self.rng, self.pool_size // 2))
        add(self._offspring(measured, self.pool_size // 4))
        per_round = self.pool_size // (4 * max(self.evolution_rounds, 1))
        for _ in range(self.evolution_rounds):
            best = sorted(scores, key=scores.__getitem__, reverse=True)[: self.n_parents]
            add(self._offspring([pool[k] for k in best], per_round))
        return [pool[k] for k in sorted(scores, key=scores.__getitem__, reverse=True)]

    def _distances(self, row: np.ndarray, picked: np.ndarray) -> np.ndarray:
        """Distance from one index row to each picked row (L1 if ordered, Hamming if not)."""
        diff = np.abs(picked - row)
        return np.where(self._ordered, diff, diff > 0).sum(axis=1)

    # -- programs --------------------------------------------------------------------------

    def _is_new_program(self, config: Config) -> bool:
        return self.program_key is None or self.program_key(config) not in self._programs

    def _claim(self, config: Config) -> bool:
        """Record ``config``'s program as proposed; False if it already was."""
        if not self._is_new_program(config):
            return False
        if self.program_key is not None:
            self._programs.add(self.program_key(config))
        return True

    def _tell(self, configs: list[Config], costs: list[float]) -> None:
        for config in configs:
            self._claim(config)

    def _random_new(self, n: int, exclude: set[str] | None = None) -> list[Config]:
        """Up to ``n`` random unseen configs, each claiming a program not proposed before."""
        out: list[Config] = []
        taken = set(exclude or ())
        for _ in range(4):
            for config in self._random_unseen(2 * (n - len(out)), exclude=taken):
                taken.add(self.space.config_key(config))
                if len(out) < n and self._claim(config):
                    out.append(config)
            if len(out) == n:
                break
        return out

    # -- ask -------------------------------------------------------------------------------

    def _ask(self, n: int) -> list[Config]:
        self._train()
        if self.model.n_samples >= self.min_train:
            return self._select(self._ranked_candidates(), n)
        first: list[Config] = []
        for config in self.initial:
            if len(first) < n and not self.is_seen(config) and self._claim(config):
                first.append(config)
        if self.model.prior_features:
            # A prior ranks half the warm-up from the first ask; the other half is still
            # spread over the space, so a prior that is wrong here is found out quickly.
            keys = {self.space.config_key(c) for c in first}
            pool = self._ranked_candidates(self._seed_pool())
            ranked = [c for c in pool if self.space.config_key(c) not in keys]
            first += self._covering(ranked, (n - len(first) + 1) // 2, first)
        first += self._neighbours(round(self.near_initial * (n - len(first))), first)
        return first + self._space_filling(n - len(first), first)

    def add_seeds(self, configs: Sequence[Config]) -> None:
        """More ``seeds`` (the valid ones): a tuner finds them in its database, which it opens
        only once the strategy is built, so that bad arguments never touch it."""
        self.seeds += [self.space.complete(c) for c in configs if self.space.is_valid(c)]

    def _seed_pool(self) -> list[Config]:
        """The ``seeds`` and, in a random order, their one-step neighbours: at most a quarter
        of ``pool_size`` (each candidate is lowered to be scored)."""
        if not self.seeds:
            return []
        steps = [c for seed in self.seeds for c in self.space.neighbours(seed)]
        order = self.rng.permutation(len(steps))
        return [*self.seeds, *(steps[i] for i in order)][: max(self.pool_size // 4, 1)]

    def _covering(self, ranked: list[Config], n: int, picked: list[Config]) -> list[Config]:
        """The prior's ``n`` warm-up picks, spread over the space's branches: its best-ranked
        config, then for each value of an unordered knob (in the space's order: variant, vector
        axis, loop order first) that no pick has yet, the best-ranked config with that value,
        then the best of the rest. A prior learned on other workloads is least sure which branch
        wins on a new shape, and a first batch all in one branch can keep the search there."""
        if n <= 0 or not ranked:
            return []
        rows = self.space.indices(ranked)
        covered = {(j, i) for row in self.space.indices(picked) for j, i in enumerate(row)}
        branches = [(j, i) for j in np.flatnonzero(~self._ordered) for i in np.unique(rows[:, j])]
        out: list[Config] = []
        for knob, value in [(None, None), *branches]:
            if len(out) == n:
                break
            if knob is not None and (knob, value) in covered:
                continue
            for k in range(len(ranked)):
                if (knob is None or rows[k, knob] == value) and self._claim(ranked[k]):
                    out.append(ranked[k])
                    covered.update(enumerate(rows[k]))
                    break
        keys = {self.space.config_key(c) for c in out}
        rest = [c for c in ranked if self.space.config_key(c) not in keys]
        return out + self._select(rest, n - len(out))

    def _neighbours(self, n: int, picked: list[Config]) -> list[Config]:
        """Up to ``n`` unseen configs one knob away from an ``initial`` config (new programs),
        each varying a different knob while there are knobs left to vary."""
        if n <= 0 or not self.initial:
            return []
        taken = {self.space.config_key(c) for c in picked}
        children = [
            (parent, self.space.mutate(parent, self.rng, n_knobs=1))
            for parent in (self.initial[i % len(self.initial)] for i in range(32 * n))
        ]
        varied: set[str] = set()
        out: list[Config] = []
        for distinct_knob in (True, False):
            for parent, child in children:
                knob = next((k for k in child if child[k] != parent[k]), None)
                key = self.space.config_key(child)
                if len(out) == n or knob is None or key in taken or self.is_seen(child):
                    continue
                if (not distinct_knob or knob not in varied) and self._claim(child):
                    taken.add(key)
                    varied.add(knob)
                    out.append(child)
        return out

    def _space_filling(self, n: int, picked: list[Config]) -> list[Config]:
        """``n`` unseen configs spread over the space: greedy picks from random samples, each
        differing from the picks so far in as many knobs as possible (Hamming, so extreme tile
        sizes are not favoured), so a first batch covers every variant instead of clustering."""
        taken = {self.space.config_key(c) for c in picked}
        pool = self._random_unseen(16 * n, exclude=taken) if n > 0 else []
        rows = self.space.indices(pool) if pool else np.zeros((0, len(self.space.knobs)))
        chosen = [r for r in self.space.indices(picked)] if picked else []
        out: list[Config] = []
        while len(out) < n and len(pool):
            if chosen:
                far = (rows[:, None, :] != np.array(chosen)[None, :, :]).sum(axis=2).min(axis=1)
            else:
                far = np.zeros(len(pool))
            i = int(np.argmax(far))
            if self._claim(pool[i]):
                out.append(pool[i])
                chosen.append(rows[i])
            pool, rows = pool[:i] + pool[i + 1 :], np.delete(rows, i, axis=0)
        taken.update(self.space.config_key(c) for c in out)
        return out + self._random_new(n - len(out), exclude=taken)

    def _select(self, ranked: list[Config], n: int) -> list[Config]:
        """Fill ``n`` slots: epsilon-random exploration, else the best non-near-duplicate."""
        keys = [self.space.config_key(c) for c in ranked]
        rows = self.space.indices(ranked)
        taken: set[str] = set()
        picked: list[np.ndarray] = []  # index rows of the batch so far
        skipped: deque[int] = deque()  # near-duplicates, used only once nothing else is left
        cursor = 0

        def next_ranked() -> Config | None:
            nonlocal cursor
            while cursor < len(ranked):
                i, cursor = cursor, cursor + 1
                if keys[i] in taken or not self._is_new_program(ranked[i]):
                    continue
                if picked and self._distances(rows[i], np.array(picked)).min() < (
                    self.min_distance
                ):
                    skipped.append(i)
                    continue
                self._claim(ranked[i])
                return ranked[i]
            while skipped:
                i = skipped.popleft()
                if keys[i] not in taken and self._claim(ranked[i]):
                    return ranked[i]
            return None

        out: list[Config] = []
        while len(out) < n:
            explore = self.rng.random() < self.epsilon
            explored = self._random_new(1, exclude=taken) if explore else []
            choice = explored[0] if explored else next_ranked()
            if choice is None:
                break
            taken.add(self.space.config_key(choice))
            picked.append(self.space.indices([choice])[0])
            out.append(choice)
        return out + self._random_new(n - len(out), exclude=taken)
