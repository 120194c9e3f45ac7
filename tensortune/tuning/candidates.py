"""Measuring candidates: each config's schedule built, its C compiled (in parallel), then run
one at a time in the isolated worker, checked against NumPy and timed beside the reference."""

from __future__ import annotations

import functools
import math
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import TensorTuneError
from ..ir.nodes import PrimFunc
from ..measure.builder import build_candidates
from ..measure.result import MeasureResult
from ..measure.runner import Check, Runner, RunRequest
from ..pipeline import arg_specs, build_source, schedule_flags
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
    baseline: tuple[Path, str] | None = None,
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
    for (index, trace, _, func), lib in zip(prepared, built, strict=True):
        if isinstance(lib, Exception):
            msg = getattr(lib, "log", "") or str(lib)
            on_result(
                index, trace, MeasureResult.failure("compile", msg, build_seconds=build_seconds)
            )
            continue
        request = RunRequest(
            lib,
            func.name,
            arg_specs(func),
            tuple(inputs),
            reference,
            build_seconds,
            (special_check(ds.workload),),
            baseline=baseline,
            threshold=threshold,
        )
        runnable.append((index, trace, request))
    runner.run(
        [r for _, _, r in runnable],
        lambda k, res: on_result(runnable[k][0], runnable[k][1], res),
    )


def prepare(
    ds: DesignSpace, config: dict[str, Any], target: Target
) -> tuple[list[Any], tuple[str, ...], PrimFunc] | TensorTuneError:
    """A config's trace, build job (C source and flags) and lowered function, or why not."""
    try:
        sch = ds.schedule(config)
        source, func = build_source(sch, ds.workload.op, target)
    except TensorTuneError as exc:
        return exc
    return sch.trace, (source, *schedule_flags(sch)), func


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
