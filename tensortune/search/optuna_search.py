"""Optuna's TPE and CMA-ES samplers behind tensortune's ask/tell interface.

The only module that imports optuna (lazily, when a strategy is built). Optuna does not know
our constraints or our no-repeat rule, so this adapter filters its proposals:

* a proposal violating a constraint is told to the study as a failure (a huge cost), teaching
  the sampler to avoid that region, and optuna is asked again;
* a proposal that was already measured is told its known cost at once;
* a proposal still waiting for its measurement is attached to that config and told when the
  cost arrives (the sampler's constant liar treats it as pending meanwhile);
* configs measured without an optuna trial (warm starts, random top-ups once optuna keeps
  repeating itself) are added to the study as completed trials, so nothing told is wasted.
"""

from __future__ import annotations

import importlib.util
import math
import warnings
from typing import Any

from ..errors import MissingDependency
from ..space import Config, SearchSpace
from .strategy import SearchStrategy

#: What optuna is told for failed or infeasible configs: finite (CMA-ES needs finite values)
#: and far above any real runtime; both samplers only use the ordering of values.
FAILURE_VALUE = 1e9


def _import_optuna() -> Any:
    try:
        import optuna
    except ImportError as e:
        raise MissingDependency(
            'the optuna strategies need Optuna: pip install "tensortune[tune]"'
        ) from e
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna


class OptunaTPESearch(SearchStrategy):
    """Tree-structured Parzen Estimator search; every knob is a ``suggest_categorical``.

    ``n_startup_trials`` random trials come first, as in optuna itself.
    """

    name = "optuna-tpe"

    def __init__(
        self,
        space: SearchSpace,
        seed: int | None = None,
        *,
        n_startup_trials: int = 10,
    ):
        super().__init__(space, seed)
        self._optuna = _import_optuna()
        self.n_startup_trials = n_startup_trials
        self.note: str | None = None  # why a requested sampler was replaced, if it was
        self._by_index = False  # True: ordered knobs are suggested as an int choice index
        sampler_seed = int(self.rng.integers(2**31))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # experimental-feature warnings
            sampler = self._make_sampler(sampler_seed)
            self.study = self._optuna.create_study(direction="minimize", sampler=sampler)
        if self.note:
            warnings.warn(self.note, RuntimeWarning, stacklevel=2)
        self._trials: dict[str, list[Any]] = {}  # config key -> optuna trials awaiting its cost

    def _make_sampler(self, seed: int) -> Any:
        return self._optuna.samplers.TPESampler(seed=seed, n_startup_trials=self.n_startup_trials)

    # -- mapping between configs and optuna parameters -----------------------------------

    def _indexed(self, knob_index: int) -> bool:
        knob = self.space.knobs[knob_index]
        return self._by_index and (knob.ordered or knob.kind == "bool")

    def _distributions(self) -> dict[str, Any]:
        dist = self._optuna.distributions
        return {
            k.name: dist.IntDistribution(0, len(k.choices) - 1)
            if self._indexed(i)
            else dist.CategoricalDistribution(list(k.choices))
            for i, k in enumerate(self.space.knobs)
        }

    def _suggest(self, trial: Any) -> Config:
        config: Config = {}
        for i, knob in enumerate(self.space.knobs):
            if self._indexed(i):
                index = trial.suggest_int(knob.name, 0, len(knob.choices) - 1)
                config[knob.name] = knob.choices[index]
            else:
                config[knob.name] = trial.suggest_categorical(knob.name, list(knob.choices))
        return config

    def _params(self, config: Config) -> dict[str, Any]:
        return {
            k.name: k.lookup(config[k.name]) if self._indexed(i) else config[k.name]
            for i, k in enumerate(self.space.knobs)
        }

    # -- ask / tell ----------------------------------------------------------------------

    def _ask(self, n: int) -> list[Config]:
        out: list[Config] = []
        taken: set[str] = set()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for _ in range(10 * n + 20):
                if len(out) == n:
                    break
                trial = self.study.ask()
                config = self._suggest(trial)
                key = self.space.config_key(config)
                if not self.space.is_valid(config):
                    self.study.tell(trial, FAILURE_VALUE)
                elif key in self.results:
                    self.study.tell(trial, _value(self.results[key][1]))
                else:
                    self._trials.setdefault(key, []).append(trial)
                    if key not in taken and not self.is_seen(config):
                        taken.add(key)
                        out.append(config)
        return out + self._random_unseen(n - len(out), exclude=taken)

    def _tell(self, configs: list[Config], costs: list[float]) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for config, cost in zip(configs, costs, strict=True):
                trials = self._trials.pop(self.space.config_key(config), None)
                for trial in trials or ():
                    self.study.tell(trial, _value(cost))
                if not trials:
                    self.study.add_trial(
                        self._optuna.trial.create_trial(
                            params=self._params(config),
                            distributions=self._distributions(),
                            value=_value(cost),
                        )
                    )


class OptunaCmaEsSearch(OptunaTPESearch):
    """CMA-ES over the choice *indices* of ordered knobs (tile sizes are a numeric axis); the
    unordered categoricals of a mixed space (loop order, variant) are sampled beside it by TPE,
    optuna's ``independent_sampler``, as design spaces mix both.

    Needs at least one ordered or bool knob and the ``cmaes`` package; otherwise it falls back
    to TPE, warns, and records why in ``self.note``.
    """

    name = "optuna-cmaes"

    def _make_sampler(self, seed: int) -> Any:
        if not any(k.ordered or k.kind == "bool" for k in self.space.knobs):
            reason = "no knob is ordered: every knob is an unordered categorical"
        elif importlib.util.find_spec("cmaes") is None:
            reason = "the 'cmaes' package is not installed (pip install cmaes)"
        else:
            self._by_index = True
            samplers = self._optuna.samplers
            return samplers.CmaEsSampler(
                seed=seed,
                n_startup_trials=self.n_startup_trials,
                warn_independent_sampling=False,
                independent_sampler=samplers.TPESampler(seed=seed),
            )
        self.note = f"optuna-cmaes falls back to TPE: {reason}"
        return super()._make_sampler(seed)


def _value(cost: float) -> float:
    return cost if math.isfinite(cost) else FAILURE_VALUE
