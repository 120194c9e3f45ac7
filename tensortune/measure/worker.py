"""Child process that runs candidate kernels for `Runner`: ``python -m tensortune.measure.worker``.

A candidate may segfault, hang or scribble over memory, so it never runs in the tuner's own
process. Protocol: one JSON object per line; the worker says ``{"ready": true}``, then answers
each job read from stdin with one reply line on its original stdout. The kernel's own prints
are redirected to stderr so they cannot corrupt the protocol. EOF on stdin ends the worker.
"""

from __future__ import annotations

import faulthandler
import json
import os
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ..build.kernel import ArgSpec, Kernel, pointer_array
from ..errors import TensorTuneError
from ..memory import aligned, empty, placed_copy
from . import host
from .paired import CANDIDATE, REFERENCE, Block, time_paired
from .timer import calibrate_number, time_function, time_groups

_REFERENCE_FLOORS: dict[tuple[str, str], float] = {}
"""Per baseline kernel, the fastest block it ran in this worker: one run's reference across jobs,
so a job whose every reference block stalled is seen as stalled (see measure.paired)."""


def run_job(job: dict[str, Any]) -> dict[str, Any]:
    """Load, check and time one candidate; returns ``{"spread", "number"}`` or an error.

    A kernel split at its constant inputs has its ``<name>_prepack`` run once per set of
    inputs, before and never inside the timed calls (see ``RunRequest.prepack``)."""
    started = time.monotonic()
    args = _specs(job["args"])
    kernel = _load(job, args)
    inputs = _load_inputs(job["inputs"])
    feeds = _feeds(kernel, job, inputs)
    outputs = tuple(_poisoned(spec) for spec in kernel.outputs)
    kernel(*feeds, out=outputs)
    checks = [] if job["reference"] is None else [(None, outputs, job["reference"])]
    for check in job.get("checks", ()):  # run once each, never timed
        special = tuple(_poisoned(spec) for spec in kernel.outputs)
        kernel(*_feeds(kernel, job, _load_inputs(check["inputs"])), out=special)
        checks.append((check["label"], special, check["reference"]))
    for label, got, paths in checks:
        references = [np.load(path) for path in paths]
        problem = _wrong(kernel, got, references, job["rtol"], job["atol"])
        if problem is not None:
            where = f" on {label}" if label else ""
            return {"error_kind": "wrong_result", "error_msg": f"{problem}{where}"}
    operands = [*feeds, *outputs]
    pointers = pointer_array(operands)
    timer = Path(job["timer"])
    number = job["number"] or calibrate_number(
        kernel.packed_address, pointers, job["min_repeat_seconds"], timer=timer
    )
    if job.get("baseline") is not None:
        budget = job["paired"]["max_seconds"] - (time.monotonic() - started)
        return _time_paired(job, (kernel, operands, number), inputs, args, timer, budget)
    spread = time_function(
        kernel.packed_address,
        pointers,
        number=number,
        repeat=job["repeat"],
        warmup=job["warmup"],
        flush_bytes=job["flush_bytes"],
        timer=timer,
    )
    return {"spread": spread, "number": number}


def _specs(args: list[dict[str, Any]]) -> list[ArgSpec]:
    return [ArgSpec(a["name"], tuple(a["shape"]), a["dtype"], a["role"]) for a in args]


def _load(entry: dict[str, Any], args: list[ArgSpec]) -> Kernel:
    """The entry's kernel, with its prepack function when it has one."""
    prepack = entry.get("prepack")
    prepack_args = None if prepack is None else _specs(prepack["args"])
    return Kernel(entry["library"], entry["name"], args, prepack_args=prepack_args)


def _feeds(kernel: Kernel, entry: dict[str, Any], inputs: list[np.ndarray]) -> list[np.ndarray]:
    """The kernel's inputs: the job's as they are, or, for a kernel split at its constants,
    taken by name with the packed buffers its prepack fills from them (run here, once, into
    poisoned buffers: a prepack that leaves part unwritten fails the check)."""
    if kernel.prepack is None:
        return inputs
    return kernel.feeds(dict(zip(entry["prepack"]["inputs"], inputs, strict=True)), _poisoned)


def _time_paired(
    job: dict[str, Any],
    candidate: tuple[Kernel, list[np.ndarray], int],
    inputs: list[np.ndarray],
    args: list[ArgSpec],
    timer: Path,
    budget: float,
) -> dict[str, Any]:
    """Time the candidate in alternation with the job's baseline kernel (see measure.paired),
    both on operands placed afresh each round; a baseline without a signature of its own takes
    the candidate's."""
    entry = job["baseline"]
    baseline = _load(entry, _specs(entry["args"]) if "args" in entry else args)
    base_outputs = [_poisoned(spec) for spec in baseline.outputs]
    base_operands = [*_feeds(baseline, entry, inputs), *base_outputs]
    base_number = job["number"] or calibrate_number(
        baseline.packed_address,
        pointer_array(base_operands),
        job["min_repeat_seconds"],
        timer=timer,
    )
    kernels = {CANDIDATE: candidate, REFERENCE: (baseline, base_operands, base_number)}
    placements = _Placements({which: operands for which, (_, operands, _) in kernels.items()})
    for which, (kernel, _, number) in kernels.items():
        pointers = placements.pointers(which)
        time_function(kernel.packed_address, pointers, number, 1, job["warmup"], timer=timer)

    def block(which: int) -> Block:
        kernel, _, number = kernels[which]
        pointers = placements.pointers(which)
        mean, groups = time_groups(
            kernel.packed_address, pointers, number, flush_bytes=job["flush_bytes"], timer=timer
        )
        return Block.of_groups(mean, groups)

    def watch() -> Callable[[], bool]:
        before = host.sample()
        return lambda: host.disturbance(before, host.sample()).disturbed()

    key = (entry["library"], entry["name"])
    paired = {**job["paired"], "max_seconds": budget}
    floor = _REFERENCE_FLOORS.get(key, float("inf"))
    timing = time_paired(
        block, watch=watch, reference_floor=floor, place=placements.renew, **paired
    )
    _REFERENCE_FLOORS[key] = timing.reference_floor
    return {
        "spread": list(timing.candidate_seconds),
        "number": candidate[2],
        "reference_spread": list(timing.reference_seconds),
        "ratio": timing.ratio,
        "ratio_low": timing.low,
        "ratio_high": timing.high,
        "disturbed": timing.disturbed,
        "filtered": timing.filtered,
    }


