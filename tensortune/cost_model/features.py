"""Features of a candidate's lowered loop nest, for cost models (Ansor/TenSet style).

Knob values alone tell a model little it can generalise: "rows=8" means nothing until it has
seen rows=8 measured. The lowered program says *why* a config is fast or slow in units that
mean the same for every knob and template: how many vector FMAs each load feeds, how many
accumulator vectors stay in registers, whether a guard sits in the hot loop, how many bytes
each loop level touches compared with L1/L2, how evenly the parallel loop splits over threads.
So each config is scheduled and lowered (a few milliseconds, cached per config) and its
hottest store is described by a fixed-length vector. The register block around that store is
its trailing unrolled and vectorized loops; where lowering has already unrolled them into copies
of the store (the program as it runs), the copies in the same loops count as one block. The
loop features are followed by per-access summaries, the compiler flags the kernel is built with,
the same program features minus the template default's (the reference every candidate is timed
beside, so "bigger than the default's" carries over between shapes where "bigger than 1 MB"
does not) and the target's own features: together they are ``TRANSFERABLE_FEATURES``, which
mean the same for every template and machine, so a model trained on them (the pretrained prior)
ranks configs of workloads it never saw. Within one run the knob encoding is appended
(``LoopNestFeatures``) so nothing the program cannot show is lost; knobs mean nothing to another
template, so they never enter the transferable set. Configs that fail to schedule or lower get
NaN for every program feature, which tree models treat as missing. ``feature_docs`` documents
every column.
"""

from __future__ import annotations

import json
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import TensorTuneError
from ..ir.nodes import PrimFunc
from ..lower import lower
from ..schedule.annotations import OPT_LEVELS, fast_math
from ..space import Config
from ..space.template import DesignSpace
from .access_features import ACCESS_FEATURES, TARGET_FEATURES, access_features, target_features
from .loop_nest import LOOP_FEATURES, _log2, _site_features, hottest_block, loop_nest_features

__all__ = [
    "ACCESS_FEATURES",
    "BUILD_FEATURES",
    "DELTA_FEATURES",
    "LOOP_FEATURES",
    "PROGRAM_FEATURES",
    "TARGET_FEATURES",
    "TRANSFERABLE_FEATURES",
    "LoopNestFeatures",
    "loop_nest_features",
    "program_features",
    "transferable_features",
]

#: How the C compiler is asked to build the kernel (``Schedule.flags``, set by ``annotate``):
#: the same flags, with the same effect, for every template, so they are program features, not
#: knobs (one loop nest ran 2-3x apart at O2 and O3, or with and without an unroll pragma).
BUILD_FEATURES: tuple[str, ...] = ("build_opt_level", "build_fast_math", "build_log_unroll")

#: Features of the lowered program: NaN together when a config cannot be built.
PROGRAM_FEATURES: tuple[str, ...] = LOOP_FEATURES + ACCESS_FEATURES + BUILD_FEATURES

#: Each program feature minus the template default's, for the same workload and target: how
#: the candidate's program differs from the reference every measurement is timed beside. A value
#: that means "large" for one shape and "small" for another (a working set, a trip count)
#: becomes "larger or smaller than the default's", which carries over between shapes.
DELTA_FEATURES: tuple[str, ...] = tuple(f"delta_{name}" for name in PROGRAM_FEATURES)

#: Columns that mean the same for every template and target, in order: no knob encoding.
TRANSFERABLE_FEATURES: tuple[str, ...] = PROGRAM_FEATURES + DELTA_FEATURES + TARGET_FEATURES


def build_features(flags: Mapping[str, Any]) -> list[float]:
    """``BUILD_FEATURES`` of a schedule's code-generation flags (absent: the backend's -O3)."""
    level = flags.get("opt_level", "O3")
    unroll = flags.get("unroll_pragma", 1)
    return [
        float(OPT_LEVELS.index(level) + 1 if level != "Ofast" else 3),
        float(fast_math(flags)),
        _log2(float(unroll)),
    ]


