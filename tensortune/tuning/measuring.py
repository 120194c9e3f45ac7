"""Where a run's candidates are measured: here (`measuring_here`), or on the nodes of a Ray
fleet (`measuring_on_fleet`), each node measuring exactly as a run here does (`FleetWorker`).

Either way the run sees one call, ``measure(configs, on_result, threshold)``, and hears of each
candidate through ``on_result(index, trace, result)`` as soon as it is measured, so it commits
every measurement the moment it is known.
"""

from __future__ import annotations

import contextlib
import threading
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..errors import MeasurementWarning, TensorTuneError
from ..fleet import Fleet
from ..measure.builder import build_candidates
from ..measure.result import MeasureResult
from ..measure.runner import Runner, RunRequest
from ..space.registry import design_space
from ..space.template import DesignSpace
from ..target import Target
from ..workload import workload as parse_workload
from .candidates import as_tuple, measure_configs, prepare

OnResult = Callable[[int, list[Any], MeasureResult], None]

STALL_MARGIN = 120.0
"""Seconds a fleet node holding candidates may stay silent beyond three candidate timeouts
(builds, a measurement worker's start-up, waits for the node's timing lock) before it is
dropped as hung."""


class Measure(Protocol):
    """Measure ``configs``, each beside the reference, deciding against ``threshold``."""

    def __call__(
        self, configs: list[dict[str, Any]], on_result: OnResult, threshold: float = 1.0
    ) -> None: ...


@dataclass(eq=False)
class _OneAtATime(Runner):
    """A Runner that several threads may share: it times one candidate at a time (a fleet
    node's actor builds candidates on several threads while one is timed)."""

    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def run(
        self,
        candidates: Sequence[RunRequest],
        on_result: Callable[[int, MeasureResult], None] | None = None,
    ) -> list[MeasureResult]:
        with self._lock:
            return super().run(candidates, on_result)


@contextlib.contextmanager
def measuring_here(
    ds: DesignSpace, target: Target, timeout: float, seed: int | None, with_baseline: bool
) -> Iterator[Measure]:
    """Measure on this machine: test inputs from ``seed``, NumPy's outputs on them, a worker
    process, and (``with_baseline``) the template default's kernel to time candidates beside."""
    inputs = ds.workload.random_inputs(seed or 0)
    reference = ds.workload.reference(inputs)
    scale = max(1.0, float(max(abs(r).max() for r in as_tuple(reference))))
    with _OneAtATime(timeout=timeout, target=target, rtol=1e-4, atol=1e-4 * scale) as runner:
        baseline = _baseline(ds, target, runner, inputs, reference) if with_baseline else None

        def measure(
            configs: list[dict[str, Any]], on_result: OnResult, threshold: float = 1.0
        ) -> None:
            measure_configs(
                ds,
                configs,
                target,
                runner,
                inputs,
                reference,
                on_result,
                baseline=baseline,
                threshold=threshold,
            )

        yield measure


@contextlib.contextmanager
def measuring_on_fleet(
    address: str, ds: DesignSpace, target: Target, timeout: float, seed: int | None
) -> Iterator[tuple[Measure, Fleet]]:
    """Measure on the nodes of the Ray cluster at ``address`` whose target key is ``target``'s;
    each node builds its own inputs, reference kernel and candidates from plain data."""
    init = {"workload": ds.workload.name, "space": ds.name, "timeout": timeout, "seed": seed}
    stall = STALL_MARGIN + 3 * timeout
    with Fleet(address, FleetWorker, init, str(target), stall_seconds=stall) as fleet:

        def measure(
            configs: list[dict[str, Any]], on_result: OnResult, threshold: float = 1.0
        ) -> None:
            fleet.run(
                [{"config": config, "threshold": threshold} for config in configs],
                lambda i, reply: on_result(
                    i, reply["trace"], MeasureResult.from_dict(reply["result"])
                ),
            )

        yield measure, fleet


class FleetWorker:
    """A fleet node's worker: measures the configs it is sent exactly as a run on this machine
    does, on this node's target, and answers with plain data."""

    def __init__(self, workload: str, space: str, timeout: float, seed: int | None) -> None:
        target = Target.detect()
        ds = design_space(parse_workload(workload), target)
        if ds.name != space:
            raise TensorTuneError(
                f"this node's design space for {workload} is {ds.name!r}, the run's is "
                f"{space!r}: install the same tensortune (and space plugins) on every node"
            )
        self._stack = contextlib.ExitStack()
        self._measure = self._stack.enter_context(
            measuring_here(ds, target, timeout, seed, with_baseline=True)
        )

    def __call__(self, task: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}

        def keep(_: int, trace: list[Any], res: MeasureResult) -> None:
            out.update(trace=trace, result=res.to_dict())

        self._measure([task["config"]], keep, threshold=float(task["threshold"]))
        res = out["result"]
        return {
            **out,
            "built": res["build_seconds"] > 0,
            "measured": res["error_kind"] != "compile",
        }

    def close(self) -> None:
        """Stop the measurement worker process."""
        self._stack.close()


def _baseline(
    ds: DesignSpace, target: Target, runner: Runner, inputs: list[Any], reference: Any
) -> RunRequest | None:
    """The template default's kernel, which every candidate is timed beside (paired timing).

    It is run once on its own first: a default that does not build, crashes or computes
    wrong results cannot be a reference, and the run then times candidates alone, with a
    warning that says why. A timeout is tried once more first: a host that stalled the worker
    for seconds (a neighbour's burst) is no reason to give up paired timing for a whole run."""
    prepared = prepare(ds, ds.default, target)
    if isinstance(prepared, TensorTuneError):
        _unpaired(ds, f"its default config does not schedule: {prepared}")
        return None
    _, job, entry = prepared
    (library,) = build_candidates([job], target)
    if isinstance(library, Exception):
        _unpaired(ds, f"its default config does not build: {library}")
        return None
    request = entry.request(library, inputs, reference)
    (checked,) = runner.run([request])
    if checked.error_kind == "timeout":
        (checked,) = runner.run([request])
    if not checked.ok:
        _unpaired(ds, f"its default kernel failed ({checked.error_kind}: {checked.error_msg})")
        return None
    return request


def _unpaired(ds: DesignSpace, why: str) -> None:
    warnings.warn(
        f"{ds.workload.name}: candidates are timed alone, not beside the template default, "
        f"because {why}; their times then carry the host's drift",
        MeasurementWarning,
        stacklevel=4,
    )
