"""Run and time candidate kernels in an isolated, reusable worker process.

Candidates come from a search, so some segfault, hang or compute garbage. Each one runs in a
child (`tensortune.measure.worker`) with a timeout; whatever happens becomes a MeasureResult
and `Runner.run` never raises. The worker is reused while candidates behave (saving ~0.3 s of
interpreter start-up per trial) and replaced after any failure, since a wrong or crashing
kernel may have corrupted its memory.

Candidates are timed strictly one at a time: inside a `run` call by construction, and across
processes by an exclusive lock file at one well-known path per user (`measure_lock_path`, not in
the kernel cache, which each process may put elsewhere), so two tuners on one machine do not
disturb each other's timings. Builds run outside the lock.

A candidate's failure is a result; a failure of the machine (the timing harness cannot be built,
the worker cannot start, inputs cannot be written) raises EnvironmentFailure instead, since it
says nothing about the candidate.

Threading environment of the worker: ``OMP_NUM_THREADS`` is the target's thread count, BLAS
pools get one thread (NumPy only compares results), and every OMP_*/GOMP_*/KMP_* variable the
user set passes through unchanged: a kernel is timed under the OpenMP runtime settings it will
be called with, since the cost of waking the team for each parallel region is part of its cost.
Forcing ``OMP_WAIT_POLICY=passive`` (threads sleep at once) looked neutral on a Zen 4 VM but on a
Zen 3 VM, where waking a sleeping vCPU is slow, it timed a conv with three parallel regions
(pad, weight pack, conv) at 103-106 GFLOP/s against 138-153 under libgomp's default (spin
briefly, then sleep), misranked the candidates and steered the search to single-threaded
kernels for small ops. Deployments that pin a policy should export it before tuning.
"""

from __future__ import annotations

import contextlib
import os
import signal
import stat
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..build.kernel import ArgSpec
from ..errors import EnvironmentFailure
from ..target import Target
from .process import Worker, WorkerGone
from .result import MeasureResult
from .timer import min_repeat_from_env, timer_library

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None  # type: ignore[assignment]

_Saved = dict[int, tuple[Any, str]]


@dataclass(frozen=True, eq=False)
class Check:
    """Inputs on which a candidate must also give `reference` (its outputs), checked once and
    never timed: e.g. inputs holding NaN and infinities, named by `label` in the error."""

    inputs: tuple[np.ndarray, ...]
    reference: tuple[np.ndarray, ...]
    label: str


@dataclass(frozen=True)
class Prepack:
    """How to feed a kernel split at its constant inputs (``lower.prepack``): ``args`` is the
    signature of ``<name>_prepack``, which the worker runs once per set of inputs, untimed, as
    a model runs it once at load; ``inputs`` names the request's inputs, which the prepack and
    the kernel (its other inputs, then the packed ones) take by name."""

    args: tuple[ArgSpec, ...]
    inputs: tuple[str, ...]


@dataclass(frozen=True, eq=False)
class RunRequest:
    """One candidate to run: its library, entry point, signature, inputs and expected output.

    `reference` is the expected output (a tuple for several outputs), or None to skip the
    correctness check; `checks` are more inputs the candidate must get right before it is timed.
    `baseline` (library, entry point) is a kernel of the same signature to time in alternation
    with this one (see `measure.paired`), or the request that checked it (its own signature and
    prepack); the result then carries its ratio to the baseline, decided against `threshold`
    (the incumbent's ratio). With `prepack`, the kernel is timed alone, its prepack run before.
    """

    library: Path
    name: str
    args: tuple[ArgSpec, ...]
    inputs: tuple[np.ndarray, ...]
    reference: np.ndarray | tuple[np.ndarray, ...] | None = None
    build_seconds: float = 0.0
    checks: tuple[Check, ...] = ()
    baseline: tuple[Path, str] | RunRequest | None = None
    threshold: float = 1.0
    prepack: Prepack | None = None


