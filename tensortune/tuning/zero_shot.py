"""Zero-shot configs: a schedule for a workload never measured on this target, chosen by the
pretrained cost model with no measurement at all.

The candidates are the template default, the best measured configs of the most similar
workloads in the database (same op class and design space, same loop structure first, and points
of this workload's space), the exemplars shipped with the model (the fastest configs measured of
the most similar training workloads, on every CPU kind of the dataset), the configs one step
from those, and a seeded sample of the whole space, in that order. The model scores their
transferable features (which mean the same for every shape, template and CPU) and the
top-scored one wins, if the model scores it further above the default than the gap at which its
cross-validated predictions were right ``CONFIDENT_ACCURACY`` of the time
(``cost_model.pretrained.confident_gap_of``): a close call keeps the default. The steps come
before the wide sample because the default and the similar bests are known to be good: a
uniform sample of a space is mostly far worse than its default, so a prior that ranks it
imperfectly risks a kernel many times slower, while a wrong step costs little.

Featurising means lowering each candidate (10-300 ms each here, more on a busy host), so the
sample is featurised in a fixed order until a time budget is spent: the whole choice stays under
about two seconds, and a faster machine ranks more of the sample. The choice can therefore
differ between runs, which is why it is recorded (``Prediction``) and reused rather than made
again; ``benchmarks/zero_shot.py`` prints what it takes.

A model is trusted per op class, by how well it ranked configs of workloads it never saw when it
was trained (its file's meta): the held-out families' workloads of the class
(``meta["held_out"]["per_op_class"]``) where any tested it, else the training workloads of the
class scored by cross-validation (``meta["cross_validated"]["per_op_class"]``: out-of-fold, whole
workloads held out). Below ``MIN_HELD_OUT_ACCURACY``, or with neither figure, the template
default is kept and the Prediction's ``source`` says which figure decided. Trusted overall, a prior
that ranked depthwise convolutions at 0.70 picked a kernel at 0.87 of the default's speed for a
MobileNet-V2 layer, and, replayed on the held-out workloads' measured configs, configs that had
timed out; keeping the default for such a class removed every held-out pick more than 5% slower
than the default in that replay.
"""

from __future__ import annotations

import functools
import math
import time
import warnings
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from ..cost_model import CostModel
from ..cost_model.features import PROGRAM_FEATURES, transferable_features
from ..cost_model.pretrained import (
    confident_gap_of,
    pretrained_exemplars,
    pretrained_meta,
    untrusted_class,
)
from ..database import Database
from ..database.prediction import Prediction
from ..errors import SpecError
from ..space import Config
from ..space.template import DesignSpace
from ..version import __version__
from ..workload import Workload
from ..workload import workload as parse_workload

#: The seeded sample of the design space the model may rank, after the default, the similar
#: workloads' bests and their neighbours: as much of it as the time budget allows, in order.
SAMPLES = 256
SEED = 0
#: Wall-clock seconds by which featurising ends: a further chunk is featurised only if, at the
#: mean time per candidate so far, it would finish within them (the default, the similar
#: workloads' bests and the first chunk after them always are). Lowering one candidate takes
#: 10-300 ms here; checking only that time was left before a chunk ended a depthwise layer's
#: choice at 1.81 s on an Intel VM, a chunk of four slow candidates past 1.2 s.
BUDGET_SECONDS = 1.4
CHUNK = 4
#: The most similar measured workloads (of the same op class) whose best configs are
#: candidates, in the database and among the model's exemplars...
SIMILAR_WORKLOADS = 3
#: ... and how many of each one's best configs.
SIMILAR_CONFIGS = 2


@functools.cache
def pretrained_model() -> CostModel | None:
    """The package's pretrained model, loaded once per process, if it passed its held-out check
    (``cost_model.pretrained.trusted_pretrained``); None otherwise, and compiles use the template
    default. A missing or unusable file says so in one warning."""
    from ..cost_model import pretrained

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = pretrained.trusted_pretrained()
    if caught:
        why = "; ".join(str(w.message).removesuffix("; learning from scratch") for w in caught)
        warnings.warn(
            f"{why}: compiling untuned workloads with the template default config (no zero-shot "
            "choice)",
            stacklevel=3,
        )
    return model


