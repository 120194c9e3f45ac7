"""Do tuned winners reproduce? Tune, then re-time each winner beside its template default and the
fastest peer in a fresh process.

    python benchmarks/reproduce.py [--trials 100] [--db reproduce.db] [--set odd] [--only conv]
                                   [--rounds 10] [--threads 2] [--retime-only]

Five suite workloads and five odd-shaped ones from real models. After tuning (which resumes what
--db holds), a fresh interpreter loads each winner, its template default and the peers, checks
all against NumPy, and times them in --rounds interleaved rounds, taken round by round across
the workloads so that each row's rounds span the whole re-timing, our kernels on operands placed
afresh each round (see `common.kernel_timer`). Per row: the winner's recorded time, its re-timed
median, tuned / default (time ratio, median over rounds, with the noise of that ratio), the
ratio recorded during tuning, and the speed against the fastest peer. Bars: the winner is never
slower than the default beyond the noise; the recorded ratio is within 10% of the re-timed one;
the geomean against the fastest peer is printed to compare across changes.
"""

from __future__ import annotations

import argparse
import math
import statistics
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common
from peers import peers_for

import tensortune as tt
from tensortune.database import TuningRecord, open_database
from tensortune.space.registry import design_space

SUITE = [
    "matmul:M=512,N=512,K=512",
    "matmul:M=128,N=3072,K=768",
    "conv2d:C=64,H=56,W=56,K=64,R=3,S=3,pad=1",
    "depthwise_conv2d:C=144,H=56,W=56,R=3,S=3,pad=1",
    "softmax:rows=1536,cols=128",
]
ODD = [
    "matmul:M=197,N=1152,K=384",
    "matmul:M=17,N=4096,K=1024",
    "batch_matmul:B=6,M=197,N=197,K=64",
    "conv2d:C=64,H=17,W=17,K=96,R=3,S=3,pad=1",
    "depthwise_conv2d:C=112,H=14,W=14,R=5,S=5,pad=2",
]
REPRODUCE_WITHIN = 0.10


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=100)
    ap.add_argument("--db", default="reproduce.db")
    ap.add_argument("--set", choices=("all", "suite", "odd"), default="all")
    ap.add_argument("--only", default="", help="substring filter on the workload specs")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--retime-only", action="store_true", help="skip tuning")
    ap.add_argument("--retime", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    chosen = {"all": SUITE + ODD, "suite": SUITE, "odd": ODD}[args.set]
    specs = [s for s in chosen if args.only in s]
    common.limit_threads(args.threads)
    target = tt.Target.detect(num_threads=args.threads)
    if args.retime:
        retime(specs, target, args)
        return
    print(f"target: {target}", flush=True)
    if not args.retime_only:
        for spec in specs:
            res = tt.tune(spec, trials=args.trials, db=args.db, target=target)
            interval = res.ratio_interval or (math.nan, math.nan)
            print(
                f"tuned {spec}: {res.trials} trials in {res.tuning_seconds:.0f} s, "
                f"tuned/default {res.ratio_to_default or math.nan:.3f} "
                f"[{interval[0]:.3f}, {interval[1]:.3f}], "
                f"{res.disturbed_rounds} disturbed rounds re-timed, "
                f"{res.busy_rounds} busy rounds kept",
                flush=True,
            )
    command = [sys.executable, __file__, "--retime", *sys.argv[1:]]
    subprocess.run(command, check=True)


@dataclass
class Row:
    """One workload's contenders in the re-timing, and their times round by round."""

    spec: str
    recorded: TuningRecord
    contenders: list[common.Contender]
    peers: list[str]
    times: dict[str, list[float]] = field(default_factory=dict)


def retime(specs: list[str], target: tt.Target, args: argparse.Namespace) -> None:
    print(f"\nre-timed in a fresh process, {args.rounds} interleaved rounds", flush=True)
    rows = [row for spec in specs if (row := _row(spec, target, args)) is not None]
    # round by round across the rows, so each row's rounds span the whole re-timing: a kernel's
    # speed relative to another moves with the host's state for tens of seconds at a time
    for r in range(args.rounds):
        for row in rows:
            times = common.rounds_of(row.contenders, rounds=1, first_round=r)
            for name, seconds in times.items():
                row.times.setdefault(name, []).extend(seconds)
    head = (
        f"{'workload':48s} {'recorded':>9s} {'re-timed':>9s} {'tuned/default':>16s} "
        f"{'recorded':>8s} {'vs fastest peer':>18s}"
    )
    print(head + "\n" + "-" * len(head), flush=True)
    speedups, failures = [], []
    for row in rows:
        times, best, spec = row.times, row.recorded, row.spec
        vs_default = common.paired_ratio(times, "tuned", "default")
        noise = common.noise(times, "tuned", "default")
        line = (
            f"{spec:48s} {_ms(best.seconds)} {_ms(statistics.median(times['tuned']))} "
            f"{vs_default:8.3f} ±{noise:5.1%} {best.ratio or math.nan:8.3f}"
        )
        if row.peers:
            fastest = min(row.peers, key=lambda p: statistics.median(times[p]))
            speed = common.paired_ratio(times, fastest, "tuned")
            speedups.append(speed)
            line += f" {speed:8.2f}x {fastest:>9s}"
        print(line, flush=True)
        if vs_default > 1 + noise:
            failures.append(f"{spec}: winner {vs_default:.3f} of the default (noise {noise:.1%})")
        if best.ratio is None or abs(best.ratio / vs_default - 1) > REPRODUCE_WITHIN:
            failures.append(
                f"{spec}: recorded ratio {best.ratio} vs re-timed {vs_default:.3f} "
                f"(bar: within {REPRODUCE_WITHIN:.0%})"
            )
    if speedups:
        geomean = math.exp(statistics.fmean(math.log(s) for s in speedups))
        print(f"\ngeomean speed against the fastest peer: {geomean:.3f}x over {len(speedups)}")
    print("bars: " + ("all met" if not failures else "MISSED\n  " + "\n  ".join(failures)))


def _row(spec: str, target: tt.Target, args: argparse.Namespace) -> Row | None:
    """The winner, its template default and the peers of `spec`, each checked against NumPy."""
    wl = tt.workload(spec)
    with open_database(args.db) as db:
        best = db.best(wl.name, str(target))
    if best is None:
        print(f"{spec:48s} not tuned in {args.db}", flush=True)
        return None
    ds = design_space(wl, target)
    inputs = wl.random_inputs(0)
    want = wl.reference(inputs)
    kernels = {
        "tuned": tt.compile(wl, target=target, db=args.db),
        "default": tt.compile(wl, ds.schedule(ds.default), target),
    }
    contenders = []
    for name, kernel in kernels.items():
        out = kernel(*inputs)
        common.check(f"{spec} [{name}]", out, want)
        timer = common.kernel_timer(kernel, [*inputs, out], fresh_placement=True)
        contenders.append(common.Contender(name, lambda: None, timer))
    peers = peers_for(wl, inputs, args.threads)
    for name, fn in peers.items():
        common.check(f"{spec} [{name}]", common.as_array(fn()), want, rtol=1e-3)
        contenders.append(common.Contender(name, fn))
    return Row(spec, best, contenders, list(peers))


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:7.3f}ms"


if __name__ == "__main__":
    main()
