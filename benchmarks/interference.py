"""Does a busy machine change what the tuner picks? Tune twice, alone and beside a CPU-bound
competitor, then re-time both winners on the quiet machine.

    python benchmarks/interference.py [--trials 40] [--only conv] [--rounds 10] [--threads 2]

Per workload: a tune into a fresh database with the machine otherwise idle, a second tune into
another fresh database while a process this benchmark starts spins on one core (the way a
neighbour on a shared VM or a build on a laptop does), then, with the competitor gone, both
winners timed in interleaved rounds. Bar: the disturbed run's winner within 10% of the quiet
run's. Each tune's count of disturbed timing rounds (re-timed, never recorded) is printed.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common

import tensortune as tt

WORKLOADS = ["matmul:M=512,N=512,K=512", "conv2d:C=64,H=28,W=28,K=96,R=3,S=3,pad=1"]
WITHIN = 0.10


@contextlib.contextmanager
def competitor() -> Iterator[None]:
    """A CPU-bound process spinning until the block ends."""
    proc = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        yield
    finally:
        proc.kill()
        proc.wait()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=40)
    ap.add_argument("--only", default="")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    common.limit_threads(args.threads)
    target = tt.Target.detect(num_threads=args.threads)
    print(f"target: {target}", flush=True)
    missed = []
    with tempfile.TemporaryDirectory(prefix="tt-interference-") as tmp:
        for spec in (s for s in WORKLOADS if args.only in s):
            wl = tt.workload(spec)
            kernels = {}
            for condition in ("quiet", "busy"):
                db = Path(tmp) / f"{wl.op}-{condition}.db"
                with competitor() if condition == "busy" else contextlib.nullcontext():
                    res = tt.tune(wl, trials=args.trials, db=db, target=target)
                print(
                    f"{spec} {condition}: {res.trials} trials in {res.tuning_seconds:.0f} s, "
                    f"{res.disturbed_rounds} disturbed rounds re-timed, "
                    f"{res.busy_rounds} busy rounds kept, winner "
                    f"{res.best_config}",
                    flush=True,
                )
                kernels[condition] = tt.compile(wl, target=target, db=db)
            inputs = wl.random_inputs(0)
            want = wl.reference(inputs)
            contenders = []
            for condition, kernel in kernels.items():
                out = kernel(*inputs)
                common.check(f"{spec} [{condition}]", out, want)
                timer = common.kernel_timer(kernel, [*inputs, out])
                contenders.append(common.Contender(condition, lambda: None, timer))
            times = common.rounds_of(contenders, rounds=args.rounds)
            ratio = common.paired_ratio(times, "busy", "quiet")
            print(
                f"{spec}: quiet winner {statistics.median(times['quiet']) * 1e3:.3f} ms, busy "
                f"winner {statistics.median(times['busy']) * 1e3:.3f} ms, busy/quiet "
                f"{ratio:.3f} (noise ±{common.noise(times, 'busy', 'quiet'):.1%})",
                flush=True,
            )
            if ratio > 1 + WITHIN:
                missed.append(f"{spec}: busy/quiet {ratio:.3f}")
    print("bar (busy winner within 10% of quiet): " + ("met" if not missed else f"MISSED {missed}"))


if __name__ == "__main__":
    main()