@functools.cache
def package_model_meta() -> dict[str, Any]:
    """The package model's file's meta (where its ranking checks are), read once."""
    return dict(pretrained_meta() or {})


@functools.cache
def package_exemplars() -> tuple[dict[str, Any], ...]:
    """The package model's exemplars (fast configs of its training workloads), read once."""
    return tuple(pretrained_exemplars())


def choose(
    ds: DesignSpace,
    model: CostModel,
    database: Database | None,
    target_key: str,
    meta: Mapping[str, Any] | None = None,
    exemplars: Sequence[Mapping[str, Any]] | None = None,
) -> Prediction:
    """The candidate ``model`` ranks first (see the module docstring), as an unrecorded
    Prediction; the default when no candidate can be featurised, or when the ranking checks in
    ``meta`` (the model file's meta; default: the package model's) do not trust it for the
    workload's op class (``untrusted_class``). ``exemplars`` are the model file's (default: the
    package model's)."""
    start = time.perf_counter()
    meta = package_model_meta() if meta is None else meta
    distrust = untrusted_class(ds.workload.op_class, meta)
    if distrust is not None:
        config, source, candidates = ds.default, f"default ({distrust})", 1
    else:
        shipped = shipped_configs(ds, package_exemplars() if exemplars is None else exemplars)
        gap = confident_gap_of(ds.workload.op_class, meta)
        config, source, candidates = _top_ranked(
            ds, model, database, target_key, shipped, gap, start
        )
    return Prediction(
        workload=ds.workload.name,
        target=target_key,
        config=config,
        source=source,
        model=f"pretrained {type(model).__name__}",
        candidates=candidates,
        choice_seconds=time.perf_counter() - start,
        space=ds.name,
    )


def _top_ranked(
    ds: DesignSpace,
    model: CostModel,
    database: Database | None,
    target_key: str,
    shipped: Sequence[tuple[Config, str]],
    gap: float,
    start: float,
) -> tuple[Config, str, int]:
    """The candidate ``model`` scores highest, if it scores at least ``gap`` above the default
    (else the default), where it came from, and how many were ranked (as many as the time
    budget, counted from ``start``, allowed)."""
    similar = similar_configs(ds, database, target_key) if database is not None else []
    known = _unique([(ds.default, "default"), *similar], ds)
    seeds = _unique([*known, *shipped], ds)
    # the exemplars (two per training workload and CPU kind: dozens) come next, as far as the
    # budget goes: featurising all 24 of a depthwise layer took 2.8 s
    always = len(known) + CHUNK
    pool = _unique([*seeds, *near(ds, seeds), *((c, "sample") for c in sample(ds))], ds)
    rows = []
    done = 0
    began = time.perf_counter()
    while done < len(pool):
        now = time.perf_counter()
        per_candidate = (now - began) / max(done, 1)
        if done >= always and now - start + per_candidate * CHUNK > BUDGET_SECONDS:
            break
        chunk = pool[done : done + CHUNK]
        rows.append(transferable_features(ds, [config for config, _ in chunk]))
        done += len(chunk)
    candidates, features = pool[:done], np.vstack(rows)
    scores = np.asarray(model.predict(features), dtype=np.float64)
    builds = ~np.isnan(features[:, : len(PROGRAM_FEATURES)]).all(axis=1)  # NaN: did not lower
    scores = np.where(builds & np.isfinite(scores), scores, -np.inf)
    best = int(np.argmax(scores)) if np.isfinite(scores).any() else 0
    config, source = candidates[best]
    if best and not scores[best] - scores[0] >= gap:  # candidates[0] is the default
        config, source = ds.default, f"default (no candidate scored {gap:.3g} above it)"
    return config, source, len(candidates)


def near(ds: DesignSpace, seeds: Sequence[tuple[Config, str]]) -> list[tuple[Config, str]]:
    """The configs one step from each seed, in a seeded random order (so the time budget
    cuts no knob's steps first): where a weak prior's mistakes cost least."""
    steps = [
        (config, f"near {source}") for seed, source in seeds for config in ds.space.neighbours(seed)
    ]
    order = np.random.default_rng(SEED).permutation(len(steps))
    return [steps[i] for i in order]


def sample(ds: DesignSpace) -> list[Config]:
    """The seeded sample of the space the model ranks."""
    return ds.space.sample(np.random.default_rng(SEED), SAMPLES)


