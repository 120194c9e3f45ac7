"""Measuring candidates: each config's schedule built, its C compiled (in parallel), then run
one at a time in the isolated worker, checked against NumPy and timed beside the reference.

A workload with constant inputs (a model's weights) is measured as a compiled model runs it:
each candidate is split at the constants, its ``<kernel>_prepack`` run once before timing, so
the search ranks kernels by the per-call work alone."""

from __future__ import annotations

import functools
import math
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..build.kernel import ArgSpec
from ..errors import TensorTuneError
from ..measure.builder import build_candidates
from ..measure.result import MeasureResult
from ..measure.runner import Check, Prepack, Runner, RunRequest
from ..pipeline import arg_specs, build_source, schedule_flags, split_source
from ..schedule import Schedule
from ..space.template import DesignSpace
from ..target import Target
from ..workload import Workload


def measure_configs(
    ds: DesignSpace,
    configs: list[dict[str, Any]],
    target: Target,
    runner: Runner,
    inputs: list[Any],
    reference: Any,
    on_result: Callable[[int, list[Any], MeasureResult], None],
    *,
    baseline: RunRequest | tuple[Path, str] | None = None,
    threshold: float = 1.0,
) -> None:
    """Build every config in parallel, then run the built ones one at a time in the isolated
    worker, each beside `baseline` when there is one; ``on_result(index, trace, result)``
    hears of each as soon as it is known."""
    prepared = []
    for index, config in enumerate(configs):
        outcome = prepare(ds, config, target)
        if isinstance(outcome, TensorTuneError):
            on_result(index, [], MeasureResult.failure("compile", str(outcome)))
        else:
            prepared.append((index, *outcome))
    t0 = time.perf_counter()
    built = build_candidates([p[2] for p in prepared], target, n_workers=os.cpu_count() or 1)
    build_seconds = (time.perf_counter() - t0) / max(1, len(prepared))
    runnable = []
    for (index, trace, _, entry), lib in zip(prepared, built, strict=True):
        if isinstance(lib, Exception):
            msg = getattr(lib, "log", "") or str(lib)
            on_result(
                index, trace, MeasureResult.failure("compile", msg, build_seconds=build_seconds)
            )
            continue
        request = entry.request(
            lib,
            inputs,
            reference,
            build_seconds=build_seconds,
            checks=(special_check(ds.workload),),
            baseline=baseline,
            threshold=threshold,
        )
        runnable.append((index, trace, request))
    runner.run(
        [r for _, _, r in runnable],
        lambda k, res: on_result(runnable[k][0], runnable[k][1], res),
    )


@dataclass(frozen=True)
class Entry:
    """What the worker calls in a candidate's library: the kernel's C name and signature, and
    the prepack run before timing it, when the workload's constants split it."""

    name: str
    args: tuple[ArgSpec, ...]
    prepack: Prepack | None = None

    def request(
        self, library: Path, inputs: Sequence[Any], reference: Any, **more: Any
    ) -> RunRequest:
        """The RunRequest of this kernel built into ``library``."""
        return RunRequest(
            library, self.name, self.args, tuple(inputs), reference, prepack=self.prepack, **more
        )


def prepare(
    ds: DesignSpace, config: dict[str, Any], target: Target
) -> tuple[list[Any], tuple[str, ...], Entry] | TensorTuneError:
    """A config's trace, build job (C source and flags) and entry, or why not."""
    try:
        sch = ds.schedule(config)
        source, entry = _source(sch, ds.workload, target)
    except TensorTuneError as exc:
        return exc
    return sch.trace, (source, *schedule_flags(sch)), entry


def _source(sch: Schedule, wl: Workload, target: Target) -> tuple[str, Entry]:
    """The candidate's C and entry: the kernel as ``compile`` builds it, split at the
    workload's constants when it has some."""
    if not wl.constants:
        source, func = build_source(sch, wl.op, target)
        return source, Entry(func.name, arg_specs(func))
    source, split = split_source(sch, wl.op, target, wl.constants)
    prepack = None
    if split.prepack is not None:
        prepack = Prepack(arg_specs(split.prepack), tuple(t.name for t in wl.inputs))
    return source, Entry(split.run.name, arg_specs(split.run), prepack)


@functools.lru_cache(maxsize=4)
def special_check(wl: Workload) -> Check:
    """Inputs with NaN and infinities and NumPy's outputs on them, which every candidate must
    reproduce (inputs in [-1, 1) alone let a kernel that drops NaN win); computed once per
    workload."""
    inputs = tuple(wl.special_inputs())
    return Check(inputs, as_tuple(wl.reference(inputs)), "inputs with NaN and +-inf")


def as_tuple(x: Any) -> tuple[Any, ...]:
    """One output as a 1-tuple; several outputs as they are."""
    return x if isinstance(x, tuple) else (x,)


def cost(res: MeasureResult) -> float:
    """What the strategy minimises: the ratio to the reference, which the host's drift does
    not move (the time itself when there was no reference), infinite for a failure."""
    if res.seconds is None:
        return math.inf
    return res.ratio if res.ratio is not None else res.seconds
