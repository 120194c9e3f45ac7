"""How much does where an operand sits in memory move a kernel's time? One kernel, one process,
the same values, the operand placed at several offsets from a page.

    python benchmarks/placement.py [--spec matmul:M=17,N=4096,K=1024] [--operand 1] [--rounds 10]

The design space's default (or the database's best with --db) is timed in interleaved rounds on
copies of one input placed 16 bytes past a page (where NumPy puts large arrays), on a cache
line, on a page (where tensortune.memory puts them) and 64 bytes past one. It is the reason the
tuner and the re-timer place every array themselves (see tensortune.memory).
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
from tensortune.memory import PAGE, empty
from tensortune.space.registry import design_space

OFFSETS = {"16 past a page (NumPy)": 16, "on a page (tensortune)": 0, "64 past a page": 64,
           "2048 past a page": 2048}  # fmt: skip


def placed(array: np.ndarray, offset: int) -> np.ndarray:
    """A copy of `array` starting `offset` bytes past a page."""
    raw = empty(max(array.nbytes + offset, PAGE), np.uint8)  # on a page
    out = raw[offset : offset + array.nbytes].view(array.dtype).reshape(array.shape)
    out[...] = array
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--spec", default="matmul:M=17,N=4096,K=1024")
    ap.add_argument("--operand", type=int, default=1, help="which input to move (0-based)")
    ap.add_argument("--db", default=None)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    common.limit_threads(args.threads)
    target = tt.Target.detect(num_threads=args.threads)
    wl = tt.workload(args.spec)
    ds = design_space(wl, target)
    kernel = (
        tt.compile(wl, target=target, db=args.db)
        if args.db
        else tt.compile(wl, ds.schedule(ds.default), target)
    )
    inputs = wl.random_inputs(0)
    want = wl.reference(inputs)
    contenders = []
    for label, offset in OFFSETS.items():
        arrays = list(inputs)
        arrays[args.operand] = placed(inputs[args.operand], offset)
        out = kernel(*arrays)
        common.check(f"{args.spec} [{label}]", out, want)
        contenders.append(
            common.Contender(label, lambda: None, common.kernel_timer(kernel, [*arrays, out]))
        )
    times = common.rounds_of(contenders, rounds=args.rounds)
    name = wl.inputs[args.operand].name
    print(f"{args.spec}, input {name} moved; {args.rounds} interleaved rounds, target {target}")
    base = "on a page (tensortune)"
    for label in OFFSETS:
        ratio = common.paired_ratio(times, label, base)
        print(
            f"  {label:26s} {statistics.median(times[label]) * 1e3:8.3f} ms  "
            f"{ratio:6.3f} of on-a-page ±{common.noise(times, label, base):.1%}"
        )


if __name__ == "__main__":
    main()
