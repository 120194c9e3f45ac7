"""Shared benchmark plumbing: timing contenders fairly in one process, and printing the table.

Each contender is timed in a block of its own (thread pools spin after a call, so interleaving
call by call would slow the next one), with a pause between blocks, several times round in a
rotating order; each keeps its best block's median. Our kernels are timed by the C harness,
peers by perf_counter around their Python call (their per-call overhead is microseconds against
milliseconds of work).
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

PAUSE_SECONDS = 0.3


@dataclass
class Contender:
    name: str
    run: Callable[[], object]  # one call
    timer: Callable[[int], list[float]] | None = None  # seconds per call for n repeats


def python_timer(
    fn: Callable[[], object], min_seconds: float = 0.05
) -> Callable[[int], list[float]]:
    def timeit(repeat: int) -> list[float]:
        fn()
        t0 = time.perf_counter()
        fn()
        once = max(time.perf_counter() - t0, 1e-7)
        number = max(1, int(min_seconds / once))
        out = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            for _ in range(number):
                fn()
            out.append((time.perf_counter() - t0) / number)
        return out

    return timeit


def kernel_timer(
    kernel, arrays: list[np.ndarray], min_seconds: float = 0.05, fresh_placement: bool = False
):
    """Time a tensortune Kernel with the C harness (no Python in the measured interval).

    With `fresh_placement`, each call copies the arrays to newly allocated (aligned) memory
    first, kept until the timer goes: for an operand of megabytes, which physical pages it
    lands on, hence which cache sets its rows share, moves a memory-bound kernel's time by
    several percent from one allocation to the next, so a median over calls is one over
    placements, as the tuner's is over jobs that each load their inputs afresh."""
    from tensortune.build.kernel import pointer_array
    from tensortune.measure.timer import calibrate_number, time_function
    from tensortune.memory import placed_copy

    placements = [list(arrays)]

    def timeit(repeat: int) -> list[float]:
        if fresh_placement:
            placements.append([placed_copy(a) for a in arrays])
        ptrs = pointer_array(placements[-1])
        number = calibrate_number(kernel.packed_address, ptrs, min_seconds)
        return time_function(kernel.packed_address, ptrs, number=number, repeat=repeat)

    return timeit


def feeds(kernel, wl, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """The kernel's arguments for the workload's `inputs`: its constants (weights) packed once
    by the kernel's prepack when it has one, the inputs as they are otherwise."""
    return kernel.feeds({t.name: a for t, a in zip(wl.inputs, inputs, strict=True)})


def measure(contenders: list[Contender], repeat: int = 5, rounds: int = 6) -> dict[str, float]:
    """Median seconds per call of each contender, best of ``rounds`` blocks.

    The machine's speed drifts by a quarter within seconds (a shared host), so contenders take
    turns in short blocks, the order rotating each round, and each keeps its best block: every
    contender is then judged at the machine's best moments, not at whichever moment it drew.
    """
    best: dict[str, float] = {}
    for r in range(rounds):
        shift = r % len(contenders)
        for c in contenders[shift:] + contenders[:shift]:
            timer = c.timer or python_timer(c.run)
            med = statistics.median(timer(repeat))
            best[c.name] = min(best.get(c.name, float("inf")), med)
            time.sleep(PAUSE_SECONDS)
    return best


def rounds_of(
    contenders: list[Contender], rounds: int = 10, repeat: int = 5, first_round: int = 0
) -> dict[str, list[float]]:
    """Each contender's median seconds per call in each of `rounds` interleaved rounds.

    Contenders take turns in short blocks, the order rotating each round (counted from
    `first_round`, for a caller that takes one round at a time), so that a ratio taken within
    one round compares two kernels under the same host speed (see `paired_ratio`).
    """
    times: dict[str, list[float]] = {c.name: [] for c in contenders}
    for r in range(first_round, first_round + rounds):
        shift = r % len(contenders)
        for c in contenders[shift:] + contenders[:shift]:
            timer = c.timer or python_timer(c.run)
            times[c.name].append(statistics.median(timer(repeat)))
            time.sleep(PAUSE_SECONDS / 3)
    return times


def paired_ratio(times: dict[str, list[float]], a: str, b: str) -> float:
    """Median over rounds of a's time over b's, which the host's drift does not move."""
    return statistics.median(x / y for x, y in zip(times[a], times[b], strict=True))


def noise(times: dict[str, list[float]], a: str, b: str) -> float:
    """Half the interquartile range of the per-round ratios, relative to their median."""
    ratios = sorted(x / y for x, y in zip(times[a], times[b], strict=True))
    q1, _, q3 = statistics.quantiles(ratios, n=4)
    return (q3 - q1) / 2 / statistics.median(ratios)


def openblas_info() -> str:
    try:
        from threadpoolctl import threadpool_info

        for lib in threadpool_info():
            if lib.get("internal_api") == "openblas":
                arch, threads = lib.get("architecture"), lib.get("num_threads")
                return f"OpenBLAS {lib.get('version')} {arch} x{threads}"
    except ImportError:
        return "threadpoolctl not installed"
    return "no OpenBLAS found"


def limit_threads(n: int) -> None:
    """Give every peer the same number of threads as our kernels."""
    try:
        from threadpoolctl import threadpool_limits

        threadpool_limits(n)
    except ImportError:
        pass
    try:
        import torch

        torch.set_num_threads(n)
    except ImportError:
        pass
    os.environ.setdefault("OMP_NUM_THREADS", str(n))


def row(name: str, ours: float, peers: dict[str, float | None], flops: float) -> str:
    """One table line: GFLOP/s of ours and each peer, and our ratio to the fastest peer."""
    g = flops / ours / 1e9
    cells = [f"{name:44s}", f"{g:8.1f}"]
    best_peer = None
    for v in peers.values():
        if v is None:
            cells.append(f"{'-':>8s}")
            continue
        pg = flops / v / 1e9
        cells.append(f"{pg:8.1f}")
        best_peer = pg if best_peer is None else max(best_peer, pg)
    cells.append(f"{g / best_peer:7.0%}" if best_peer else "      -")
    return " ".join(cells)


def header(peer_names: list[str], extra: str = "") -> str:
    cols = [f"{'workload':44s}", f"{'ours':>8s}", *(f"{p:>8s}" for p in peer_names), "  ratio"]
    line = " ".join(cols) + extra
    return line + "\n" + "-" * len(line)


def check(name: str, got: np.ndarray, want: np.ndarray, rtol: float = 1e-4) -> None:
    scale = max(1.0, float(np.abs(want).max()))
    err = float(np.abs(got - want).max())
    if err > rtol * scale * 10:
        raise SystemExit(f"{name}: WRONG RESULT (max abs error {err:.3g}); not timing it")


def as_array(x) -> np.ndarray:
    """A peer's output (a torch tensor or anything array-like) as a NumPy array."""
    return x.numpy() if hasattr(x, "numpy") else np.asarray(x)
