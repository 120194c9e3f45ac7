"""Tune the standard suite at a fixed budget and print our GFLOP/s beside the peers'.

    python benchmarks/tune_suite.py [--trials 200] [--strategy model] [--db suite.db]
                                    [--only matmul] [--max-seconds 900] [--threads 2]

Per workload: tune (resuming whatever --db already holds), re-time the best kernel in this
process beside NumPy (with the OpenBLAS kernel that ran), PyTorch and ONNX Runtime, each
checked against the NumPy reference, and print the ratio to the fastest peer, the tuning
wall time and whether the issue's bar is met. GEMV's bar is a fraction of the bandwidth bound:
the bytes it must move at the STREAM triad bandwidth measured at the start of the run. For
matmul 1024^3 and the 64-channel conv it also prints when tuning first reached what TVM
MetaSchedule reached here after 512 trials (../shared/anchors.md).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common
from bandwidth import triad_gbs
from peers import peers_for

import tensortune as tt
from tensortune.database import open_database

SUITE = [
    "matmul:M=512,N=512,K=512",
    "matmul:M=1024,N=1024,K=1024",
    "matmul:M=2048,N=2048,K=2048",
    "matmul:M=128,N=3072,K=768",
    "matmul:M=128,N=768,K=3072",
    "matmul:M=1,N=4096,K=4096",
    "batch_matmul:B=12,M=128,N=128,K=64",
    "conv2d:C=64,H=56,W=56,K=64,R=3,S=3,pad=1",
    "conv2d:C=128,H=28,W=28,K=128,R=3,S=3,pad=1",
    "conv2d:C=256,H=14,W=14,K=256,R=3,S=3,pad=1",
    "conv2d:C=3,H=224,W=224,K=64,R=7,S=7,stride=2,pad=3",
    "conv2d:C=256,H=56,W=56,K=64,R=1,S=1",
    "conv2d:C=128,H=28,W=28,K=256,R=3,S=3,stride=2,pad=1",
    "depthwise_conv2d:C=144,H=56,W=56,R=3,S=3,pad=1",
    "depthwise_conv2d:C=96,H=112,W=112,R=3,S=3,stride=2,pad=1",
    "softmax:rows=1536,cols=128",
    "layernorm:rows=128,cols=768",
    "matmul:M=128,N=3072,K=768,epilogue=bias+gelu",
]
# Issue 3's bars: (what we are compared with, the fraction of it we must reach).
BARS = {
    "matmul:M=1024,N=1024,K=1024": ("best peer", 0.9),
    "matmul:M=128,N=3072,K=768": ("best peer", 0.9),
    "matmul:M=128,N=768,K=3072": ("best peer", 0.9),
    "matmul:M=1,N=4096,K=4096": ("bandwidth bound", 0.8),
    "depthwise_conv2d": ("pytorch", 1.1),
    "conv2d": ("pytorch", 0.9),
    "softmax": ("pytorch", 1.1),
    "layernorm": ("pytorch", 1.1),
}
# What TVM MetaSchedule reached on this machine after 512 trials (shared/anchors.md).
TVM_AFTER_512 = {
    "matmul:M=1024,N=1024,K=1024": (150.0, 572.0),
    "conv2d:C=64,H=56,W=56,K=64,R=3,S=3,pad=1": (128.0, 720.0),
}


def first_reach(records, flops: float, gflops: float) -> tuple[float, int] | None:
    """(tuning seconds, trial) at which the best-so-far first reached ``gflops`` (trials only,
    not the re-measurements that confirm the winners)."""
    for r in sorted(records, key=lambda r: r.trial):
        if r.ok and r.strategy != "confirm" and flops / r.seconds / 1e9 >= gflops:
            return r.tuning_seconds, r.trial
    return None


def bar_for(spec: str) -> tuple[str, float] | None:
    """The bar of the longest BARS key that is the spec or its op name."""
    keys = [k for k in BARS if spec == k or spec.startswith(k + ":")]
    return BARS[max(keys, key=len)] if keys else None


def verdict(spec: str, ours: float, peers: dict[str, float], bound: float | None) -> str:
    """'bar ...: met/missed' for a spec with a bar (all figures GFLOP/s), else ''."""
    bar = bar_for(spec)
    if bar is None:
        return ""
    against, fraction = bar
    ref = {"best peer": max(peers.values(), default=None), "bandwidth bound": bound}.get(
        against, peers.get(against)
    )
    if not ref:
        return f"  bar {fraction:.0%} of {against}: no figure"
    ok = "met" if ours >= fraction * ref else "MISSED"
    return f"  bar {fraction:.0%} of {against} ({ref:.1f}): {ours / ref:.0%} {ok}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--strategy", default="model")
    ap.add_argument("--db", default="suite.db")
    ap.add_argument("--only", default="", help="substring filter on the workload specs")
    ap.add_argument("--max-seconds", type=float, default=None, help="per workload")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=10, help="turns each contender gets")
    args = ap.parse_args()
    common.limit_threads(args.threads)
    target = tt.Target.detect(num_threads=args.threads)
    print(f"target: {target}   numpy: {common.openblas_info()}", flush=True)
    peer_names = ["numpy", "pytorch", "onnxruntime"]
    specs = [s for s in SUITE if args.only in s]
    gbs = None
    if any(bar_for(s) and bar_for(s)[0] == "bandwidth bound" for s in specs):
        gbs = triad_gbs(target)
        print(f"memory bandwidth now (STREAM triad, benchmarks/bandwidth.py): {gbs:.1f} GB/s")
    lines = [common.header(peer_names, "   tuning s/trials")]
    if gbs:
        lines.insert(0, f"memory bandwidth (STREAM triad): {gbs:.1f} GB/s")
    for spec in specs:
        wl = tt.workload(spec)
        res = tt.tune(
            wl,
            trials=args.trials,
            strategy=args.strategy,
            db=args.db,
            target=target,
            max_seconds=args.max_seconds,
        )
        kernel = tt.compile(wl, target=target, db=args.db)
        inputs = wl.random_inputs(0)
        out = kernel(*inputs)
        common.check(spec, out, wl.reference(inputs))
        contenders = [
            common.Contender("ours", lambda: None, common.kernel_timer(kernel, [*inputs, out]))
        ]
        peers = peers_for(wl, inputs, args.threads)
        for name, fn in peers.items():
            common.check(f"{spec} [{name}]", common.as_array(fn()), out, rtol=1e-3)
            contenders.append(common.Contender(name, fn))
        best = common.measure(contenders, repeat=args.repeat, rounds=args.rounds)
        line = common.row(spec, best["ours"], {p: best.get(p) for p in peer_names}, wl.flops)
        line += f"  {res.tuning_seconds:6.0f}s/{res.trials}"
        bytes_moved = sum(a.nbytes for a in (*inputs, out))
        bound = wl.flops / (bytes_moved / (gbs * 1e9)) / 1e9 if gbs else None
        peer_gflops = {p: wl.flops / best[p] / 1e9 for p in peer_names if p in best}
        line += verdict(spec, wl.flops / best["ours"] / 1e9, peer_gflops, bound)
        lines.append(line)
        print(line, flush=True)
        if spec in TVM_AFTER_512:
            gf, tvm_s = TVM_AFTER_512[spec]
            with open_database(args.db) as db:
                hit = first_reach(db.records(wl.name, str(target)), wl.flops, gf)
            when = f"after {hit[0]:.0f} s of tuning (trial {hit[1]})" if hit else "not reached"
            msg = f"  {spec}: TVM MetaSchedule's {gf:.0f} GFLOP/s ({tvm_s:.0f} s) -> ours {when}"
            lines.append(msg)
            print(msg, flush=True)
    print("\n".join(["", *lines]))


if __name__ == "__main__":
    main()
