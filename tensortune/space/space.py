"""Search spaces as plain data: knobs with finite choices plus named validity constraints.

A space knows nothing about schedules or compilers, so every search strategy, cost model and
database can share it: a *config* is a plain ``{knob name: value}`` dict, a space says which
configs are legal, how to walk between them (sample, mutate, crossover, neighbours) and how
to turn them into numbers for a cost model (``encode``).

Declaring a space for your own program::

    space = SearchSpace(
        [Knob("tile_i", (1, 2, 4, 8, 16)), Knob("tile_j", (1, 2, 4, 8, 16)),
         Knob("order", ("ijk", "ikj")), Knob("vectorize", (False, True))],
        [Constraint("fits_registers", lambda c: c["tile_i"] * c["tile_j"] <= 32)],
    )
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import ConfigError
from .knob import Config, Constraint, Knob, KnobKind, Value, encoding_table, value_id

RngLike = np.random.Generator | int | None


class SearchSpace:
    """The cartesian product of some knobs, restricted by constraints.

    Randomness always comes from a caller-supplied ``rng`` (a ``numpy.random.Generator`` or a
    seed), so every strategy built on top is reproducible.
    """

    def __init__(self, knobs: Sequence[Knob], constraints: Sequence[Constraint] = ()):
        self.knobs: tuple[Knob, ...] = tuple(knobs)
        self.constraints: tuple[Constraint, ...] = tuple(constraints)
        names = [k.name for k in self.knobs]
        if not names:
            raise ValueError("a search space needs at least one knob")
        _check_unique("knob", names)
        _check_unique("constraint", [c.name for c in self.constraints])
        self.names: tuple[str, ...] = tuple(names)
        self._by_name = {k.name: i for i, k in enumerate(self.knobs)}
        self._ids = [(k.name, k._ids) for k in self.knobs]
        self._later = [k for k in self.knobs if k.absent_means is not None]
        self._sizes = np.array([len(k.choices) for k in self.knobs], dtype=np.int64)
        tables = [encoding_table(k) for k in self.knobs]
        self.feature_names: tuple[str, ...] = tuple(n for names_, _ in tables for n in names_)
        self._tables = [t for _, t in tables]

    # -- basic facts ---------------------------------------------------------------------

    def knob(self, name: str) -> Knob:
        """The knob called ``name`` (KeyError if there is none)."""
        return self.knobs[self._by_name[name]]

    @property
    def size(self) -> int:
        """Number of configs in the product of choices, before constraints."""
        return math.prod(len(k.choices) for k in self.knobs)

    def __repr__(self) -> str:
        knobs = ", ".join(f"{k.name}[{len(k.choices)}]" for k in self.knobs)
        cons = ", ".join(c.name for c in self.constraints)
        return f"SearchSpace({knobs}; constraints: {cons or 'none'}; size={self.size})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SearchSpace):
            return NotImplemented
        return self.knobs == other.knobs and self.constraints == other.constraints

    def __hash__(self) -> int:
        return hash((self.knobs, self.constraints))

    # -- validity ------------------------------------------------------------------------

    def complete(self, config: Mapping[str, Any]) -> Config:
        """``config`` with each knob it lacks that has an ``absent_means`` set to that choice:
        a config recorded before the knob was added, as this space spells it now."""
        filled = dict(config)
        for knob in self._later:
            filled.setdefault(knob.name, knob.absent_means)
        return filled

    def _problem(self, config: Mapping[str, Any]) -> str | None:
        """Why ``config`` is not a valid point of this space, or None when it is."""
        if not isinstance(config, Mapping):
            return f"a config must be a dict, got {type(config).__name__}"
        config = self.complete(config)
        for name in config:
            if name not in self._by_name:
                return f"unknown knob '{name}' (knobs: {', '.join(self.names)})"
        for knob in self.knobs:
            if knob.name not in config:
                return f"missing knob '{knob.name}'"
            value = config[knob.name]
            if knob.lookup(value) is None:
                shown = ", ".join(repr(c) for c in knob.choices)
                return f"knob '{knob.name}' has no choice {value!r} (choices: {shown})"
        return self._violated(config)

    def _violated(self, config: Mapping[str, Any]) -> str | None:
        for constraint in self.constraints:
            if not constraint(config):  # type: ignore[arg-type]
                return f"constraint '{constraint.name}' violated by {self.config_key(config)}"
        return None

    def is_valid(self, config: Mapping[str, Any]) -> bool:
        """True when every knob has a legal value and every constraint holds."""
        return self._problem(config) is None

    def validate(self, config: Mapping[str, Any]) -> None:
        """Raise ConfigError (a ValueError) naming the bad knob, value or violated constraint."""
        problem = self._problem(config)
        if problem is not None:
            raise ConfigError(problem)

    # -- coordinates: configs <-> choice indices ---------------------------------------

    def indices(self, configs: Sequence[Mapping[str, Any]]) -> np.ndarray:
        """Choice indices, shape (len(configs), n_knobs): the space's own integer coordinates."""
        if self._later:
            configs = [self.complete(config) for config in configs]
        try:  # hot path of every search step: one dict lookup per knob
            rows = [[ids[value_id(config[name])] for name, ids in self._ids] for config in configs]
        except (KeyError, TypeError):
            for config in configs:
                for knob in self.knobs:
                    if knob.name not in config:
                        raise ValueError(f"missing knob '{knob.name}'") from None
                    if knob.lookup(config[knob.name]) is None:
                        value = config[knob.name]
                        raise ValueError(f"knob '{knob.name}' has no choice {value!r}") from None
            raise
        return np.array(rows, dtype=np.int64).reshape(len(configs), len(self.knobs))

    def from_indices(self, row: Sequence[int]) -> Config:
        """The config at the given choice indices (constraints not checked)."""
        return {k.name: k.choices[int(i)] for k, i in zip(self.knobs, row, strict=True)}

    # -- walking the space ---------------------------------------------------------------

    def enumerate(self) -> Iterator[Config]:
        """Every valid config once, in lexicographic (knob order, choice order) order."""
        for values in itertools.product(*(k.choices for k in self.knobs)):
            config = dict(zip(self.names, values, strict=True))
            if self._violated(config) is None:
                yield config

    def sample(self, rng: RngLike, n: int, max_tries: int | None = None) -> list[Config]:
        """Up to ``n`` valid configs, each knob uniform over its choices (rejection sampling).

        Samples are independent, so repeats are possible. At most ``max_tries`` raw draws are
        made (default ``100 * n + 1000``); fewer than ``n`` configs come back when constraints
        reject nearly everything.
        """
        rng = np.random.default_rng(rng)
        budget = 100 * n + 1000 if max_tries is None else max_tries
        out: list[Config] = []
        while len(out) < n and budget > 0:
            batch = min(budget, max(2 * (n - len(out)), 64))
            budget -= batch
            rows = rng.integers(0, self._sizes, size=(batch, len(self.knobs)))
            for row in rows:
                config = self.from_indices(row)
                if self._violated(config) is None:
                    out.append(config)
                    if len(out) == n:
                        break
        return out

    def _step(self, col: int, current: int, rng: np.random.Generator) -> int:
        """A new choice index for one knob: +-1/+-2 steps when ordered, anything else if not."""
        knob, n = self.knobs[col], int(self._sizes[col])
        if knob.ordered:
            steps = [s for s in (-2, -1, 1, 2) if 0 <= current + s < n]
            return current + steps[int(rng.integers(len(steps)))]
        other = int(rng.integers(n - 1))
        return other + (other >= current)

    def mutate(
        self,
        config: Mapping[str, Any],
        rng: RngLike,
        n_knobs: int = 1,
        max_tries: int = 100,
    ) -> Config:
        """A valid config differing from ``config`` in 1..``n_knobs`` knobs.

        Ordered knobs move to a nearby choice (+-1 or +-2 index steps) so mutation stays local;
        unordered ones jump to any other choice. Retries until the result is valid and returns
        an unchanged copy of ``config`` if ``max_tries`` attempts all violate constraints.
        """
        rng = np.random.default_rng(rng)
        base = self.indices([config])[0]
        mutable = [i for i, size in enumerate(self._sizes) if size > 1]
        if not mutable or n_knobs < 1:
            return dict(config)
        for _ in range(max_tries):
            k = int(rng.integers(1, min(n_knobs, len(mutable)) + 1))
            row = base.copy()
            for col in rng.choice(mutable, size=k, replace=False):
                row[col] = self._step(int(col), int(base[col]), rng)
            child = self.from_indices(row)
            if self._violated(child) is None:
                return child
        return dict(config)

    def crossover(
        self,
        a: Mapping[str, Any],
        b: Mapping[str, Any],
        rng: RngLike,
        max_tries: int = 100,
    ) -> Config:
        """Uniform crossover: each knob from ``a`` or ``b`` with equal odds, retried until valid.

        Falls back to a copy of ``a`` when no valid child turns up within ``max_tries``.
        """
        rng = np.random.default_rng(rng)
        pa, pb = self.indices([a, b])
        for _ in range(max_tries):
            child = self.from_indices(np.where(rng.random(len(pa)) < 0.5, pa, pb))
            if self._violated(child) is None:
                return child
        return dict(a)

    def neighbours(self, config: Mapping[str, Any]) -> list[Config]:
        """Valid configs one step away: +-1 index on an ordered knob, any other value otherwise."""
        base = self.indices([config])[0]
        out = []
        for col, knob in enumerate(self.knobs):
            cur, n = int(base[col]), int(self._sizes[col])
            if knob.ordered:
                targets = [i for i in (cur - 1, cur + 1) if 0 <= i < n]
            else:
                targets = [i for i in range(n) if i != cur]
            for target in targets:
                row = base.copy()
                row[col] = target
                candidate = self.from_indices(row)
                if self._violated(candidate) is None:
                    out.append(candidate)
        return out

    # -- features ------------------------------------------------------------------------

    def encode(self, config: Mapping[str, Any]) -> np.ndarray:
        """Numeric feature vector of one config (see ``feature_names`` for the columns)."""
        return self.encode_batch([config])[0]

    def encode_batch(self, configs: Sequence[Mapping[str, Any]]) -> np.ndarray:
        """Feature matrix, one row per config: log2 value and index for ordered ints, the index
        for other ordered knobs, 0/1 for bools, one-hot for unordered categoricals."""
        idx = self.indices(configs)
        return np.hstack([table[idx[:, col]] for col, table in enumerate(self._tables)])

    # -- serialisation -------------------------------------------------------------------

    @staticmethod
    def config_key(config: Mapping[str, Any]) -> str:
        """Canonical JSON of a config (sorted keys, no spaces): a stable dict/database key."""
        return json.dumps(dict(config), sort_keys=True, separators=(",", ":"))

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form; constraints are stored by name only (functions do not serialise)."""
        return {
            "knobs": [k.to_dict() for k in self.knobs],
            "constraints": [c.name for c in self.constraints],
        }

    @classmethod
    def from_dict(
        cls,
        data: Mapping[str, Any],
        registry: Mapping[str, Callable[[Config], bool]] | None = None,
    ) -> SearchSpace:
        """Rebuild a space from ``to_dict`` output.

        Constraint functions are looked up by name in ``registry``; a missing name raises
        ValueError rather than silently widening the space. Code that owns its constraints (a
        schedule template building its own space) should simply call its factory again instead.
        """
        registry = registry or {}
        knobs = [
            Knob(d["name"], tuple(d["choices"]), d.get("kind"), d.get("ordered"))
            for d in data["knobs"]
        ]
        missing = [n for n in data.get("constraints", []) if n not in registry]
        if missing:
            raise ValueError(
                f"constraint(s) {', '.join(repr(n) for n in missing)} not in the registry "
                "passed to from_json/from_dict"
            )
        return cls(knobs, [Constraint(n, registry[n]) for n in data.get("constraints", [])])

    def to_json(self) -> str:
        """JSON text of ``to_dict()``."""
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_json(
        cls, text: str, registry: Mapping[str, Callable[[Config], bool]] | None = None
    ) -> SearchSpace:
        """Inverse of ``to_json``; see ``from_dict`` for how constraints are resolved."""
        return cls.from_dict(json.loads(text), registry)


def _check_unique(what: str, names: Sequence[str]) -> None:
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ValueError(f"duplicate {what} name(s): {', '.join(dupes)}")


__all__ = ["Config", "Constraint", "Knob", "KnobKind", "RngLike", "SearchSpace", "Value"]
