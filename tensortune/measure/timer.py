"""Time a packed kernel from C, so no Python overhead lands inside the measured interval.

The harness is compiled once per target through the library cache; its one function times a
block of calls in groups. `time_function` takes repeats as blocks of one group, `time_groups`
one block of many; `calibrate_number` picks how many calls make one repeat long enough (TVM's
``min_repeat_ms``) for the clock's resolution and noise to stop mattering.
"""

from __future__ import annotations

import ctypes
import functools
import os
from collections.abc import Sequence
from pathlib import Path

from ..backend import backend_for
from ..errors import EnvironmentFailure, TensorTuneError
from ..target import Target

TIMER_SOURCE = r"""
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int (*tt_packed_fn)(void**);

static double tt_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* One block of `number` calls in `groups` consecutive groups, after writing `flush_bytes` bytes
   untimed to evict caches: out_seconds[g] is group g's mean per call, out_seconds[groups] the
   whole block's. Returns 0, the first non-zero status of fn, or -1 if the flush buffer cannot
   be had. */
int tt_time_groups(tt_packed_fn fn, void** args, int number, int groups, int flush_bytes,
                   double* out_seconds) {
    if (flush_bytes > 0) {
        char* flush = (char*)malloc((size_t)flush_bytes);
        if (flush == NULL) return -1;
        memset(flush, 1, (size_t)flush_bytes);
        __asm__ __volatile__("" : : "r"(flush) : "memory");
        free(flush);
    }
    int done = 0;
    double block_start = tt_now();
    for (int g = 0; g < groups; ++g) {
        int calls = (number - done) / (groups - g);
        double start = tt_now();
        for (int i = 0; i < calls; ++i) {
            int status = fn(args);
            if (status != 0) return status;
        }
        out_seconds[g] = (tt_now() - start) / (double)calls;
        done += calls;
    }
    out_seconds[groups] = (tt_now() - block_start) / (double)number;
    return 0;
}
"""


MIN_REPEAT_ENV_VAR = "TENSORTUNE_MIN_REPEAT_MS"
DEFAULT_MIN_REPEAT_MS = 50.0


def min_repeat_from_env() -> float:
    """How long one timed repeat lasts at least: ``$TENSORTUNE_MIN_REPEAT_MS`` or 50 ms.

    Shorter repeats make every measurement cheaper and noisier (the test suite runs at 2 ms:
    it checks what the tuner does, not how fast a kernel is)."""
    text = os.environ.get(MIN_REPEAT_ENV_VAR, "").strip()
    if not text:
        return DEFAULT_MIN_REPEAT_MS / 1000
    try:
        ms = float(text)
    except ValueError:
        ms = float("nan")
    if not 0 < ms <= 60_000:
        raise EnvironmentFailure(
            f"{MIN_REPEAT_ENV_VAR} must be milliseconds between 0 and 60000 such as "
            f"{DEFAULT_MIN_REPEAT_MS:g}, got {text[:40]!r}"
        )
    return ms / 1000


def timer_library(target: Target) -> Path:
    """Path of the compiled timing harness for `target` (a cache hit after the first use); a
    clear error for a target this host cannot time (another architecture)."""
    return backend_for(target).timer_library(TIMER_SOURCE)


@functools.cache
def _load_timer(path: Path) -> ctypes.CDLL:
    library = ctypes.CDLL(str(path))
    # (fn, void** args, the ints, double* out_seconds), as declared in TIMER_SOURCE
    fn, i = ctypes.c_void_p, ctypes.c_int
    args, out = ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_double)
    library.tt_time_groups.argtypes = [fn, args, i, i, i, out]
    library.tt_time_groups.restype = ctypes.c_int
    return library


def _harness(timer: Path | None) -> ctypes.CDLL:
    return _load_timer(timer if timer is not None else timer_library(Target.detect()))