@dataclass(eq=False)
class Runner:
    """Runs candidates one at a time in a worker process; see the module docstring.

    `timeout` bounds everything one candidate does in the worker (load, check, calibrate,
    time). `number=None` calibrates calls per repeat so a repeat lasts `min_repeat_seconds`.
    """

    timeout: float = 10.0
    number: int | None = None
    repeat: int = 5
    warmup: int = 1
    flush_bytes: int = 0
    rtol: float = 1e-4
    atol: float = 1e-4
    min_repeat_seconds: float = field(default_factory=min_repeat_from_env)
    paired_rounds: tuple[int, int] = (5, 15)
    target: Target | None = None
    startup_timeout: float = 60.0
    max_tasks_per_worker: int = 200
    max_worker_bytes: int = 2 << 30
    _worker: Worker | None = field(default=None, init=False, repr=False)

    def run(
        self,
        candidates: Sequence[RunRequest],
        on_result: Callable[[int, MeasureResult], None] | None = None,
    ) -> list[MeasureResult]:
        """Measure each candidate in order; its failures are results, never exceptions (only
        EnvironmentFailure is raised, see the module docstring).

        ``on_result(index, result)`` is called as soon as each candidate is measured (the tuner
        commits it there, so a kill loses nothing already measured)."""
        if not candidates:
            return []
        try:
            target = self.target if self.target is not None else Target.detect()
            timer = timer_library(target)
            scratch = tempfile.TemporaryDirectory(prefix="tensortune-run-")
        except EnvironmentFailure:
            raise
        except Exception as exc:
            raise EnvironmentFailure(f"cannot set up timing: {exc}") from exc
        with scratch as tmp:
            saved: _Saved = {}
            results = []
            for index, candidate in enumerate(candidates):
                results.append(self._run_one(candidate, target, timer, Path(tmp), saved))
                if on_result is not None:
                    on_result(index, results[-1])
            return results

    def close(self) -> None:
        """Stop the worker process (also done at garbage collection and exit)."""
        if self._worker is not None:
            self._worker.kill()
            self._worker = None

    def __enter__(self) -> Runner:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _run_one(
        self, request: RunRequest, target: Target, timer: Path, tmp: Path, saved: _Saved
    ) -> MeasureResult:
        try:
            job = self._job(request, timer, tmp, saved)
            with _measure_lock():
                reply = self._execute(job, target, request.name)
        except EnvironmentFailure:
            self.close()
            raise
        except Exception as exc:
            self.close()
            reply = {"error_kind": "runtime", "error_msg": f"{type(exc).__name__}: {exc}"}
        elapsed = reply.get("run_seconds", 0.0)
        if "error_kind" in reply:
            self.close()  # a failed candidate may have corrupted the worker
            return MeasureResult.failure(
                reply["error_kind"],
                reply["error_msg"],
                build_seconds=request.build_seconds,
                run_seconds=elapsed,
            )
        paired = {}
        if "ratio" in reply:
            paired = {
                "reference_seconds": statistics.median(reply["reference_spread"]),
                **{
                    k: reply[k]
                    for k in ("ratio", "ratio_low", "ratio_high", "disturbed", "filtered")
                },
            }
        return MeasureResult.from_spread(
            reply["spread"],
            number=reply["number"],
            build_seconds=request.build_seconds,
            run_seconds=elapsed,
            **paired,
        )

    def _execute(self, job: dict[str, Any], target: Target, name: str) -> dict[str, Any]:
        for _ in range(2):  # a worker that died while idle gets replaced once
            try:
                worker = self._ready_worker(target)
            except (TimeoutError, WorkerGone, OSError, ValueError) as exc:
                self.close()
                raise EnvironmentFailure(f"cannot start the measurement worker: {exc!r}") from exc
            position = worker.stderr_position()
            started = time.perf_counter()
            try:
                worker.send(job)
            except OSError:  # BrokenPipeError: it was gone before this candidate
                self.close()
                continue
            try:
                reply = worker.receive(self.timeout)
            except TimeoutError:
                self.close()
                reply = {
                    "error_kind": "timeout",
                    "error_msg": f"kernel {name!r} did not finish within {self.timeout:g} s; "
                    "worker killed",
                }
            except WorkerGone:
                reply = _death_report(worker, position, name)
            return {**reply, "run_seconds": time.perf_counter() - started}
        raise EnvironmentFailure("the measurement worker keeps dying before it gets a candidate")

    def _ready_worker(self, target: Target) -> Worker:
        """The worker for the next candidate: a fresh one after `max_tasks_per_worker` tasks or
        once it holds `max_worker_bytes` of memory (every candidate's library stays loaded, and
        keeps its scratch blocks for its next call: see `tensortune.codegen.scratch`)."""
        worker = self._worker
        if worker is not None and (
            worker.tasks >= self.max_tasks_per_worker
            or resident_bytes(worker.proc.pid) > self.max_worker_bytes
        ):
            self.close()
        if self._worker is None:
            self._worker = Worker(_worker_env(target), self.startup_timeout)
        self._worker.tasks += 1
        return self._worker

    def _job(self, request: RunRequest, timer: Path, tmp: Path, saved: _Saved) -> dict[str, Any]:
        reference = request.reference
        if isinstance(reference, np.ndarray):
            reference = (reference,)
        return {
            **_entry(request),
            "inputs": [_save(array, tmp, saved) for array in request.inputs],
            "reference": None
            if reference is None
            else [_save(array, tmp, saved) for array in reference],
            "checks": [
                {
                    "inputs": [_save(array, tmp, saved) for array in check.inputs],
                    "reference": [_save(array, tmp, saved) for array in check.reference],
                    "label": check.label,
                }
                for check in request.checks
            ],
            "timer": str(timer),
            "number": self.number,
            "repeat": self.repeat,
            "warmup": self.warmup,
            "flush_bytes": self.flush_bytes,
            "rtol": self.rtol,
            "atol": self.atol,
            "min_repeat_seconds": self.min_repeat_seconds,
            "baseline": _baseline_entry(request.baseline),
            "paired": {
                "min_rounds": self.paired_rounds[0],
                "max_rounds": self.paired_rounds[1],
                "threshold": request.threshold,
                # time left over is the margin that keeps a slow host from timing it out
                "max_seconds": self.timeout / 3,
            },
        }