def similar_configs(
    ds: DesignSpace, database: Database, target_key: str
) -> list[tuple[Config, str]]:
    """The best measured configs of the workloads of the same op nearest in shape (see
    ``shape_distance``), each a valid point of ``ds``, tagged with where they came from."""
    found = []
    for name in nearest(ds.workload, database.workloads(target_key)):
        best = database.top_k(name, target_key, SIMILAR_CONFIGS, version=__version__, space=ds.name)
        found += [(rec.config, f"similar {name}") for rec in best if ds.space.is_valid(rec.config)]
    return found


def transfer_seeds(ds: DesignSpace, database: Database, target_key: str) -> list[Config]:
    """What a zero-shot compile ranks beyond the default and the sample, for a search to start
    from: the database's best configs of the nearest workloads, then the model's exemplars."""
    found = [*similar_configs(ds, database, target_key), *shipped_configs(ds, package_exemplars())]
    return [config for config, _ in _unique(found, ds)]


def shipped_configs(
    ds: DesignSpace, exemplars: Sequence[Mapping[str, Any]]
) -> list[tuple[Config, str]]:
    """The exemplars of the training workloads of the same op nearest in shape that are valid
    points of ``ds``, tagged with the workload and CPU kind they were measured on. A model's
    training workloads use their op's default design space, so other spaces get none."""
    if ds.name:
        return []
    by_name: dict[str, list[Mapping[str, Any]]] = {}
    for e in exemplars:
        by_name.setdefault(e["workload"], []).append(e)
    return [
        (e["config"], f"exemplar {name} ({e['cpu_kind']})")
        for name in nearest(ds.workload, by_name)
        for e in by_name[name]
        if ds.space.is_valid(e["config"])
    ]


def nearest(wl: Workload, names: Iterable[str]) -> list[str]:
    """The ``SIMILAR_WORKLOADS`` workloads of ``wl``'s op class nearest it in shape, nearest
    first (a depthwise convolution's neighbours are depthwise convolutions); names this version
    cannot parse (a database and a model file are shared data) are skipped."""
    others = []
    for name in names:
        if name == wl.name or name.partition(":")[0] != wl.op:
            continue
        try:
            other = parse_workload(name)
        except SpecError:
            continue
        if other.op_class == wl.op_class:
            others.append((shape_distance(wl, other), name))
    return [name for _, name in sorted(others)[:SIMILAR_WORKLOADS]]


#: Parameters that set the shape of a workload's loop nest rather than its sizes: the window a
#: convolution or pool slides, its step, padding and dilation. Two workloads that differ in one
#: run different inner loops, so the other's fast config is no guide to this one's however close
#: their sizes (a stride-2 layer's exemplar, chosen for a stride-1 depthwise layer of similar
#: size, ran at 0.68 of the default's speed).
STRUCTURE = frozenset({"R", "S", "stride", "pad", "dilation"})
#: What a structure difference adds to ``shape_distance``: more than any difference of sizes.
STRUCTURE_DISTANCE = 1000.0


def shape_distance(a: Workload, b: Workload) -> float:
    """How far apart two workloads of one op are: summed |log ratio| of their integer
    parameters, plus 1 per other parameter (layout, epilogue) that differs, plus
    ``STRUCTURE_DISTANCE`` per ``STRUCTURE`` parameter that differs (so workloads of the same
    loop structure always come first)."""
    pa, pb = dict(a.params), dict(b.params)
    total = 0.0
    for key in pa.keys() | pb.keys():
        x, y = pa.get(key), pb.get(key)
        if key in STRUCTURE and x != y:
            total += STRUCTURE_DISTANCE
        elif isinstance(x, int) and isinstance(y, int) and x > 0 and y > 0:
            total += abs(math.log(x / y))
        elif x != y:
            total += 1.0
    return total


def _unique(candidates: Sequence[tuple[Any, str]], ds: DesignSpace) -> list[tuple[Config, str]]:
    """Candidates without repeats (the first source of a config is kept)."""
    seen: set[str] = set()
    out = []
    for config, source in candidates:
        key = ds.space.config_key(config)
        if key not in seen:
            seen.add(key)
            out.append((config, source))
    return out
