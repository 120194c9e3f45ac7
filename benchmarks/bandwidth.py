"""The machine's memory bandwidth, measured now: a STREAM triad compiled by tensortune.

    python benchmarks/bandwidth.py [--threads 2] [--mib 256]

``a[i] = b[i] + 3 * c[i]`` over three arrays far larger than the last-level cache, parallel and
vectorized; bytes counted the STREAM way (three arrays per pass, no write-allocate traffic).
The GEMV bar in the suite is a fraction of the bound this gives.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common

import tensortune as tt
from tensortune import te


def triad_gbs(target: tt.Target, mib: int = 256, repeat: int = 7) -> float:
    """Median GB/s of a STREAM triad on three ``mib``-MiB float32 arrays."""
    n = mib * 2**20 // 4
    b = te.placeholder((n,), name="b")
    c = te.placeholder((n,), name="c")
    a = te.compute((n,), lambda i: b[i] + 3.0 * c[i], name="a")
    s = tt.Schedule(a)
    outer, inner = s.split("a", "i", 16)
    s.vectorize("a", inner)
    s.parallel("a", outer)
    kernel = tt.compile(a, schedule=s, target=target)
    rng = np.random.default_rng(0)
    arrays = [rng.random(n, dtype=np.float32) for _ in range(2)]
    out = kernel(*arrays)
    common.check("triad", out, arrays[0] + 3.0 * arrays[1])
    seconds = statistics.median(common.kernel_timer(kernel, [*arrays, out], 0.2)(repeat))
    return 3 * 4 * n / seconds / 1e9


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--mib", type=int, default=256, help="size of each of the three arrays")
    args = ap.parse_args()
    target = tt.Target.detect(num_threads=args.threads)
    print(
        f"STREAM triad, 3 x {args.mib} MiB, {args.threads} threads: "
        f"{triad_gbs(target, args.mib):.1f} GB/s"
    )


if __name__ == "__main__":
    main()