def _pointers(args: ctypes.Array[ctypes.c_void_p] | Sequence[int]) -> ctypes.Array[ctypes.c_void_p]:
    return args if isinstance(args, ctypes.Array) else (ctypes.c_void_p * len(args))(*args)


def _checked(status: int) -> None:
    if status != 0:
        raise TensorTuneError(f"kernel returned error status {status} while being timed")


def time_function(
    packed_address: int,
    args: ctypes.Array[ctypes.c_void_p] | Sequence[int],
    number: int = 1,
    repeat: int = 5,
    warmup: int = 1,
    flush_bytes: int = 0,
    *,
    timer: Path | None = None,
) -> list[float]:
    """Mean seconds per call of each of `repeat` repeats of `number` calls.

    `args` is the ``void**`` array (see `build.kernel.pointer_array`) or raw addresses;
    `timer` is a harness library from `timer_library` (default: the detected host target).
    `flush_bytes` > 0 writes that many bytes before each repeat, untimed, to evict caches.
    """
    if number < 1 or repeat < 1 or warmup < 0 or flush_bytes < 0:
        raise TensorTuneError(
            f"bad timing parameters: number={number} repeat={repeat} warmup={warmup} "
            f"flush_bytes={flush_bytes}"
        )
    harness, pointers = _harness(timer), _pointers(args)
    seconds = (ctypes.c_double * 2)()
    if warmup:
        _checked(harness.tt_time_groups(packed_address, pointers, warmup, 1, 0, seconds))
    repeats = []
    for _ in range(repeat):
        _checked(harness.tt_time_groups(packed_address, pointers, number, 1, flush_bytes, seconds))
        repeats.append(seconds[0])
    return repeats


def time_groups(
    packed_address: int,
    args: ctypes.Array[ctypes.c_void_p] | Sequence[int],
    number: int,
    groups: int = 256,
    flush_bytes: int = 0,
    *,
    timer: Path | None = None,
) -> tuple[float, list[float]]:
    """One block of `number` calls: its mean seconds per call, and the mean per call of each of
    up to `groups` consecutive groups of calls.

    The groups show what the block's mean hides: beside a CPU-bound neighbour most calls of a
    parallel kernel run as fast as on a quiet host and a few stall for a scheduler slice while
    one of its threads waits for a CPU (a 1.2 ms matmul: fastest tenth of calls 1.21 ms, mean
    6.2 ms). The groups' low quantile is the kernel's own speed; see `measure.paired`. Groups
    are short (a single call for kernels over 0.2 ms in a 0.05 s block) so that a stall of a
    few milliseconds spoils few of them.
    """
    if number < 1 or groups < 1 or flush_bytes < 0:
        raise TensorTuneError(
            f"bad timing parameters: number={number} groups={groups} flush_bytes={flush_bytes}"
        )
    groups = min(groups, number)
    seconds = (ctypes.c_double * (groups + 1))()
    _checked(
        _harness(timer).tt_time_groups(
            packed_address, _pointers(args), number, groups, flush_bytes, seconds
        )
    )
    return seconds[groups], list(seconds[:groups])


def calibrate_number(
    packed_address: int,
    args: ctypes.Array[ctypes.c_void_p] | Sequence[int],
    min_repeat_seconds: float = 0.05,
    max_number: int = 1 << 24,
    *,
    timer: Path | None = None,
) -> int:
    """Smallest-ish `number` of calls for which one repeat lasts `min_repeat_seconds`.

    Grows `number` geometrically from 1 (at least x1.6 per step, like TVM) until a repeat
    is long enough, so slow kernels are run once and fast ones thousands of times.
    """
    number = 1
    while True:
        (per_call,) = time_function(
            packed_address, args, number=number, repeat=1, warmup=0, timer=timer
        )
        if per_call * number >= min_repeat_seconds or number >= max_number:
            return number
        wanted = min_repeat_seconds / max(per_call, 1e-9) * 1.1
        number = min(max_number, max(int(wanted) + 1, int(number * 1.6) + 1))