def program_features(
    func: PrimFunc, design: DesignSpace, flags: Mapping[str, Any] | None = None
) -> np.ndarray:
    """``PROGRAM_FEATURES`` of a lowered kernel built with ``flags`` (``Schedule.flags``; none:
    the defaults), NaN for a kernel without stores."""
    found = hottest_block(func)
    if found is None:
        return np.full(len(PROGRAM_FEATURES), np.nan)
    group, others = found
    row = (
        _site_features(group, others, func, design)
        + access_features(group, func, design)
        + build_features(flags or {})
    )
    return np.array(row, dtype=np.float64)


class LoopNestFeatures:
    """``features(configs) -> matrix`` for ``ModelBasedSearch``: ``TRANSFERABLE_FEATURES`` then
    the knob encoding (``transferable(configs)`` gives the first part alone).

    Each config is scheduled and lowered at most once per instance (rows are cached by config
    key), and ``program_key`` names the schedule it builds, so a search can skip configs that
    differ only in knobs their variant ignores. ``seconds`` totals the time spent featurising.
    """

    def __init__(self, design: DesignSpace):
        self.design = design
        self.names: tuple[str, ...] = TRANSFERABLE_FEATURES + design.space.feature_names
        self.seconds = 0.0
        self._target = target_features(design.target)
        self._cache: dict[str, tuple[np.ndarray, str]] = {}

    def _entry(self, config: Config) -> tuple[np.ndarray, str]:
        key = self.design.space.config_key(config)
        entry = self._cache.get(key)
        if entry is None:
            start = time.perf_counter()
            try:
                sch = self.design.schedule(config)
                program = json.dumps(sch.trace, sort_keys=True, default=str)
                func = lower(sch, num_threads=self.design.target.num_threads)
                entry = (program_features(func, self.design, sch.flags), program)
            except (TensorTuneError, ValueError):
                entry = (np.full(len(PROGRAM_FEATURES), np.nan), key)
            self._cache[key] = entry
            self.seconds += time.perf_counter() - start
        return entry

    def program_key(self, config: Config) -> str:
        """The schedule trace ``config`` builds: equal keys compile to the same kernel."""
        return self._entry(config)[1]

    def transferable(self, configs: Sequence[Config]) -> np.ndarray:
        """``TRANSFERABLE_FEATURES`` rows of ``configs`` (no knob columns)."""
        rows = np.array([self._entry(c)[0] for c in configs]).reshape(
            len(configs), len(PROGRAM_FEATURES)
        )
        default = self._entry(self.design.default)[0]
        return np.hstack([rows, rows - default, np.tile(self._target, (len(configs), 1))])

    def __call__(self, configs: Sequence[Config]) -> np.ndarray:
        return np.hstack([self.transferable(configs), self.design.space.encode_batch(configs)])


#: Extractors of the most recently used design spaces (by identity; each holds its space, so
#: an id cannot be reused while it is here), so repeated calls reuse the per-config cache.
_EXTRACTORS: OrderedDict[int, LoopNestFeatures] = OrderedDict()
_KEEP = 16


def transferable_features(design: DesignSpace, configs: Sequence[Config]) -> np.ndarray:
    """``TRANSFERABLE_FEATURES`` of ``configs``: shape (len(configs), len(TRANSFERABLE_FEATURES)),
    NaN program columns for a config that fails to schedule or lower. Rows are cached per config
    for the last few design spaces used, so repeated calls lower each config once."""
    extractor = _EXTRACTORS.pop(id(design), None)
    if extractor is None:
        extractor = LoopNestFeatures(design)
    _EXTRACTORS[id(design)] = extractor
    while len(_EXTRACTORS) > _KEEP:
        _EXTRACTORS.popitem(last=False)
    return extractor.transferable(configs)