class _Placements:
    """The operands of the kernels timed in a job, copied to memory of their own each round.

    An operand both kernels read (the job's inputs) is copied once per round and shared, as it is
    in the job; the copies of the last `KEPT` rounds stay alive, so a new round's cannot land on
    the pages the previous round just freed."""

    KEPT = 3

    def __init__(self, operands: dict[int, list[np.ndarray]]) -> None:
        self._originals = operands
        self._rounds: list[dict[int, Any]] = []
        self._current = {which: pointer_array(arrays) for which, arrays in operands.items()}

    def pointers(self, which: int) -> Any:
        """The packed argument array of `which` at the current placement."""
        return self._current[which]

    def renew(self) -> None:
        copies: dict[int, np.ndarray] = {}
        for arrays in self._originals.values():
            for array in arrays:
                if id(array) not in copies:
                    copies[id(array)] = placed_copy(array)
        placed = {
            which: [copies[id(a)] for a in arrays] for which, arrays in self._originals.items()
        }
        self._rounds = [*self._rounds[1 - self.KEPT :], placed]
        self._current = {which: pointer_array(arrays) for which, arrays in placed.items()}


def _wrong(
    kernel: Kernel,
    outputs: tuple[np.ndarray, ...],
    references: list[np.ndarray],
    rtol: float,
    atol: float,
) -> str | None:
    """Why the kernel's `outputs` do not match `references`, or None."""
    if len(references) != len(outputs):
        raise TensorTuneError(f"{len(references)} reference array(s) for {len(outputs)} output(s)")
    for spec, output, reference in zip(kernel.outputs, outputs, references, strict=True):
        problem = compare(output, reference, rtol, atol)
        if problem is not None:
            return f"output {spec.name!r}: {problem}"
    return None


def compare(output: np.ndarray, reference: np.ndarray, rtol: float, atol: float) -> str | None:
    """None if `output` matches `reference` (allclose, or exactly for ints/bools), else why."""
    if output.shape != reference.shape:
        return f"reference has shape {reference.shape} but the output has {output.shape}"
    if not np.issubdtype(output.dtype, np.floating):
        bad = output != reference
        if not bad.any():
            return None
        first = np.unravel_index(int(np.argmax(bad)), bad.shape)
        return (
            f"{int(bad.sum())} of {bad.size} elements differ; first at {tuple(map(int, first))}: "
            f"got {output[first]}, expected {reference[first]}"
        )
    out = output.astype(np.float64)
    ref = reference.astype(np.float64)
    bad = ~np.isclose(out, ref, rtol=rtol, atol=atol, equal_nan=True)
    if not bad.any():
        return None
    with np.errstate(all="ignore"):
        abs_err = np.abs(out - ref)
        rel_err = abs_err / np.maximum(np.abs(ref), np.finfo(np.float64).tiny)
    first = np.unravel_index(int(np.argmax(bad)), bad.shape)
    nans = int(np.isnan(out[bad]).sum())
    return (
        f"{int(bad.sum())} of {bad.size} elements differ (rtol={rtol:g}, atol={atol:g}); "
        f"max abs error {_max_ignoring_nan(abs_err[bad]):.6g}, max rel error "
        f"{_max_ignoring_nan(rel_err[bad]):.6g}"
        + (f", {nans} NaN" if nans else "")
        + f"; first at {tuple(map(int, first))}: got {out[first]:.8g}, expected {ref[first]:.8g}"
    )


def _poisoned(spec: ArgSpec) -> np.ndarray:
    """Output buffer a kernel must overwrite: NaN (or a sentinel int) wherever it does not;
    aligned, as the inputs (see `_load_inputs`)."""
    dtype = np.dtype(spec.dtype)
    out = empty(spec.shape, dtype)
    if np.issubdtype(dtype, np.floating):
        out.fill(np.nan)
    elif np.issubdtype(dtype, np.integer):
        out.fill(-123456789)
    else:
        out.fill(0)
    return out


def _load_inputs(paths: list[str]) -> list[np.ndarray]:
    """The saved arrays, each starting on a cache line: a candidate is timed on the alignment
    kernels get from tensortune everywhere, not on where this process's allocator put a copy
    (see `tensortune.memory`)."""
    return [aligned(np.load(path)) for path in paths]


def _max_ignoring_nan(values: np.ndarray) -> float:
    values = values[~np.isnan(values)]
    return float(values.max()) if values.size else float("nan")


def main() -> None:
    """Serve jobs from stdin until EOF."""
    faulthandler.enable()  # a crashing kernel leaves a trace in the stderr log
    protocol = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1)
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    protocol.write(json.dumps({"ready": True}) + "\n")
    for line in sys.stdin:
        try:
            reply = run_job(json.loads(line))
        except TensorTuneError as exc:
            reply = {"error_kind": "runtime", "error_msg": str(exc)}
        except Exception:
            reply = {"error_kind": "runtime", "error_msg": traceback.format_exc(limit=5)}
        protocol.write(json.dumps(reply) + "\n")


if __name__ == "__main__":
    main()
