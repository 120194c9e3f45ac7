"""This machine's roofline: peak FLOP/s and memory bandwidth, measured once by two small C
probes and cached as JSON in the kernel cache directory, keyed by the target.

The report places each winner against ``min(peak, intensity x bandwidth)``, where intensity is
the workload's FLOPs over the bytes its inputs and outputs must move at least once. The figures
are what this machine reaches (independent FMA chains on a dozen vector registers, on one thread
by its CPU clock, times the target's threads; a parallel STREAM triad far larger than the
last-level cache, best of several runs), not the datasheet's: ``Target.peak_gflops`` is kept
beside them as the theoretical bound (it assumes the base clock, so turbo may exceed it).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import math
import os
import re
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

CACHE_FILE = "roofline.json"
_ACCUMULATORS = 12  # independent FMA chains: latency (4-5 cycles) x 2 pipes, with room to spare

_PROBE_SOURCE = """\
#include <omp.h>
typedef float tt_vf __attribute__((vector_size(%(vbytes)d)));

float tt_probe_fma(long iters, float x, float y, int threads) {
  float total = 0.0f;
  #pragma omp parallel num_threads(threads) reduction(+:total)
  {
    tt_vf vx = {0}, vy = {0};
    vx += x; vy += y;
    %(declare)s
    for (long i = 0; i < iters; i++) {
      %(step)s
    }
    tt_vf s = %(sum)s;
    for (int l = 0; l < %(lanes)d; l++) total += s[l];
  }
  return total;
}

void tt_probe_triad(float *restrict a, const float *restrict b, const float *restrict c,
                    long n, int threads) {
  #pragma omp parallel for num_threads(threads) schedule(static)
  for (long i = 0; i < n; i++) a[i] = b[i] + 3.0f * c[i];
}
"""


@dataclass(frozen=True)
class Roofline:
    """What one target reaches on this machine: GFLOP/s (float32 FMAs) and GB/s (triad)."""

    target: str
    peak_gflops: float
    bandwidth_gbs: float
    theoretical_gflops: float
    measured_at: float

    def attainable(self, intensity: float) -> float:
        """GFLOP/s the roofline allows at ``intensity`` FLOPs per byte."""
        return min(self.peak_gflops, intensity * self.bandwidth_gbs)

    def bound(self, intensity: float) -> str:
        """Which roof caps a kernel of this intensity: "compute" or "memory"."""
        return "memory" if intensity * self.bandwidth_gbs < self.peak_gflops else "compute"


def target_of(key: str) -> Any:
    """The Target a record's target string (``avx2-2t``) names on this machine, or None when
    this CPU cannot run that ISA (a database copied from another machine)."""
    from ..errors import TensorTuneError
    from ..target import Target, supported_isas

    match = re.fullmatch(r"([a-z0-9_]+)-([0-9]{1,4})t", key)
    if match is None or match[1] not in supported_isas():
        return None
    try:
        return Target.detect(num_threads=int(match[2]), isa=match[1])
    except TensorTuneError:
        return None


def machine_roofline(target: Any, refresh: bool = False) -> Roofline:
    """The cached roofline of ``target``, measured (about a second) on first use."""
    path = _cache_path()
    cached = _load(path)
    entry = cached.get(target.key())
    if entry is not None and not refresh:
        return entry
    roof = measure(target)
    cached[target.key()] = roof
    _store(path, cached)
    return roof


def measure(target: Any) -> Roofline:
    """Run both probes now, about a second (best of several runs each: a shared host is never
    faster than it is, only slower)."""
    from ..build.compiler import compile_library

    vbytes = target.vector_bits // 8
    names = [f"a{i}" for i in range(_ACCUMULATORS)]
    source = _PROBE_SOURCE % {
        "vbytes": vbytes,
        "lanes": vbytes // 4,
        # distinct starting values: equal chains would be merged into one by the compiler
        "declare": " ".join(f"tt_vf {n} = vy * {i + 1}.0f;" for i, n in enumerate(names)),
        "step": " ".join(f"{n} = {n} * vx + vy;" for n in names),
        "sum": " + ".join(names),
    }
    library = ctypes.CDLL(str(compile_library(source, target)))
    fma = library.tt_probe_fma
    fma.restype = ctypes.c_float
    fma.argtypes = [ctypes.c_long, ctypes.c_float, ctypes.c_float, ctypes.c_int]
    threads = target.num_threads

    def fma_seconds(iters: int) -> float:
        # One thread, timed by its own CPU clock: on a shared host a parallel probe would time
        # the other tenants (a descheduled thread holds up the whole region), not the FMA units.
        start = time.thread_time()
        fma(iters, 0.999, 0.001, 1)
        return max(time.thread_time() - start, 1e-9)

    iters, seconds = 1 << 16, 0.0
    while seconds < 0.01 and iters < 1 << 34:  # long enough that the clock's tick is noise
        iters *= 4
        seconds = fma_seconds(iters)
    iters = max(iters, int(iters * 0.05 / seconds))  # then about 50 ms per run
    best = min(fma_seconds(iters) for _ in range(5))
    peak = 2.0 * (vbytes // 4) * _ACCUMULATORS * iters / best / 1e9 * threads

    triad = library.tt_probe_triad
    triad.restype = None
    floats = ctypes.POINTER(ctypes.c_float)
    triad.argtypes = [floats, floats, floats, ctypes.c_long, ctypes.c_int]
    n = min(max(4 * target.l3_bytes, 32 << 20), 128 << 20) // 4
    a, b, c = (np.ones(n, dtype=np.float32) for _ in range(3))
    pointers = [x.ctypes.data_as(floats) for x in (a, b, c)]
    times = []
    for _ in range(8):
        start = time.perf_counter()
        triad(*pointers, n, threads)
        times.append(time.perf_counter() - start)
    bandwidth = 3 * 4 * n / min(times[1:]) / 1e9  # the first touches the pages
    return Roofline(str(target), peak, bandwidth, target.peak_gflops(), time.time())


def _cache_path() -> Path:
    from ..build.compiler import cache_dir

    return cache_dir() / CACHE_FILE


def _load(path: Path) -> dict[str, Roofline]:
    """The cache file's valid entries; a missing or damaged file is an empty cache."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    entries = {}
    for key, value in data.items() if isinstance(data, dict) else ():
        with contextlib.suppress(TypeError, ValueError):
            roof = Roofline(**value)
            numbers = (roof.peak_gflops, roof.bandwidth_gbs, roof.theoretical_gflops)
            if all(isinstance(x, float) and math.isfinite(x) and x > 0 for x in numbers):
                entries[key] = roof
    return entries


def _store(path: Path, entries: dict[str, Roofline]) -> None:
    """Write atomically; a cache that cannot be written only means measuring again next time."""
    data = json.dumps({key: asdict(roof) for key, roof in entries.items()}, indent=1)
    with contextlib.suppress(OSError):
        fd, tmp = tempfile.mkstemp(prefix=".roofline.", dir=path.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(data)
        os.replace(tmp, path)


def min_bytes(workload: Any) -> int:
    """Bytes a workload must move at least: each input read once, each output written once."""
    from ..dtype import dtype

    tensors = (*workload.inputs, *workload.outputs)
    return sum(math.prod(t.shape) * dtype(t.dtype).size for t in tensors)