def _entry(request: RunRequest) -> dict[str, Any]:
    """The kernel the worker loads: library, C function, signature and prepack, if any."""
    entry: dict[str, Any] = {
        "library": str(request.library),
        "name": request.name,
        "args": _args(request.args),
    }
    if request.prepack is not None:
        entry["prepack"] = {
            "args": _args(request.prepack.args),
            "inputs": list(request.prepack.inputs),
        }
    return entry


def _baseline_entry(baseline: tuple[Path, str] | RunRequest | None) -> dict[str, Any] | None:
    """The baseline's entry: a (library, name) pair takes the candidate's signature."""
    if isinstance(baseline, RunRequest):
        return _entry(baseline)
    return None if baseline is None else {"library": str(baseline[0]), "name": baseline[1]}


def _args(args: Sequence[ArgSpec]) -> list[dict[str, Any]]:
    return [
        {"name": a.name, "shape": list(a.shape), "dtype": a.dtype, "role": a.role} for a in args
    ]


def _death_report(worker: Worker, position: int, name: str) -> dict[str, Any]:
    """Error reply for a worker that vanished mid-candidate: "crash" if a signal killed it."""
    code = worker.exit_code()
    log = worker.stderr_since(position)
    if code < 0:
        try:
            signal_name = signal.Signals(-code).name
        except ValueError:
            signal_name = f"signal {-code}"
        message = f"kernel {name!r} crashed the worker with {signal_name}"
        return {"error_kind": "crash", "error_msg": f"{message}\n{log}".strip()}
    message = f"worker exited with status {code} while running kernel {name!r}"
    return {"error_kind": "runtime", "error_msg": f"{message}\n{log}".strip()}


def _save(array: np.ndarray, tmp: Path, saved: _Saved) -> str:
    """Write `array` as .npy once per run() call (candidates usually share their inputs).

    `saved` maps id(array) to (array, path); holding the array keeps its id unique.
    """
    key = id(array)
    if key not in saved:
        path = tmp / f"{len(saved)}.npy"
        try:
            np.save(path, np.ascontiguousarray(array), allow_pickle=False)
        except OSError as exc:
            raise EnvironmentFailure(f"cannot write candidate inputs to {tmp}: {exc}") from exc
        saved[key] = (array, str(path))
    return saved[key][1]


def resident_bytes(pid: int) -> int:
    """Resident memory of process `pid` (0 where /proc cannot say)."""
    try:
        resident_pages = int(Path(f"/proc/{pid}/statm").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return 0
    return resident_pages * os.sysconf("SC_PAGE_SIZE")


def _worker_env(target: Target) -> dict[str, str]:
    env = dict(os.environ)
    env["OMP_NUM_THREADS"] = str(target.num_threads)
    for blas in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[blas] = "1"
    return env


def measure_lock_path() -> Path:
    """The timing lock every tensortune process of this user on this machine takes."""
    return Path("/tmp") / f"tensortune-{os.getuid()}" / "measure.lock"


@contextlib.contextmanager
def _measure_lock() -> Iterator[None]:
    """Hold the machine-wide measurement lock (no-op where flock is unavailable)."""
    if fcntl is None:
        yield
        return
    path = measure_lock_path()
    try:
        path.parent.mkdir(mode=0o700, exist_ok=True)
        info = path.parent.lstat()
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
            raise EnvironmentFailure(
                f"{path.parent} is not a private directory of this user; remove it and retry"
            )
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    except OSError as exc:
        raise EnvironmentFailure(f"cannot open the timing lock {path}: {exc}") from exc
    with os.fdopen(fd) as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield  # closing the file releases the lock
