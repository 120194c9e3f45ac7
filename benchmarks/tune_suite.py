"""Tune a suite at a fixed budget and print our GFLOP/s beside the peers'.

    python benchmarks/tune_suite.py [--suite standard|models] [--trials 200] [--strategy model]
                                    [--db suite.db] [--only matmul] [--max-seconds 900]
                                    [--threads 2] [--check-defaults]

``--suite standard`` (the default) is round shapes, multiples of 16; ``--suite models`` is 44
layers of real networks from ``tensortune.workload.zoo`` (rows labelled network/layer, the
specs listed first), with issue 14's bars: every row at least 85% of the fastest peer, the
batched attention GEMMs at least PyTorch, and the geomean at least 1.05x the fastest peer.
``--check-defaults`` tunes nothing: it compiles each workload's design-space default and checks
it against NumPy, listing the ones that fail to build or are wrong.

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
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common
from bandwidth import triad_gbs
from peers import peers_for

import tensortune as tt
from tensortune.database import open_database
from tensortune.space import design_space
from tensortune.workload import zoo

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
# Layers of real networks (tensortune.workload.zoo keys): every op class kernels meet in models,
# at the shapes they have there (197 tokens, 7x7 to 147x147 grids, 24/40/112/480 channels).
MODELS = [
    # GEMM: prefill, decode and classifier shapes; one fused bias+GELU (no peer implements a
    # dense layer with a fused epilogue, so those stay in the zoo)
    "vit_b16/encoder.layers.encoder_layer_0.self_attention.in_proj",
    "swin_t/features.5.0.attn.qkv",
    "vit_b16/encoder.layers.encoder_layer_0.mlp.3",
    "lstm_lm/rnn.weight_ih_l0@medium",
    "gpt2_small/h.0.attn.c_attn@prefill256",
    "gpt2_small/h.0.mlp.c_fc@decode257",
    "convnext_tiny/features.7.0.block.5",
    "lstm_lm/rnn.weight_hh_l0@large",
    "lstm_lm/decoder@medium",
    "gpt2_small/lm_head@decode257",
    "resnet50/fc",
    # batched GEMM: attention scores and context, encoder, decoder and windowed
    "vit_b16/encoder.layers.encoder_layer_0.self_attention.matmul(q,k^T)",
    "vit_b16/encoder.layers.encoder_layer_0.self_attention.matmul(p,v)",
    "bert_base/encoder.layer.0.attention.self.matmul(q,k^T)@seq384",
    "gpt2_small/h.0.attn.matmul(q,k^T)@decode257",
    "swin_t/features.1.0.attn.matmul(q,k^T)",
    "dlrm/interact_features.bmm",
    # 3x3 convs, late stages and odd grids
    "resnet50/layer4.1.conv2",
    "resnet50/layer2.0.conv2",
    "inception_v3/Conv2d_4a_3x3.conv",
    "inception_v3/Mixed_6a.branch3x3.conv",
    "densenet121/features.denseblock3.denselayer1.conv2",
    "yolov5s/model.4.m.0.cv2.conv",
    # 1x1 convs
    "efficientnet_b0/features.5.0.block.3.0",
    "mobilenet_v2/features.3.conv.0.0",
    "resnet50/layer3.1.conv1",
    "yolov5s/model.24.m.0",
    # 5x5, 1x7 and strided stems (7x7/2, 4x4/4, 11x11/4, 16x16/16)
    "inception_v3/Mixed_5b.branch5x5_2.conv",
    "inception_v3/Mixed_6b.branch7x7_2.conv",
    "densenet121/features.conv0",
    "convnext_tiny/features.0.0",
    "alexnet/features.0",
    "vit_b16/conv_proj",
    # grouped and depthwise
    "resnext50_32x4d/layer3.1.conv2",
    "resnext50_32x4d/layer2.0.conv2",
    "efficientnet_b0/features.5.0.block.1.0",
    "efficientnet_b0/features.3.0.block.1.0",
    "convnext_tiny/features.3.0.block.0",
    "mobilenet_v2/features.4.conv.1.0",
    # pooling, softmax, layernorm
    "inception_v3/maxpool1",
    "yolov5s/model.9.m",
    "vit_b16/encoder.layers.encoder_layer_0.self_attention.softmax",
    "lstm_lm/log_softmax",
    "vit_b16/encoder.layers.encoder_layer_0.ln_1",
    "convnext_tiny/features.0.1",
]
# The dimensions whose roundness matters to a kernel (not batch, window, stride or padding).
_SIZES = {
    "matmul": ("M", "N", "K"),
    "dense": ("M", "N", "K"),
    "batch_matmul": ("M", "N", "K"),
    "conv2d": ("C", "H", "W", "K"),
    "maxpool2d": ("C", "H", "W"),
    "softmax": ("rows", "cols"),
    "layernorm": ("rows", "cols"),
}
OP_CLASSES = (
    "GEMM",
    "batched GEMM",
    "conv 3x3",
    "conv 1x1",
    "conv 5x5",
    "conv 7x7 strided",
    "grouped conv",
    "depthwise conv",
    "pooling",
    "softmax",
    "layernorm",
)


def op_class(wl: tt.Workload) -> str:
    """The issue's op class of a workload (convs by their window; grouped and depthwise first)."""
    p = dict(wl.params)
    if wl.op != "conv2d":
        names = {"matmul": "GEMM", "dense": "GEMM", "batch_matmul": "batched GEMM"}
        return names.get(wl.op, "pooling" if wl.op == "maxpool2d" else wl.op)
    if p["groups"] == p["C"] > 1:
        return "depthwise conv"
    if p["groups"] > 1:
        return "grouped conv"
    if p["R"] == p["S"] == 7 and p["stride"] > 1:
        return "conv 7x7 strided"
    return f"conv {p['R']}x{p['S']}"


def is_round(wl: tt.Workload) -> bool:
    """Every size that matters is a multiple of 16 (what the standard suite holds to)."""
    return all(int(wl.param(k)) % 16 == 0 for k in _SIZES[wl.op])


def models_suite() -> list[tuple[str, tt.Workload]]:
    """(network/layer, workload) of the models suite, checked to span the issue's op classes with
    at least half the workloads not round. Each layer's parameters are constant, as in a deployed
    network (`zoo.Layer.workload`): our kernels pack weights once, ONNX Runtime gets them as
    initializers and packs them once too."""
    layers = zoo.by_key()
    rows = [(key, layers[key].workload()) for key in MODELS]
    workloads = [wl for _, wl in rows]
    missing = set(OP_CLASSES) - {op_class(wl) for wl in workloads}
    unround = sum(not is_round(wl) for wl in workloads)
    if len(rows) < 40 or missing or 2 * unround < len(rows):
        raise AssertionError(
            f"the models suite must have >= 40 workloads, half of them not round, in every op "
            f"class: it has {len(rows)}, {unround} not round, missing {sorted(missing)}"
        )
    return rows


SUITES = {
    "standard": lambda: [(spec, tt.workload(spec)) for spec in SUITE],
    "models": models_suite,
}
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
# Issue 14's bars for the models suite, and the geomean it must reach over the suite.
MODEL_BARS = {"batch_matmul": ("pytorch", 1.0), "": ("best peer", 0.85)}
MODELS_GEOMEAN_BAR = 1.05
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


def bar_for(spec: str, bars: dict[str, tuple[str, float]] = BARS) -> tuple[str, float] | None:
    """The bar of the longest key of ``bars`` that is the spec or its op name ("" is any)."""
    keys = [k for k in bars if not k or spec == k or spec.startswith(k + ":")]
    return bars[max(keys, key=len)] if keys else None


def verdict(
    spec: str,
    ours: float,
    peers: dict[str, float],
    bound: float | None,
    bars: dict[str, tuple[str, float]] = BARS,
) -> str:
    """'bar ...: met/missed' for a spec with a bar (all figures GFLOP/s), else ''."""
    bar = bar_for(spec, bars)
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


def wide_header(header: str, width: int) -> str:
    """``common.header`` with its workload column widened to ``width`` (labels can be long)."""
    line = header.splitlines()[0].replace(f"{'workload':44s}", f"{'workload':{width}s}", 1)
    return line + "\n" + "-" * len(line)


def check_defaults(rows: list[tuple[str, tt.Workload]], target: tt.Target) -> list[str]:
    """Compile each workload's design-space default and check it against NumPy; the failures."""
    failures = []
    for label, wl in rows:
        try:
            space = design_space(wl, target)
            kernel = tt.compile(wl, schedule=space.schedule(space.default), target=target)
            inputs = wl.random_inputs(0)
            common.check(label, kernel(*common.feeds(kernel, wl, inputs)), wl.reference(inputs))
            status = "ok"
        except (tt.TensorTuneError, SystemExit) as err:
            status = f"FAILED: {type(err).__name__}: {err}"
            failures.append(f"{label} ({wl.name}): {status}")
        print(f"{label:60s} {status}", flush=True)
    return failures


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--suite", choices=sorted(SUITES), default="standard")
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--strategy", default="model")
    ap.add_argument("--db", default="suite.db")
    ap.add_argument("--only", default="", help="substring filter on the row labels and specs")
    ap.add_argument("--max-seconds", type=float, default=None, help="per workload")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=10, help="turns each contender gets")
    ap.add_argument(
        "--check-defaults", action="store_true", help="only build and check the default configs"
    )
    args = ap.parse_args()
    common.limit_threads(args.threads)
    target = tt.Target.detect(num_threads=args.threads)
    cpu = f"cpu: {target.name} ({target.isa}, {target.vector_bits}-bit vectors)"
    print(f"{cpu}   target: {target}   numpy: {common.openblas_info()}", flush=True)
    rows = [(label, wl) for label, wl in SUITES[args.suite]() if args.only in label + wl.name]
    if args.check_defaults:
        failures = check_defaults(rows, target)
        print(f"\n{len(rows) - len(failures)} of {len(rows)} defaults build and are correct")
        print("\n".join(failures))
        raise SystemExit(1 if failures else 0)
    bars = MODEL_BARS if args.suite == "models" else BARS
    peer_names = ["numpy", "pytorch", "onnxruntime"]
    specs = [wl.name for _, wl in rows]
    gbs = None
    if any(bar_for(s, bars) and bar_for(s, bars)[0] == "bandwidth bound" for s in specs):
        gbs = triad_gbs(target)
        print(f"memory bandwidth now (STREAM triad, benchmarks/bandwidth.py): {gbs:.1f} GB/s")
    width = max(44, *(len(label) for label, _ in rows))
    lines = [cpu, wide_header(common.header(peer_names, "   tuning s/trials"), width)]
    if gbs:
        lines.insert(1, f"memory bandwidth (STREAM triad): {gbs:.1f} GB/s")
    if args.suite != "standard":
        legend = [f"  {label} = {wl.name}" for label, wl in rows]
        print("\n".join(["workloads:", *legend]), flush=True)
    ratios = []
    for label, wl in rows:
        spec = wl.name
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
        feeds = common.feeds(kernel, wl, inputs)  # weights packed here, once, when constant
        out = kernel(*feeds)
        common.check(spec, out, wl.reference(inputs))
        contenders = [
            common.Contender("ours", lambda: None, common.kernel_timer(kernel, [*feeds, out]))
        ]
        peers = peers_for(wl, inputs, args.threads)
        for name, fn in peers.items():
            common.check(f"{spec} [{name}]", common.as_array(fn()), out, rtol=1e-3)
            contenders.append(common.Contender(name, fn))
        best = common.measure(contenders, repeat=args.repeat, rounds=args.rounds)
        line = common.row(
            label.ljust(width), best["ours"], {p: best.get(p) for p in peer_names}, wl.flops
        )
        line += f"  {res.tuning_seconds:6.0f}s/{res.trials}"
        bytes_moved = sum(a.nbytes for a in (*inputs, out))
        bound = wl.flops / (bytes_moved / (gbs * 1e9)) / 1e9 if gbs else None
        peer_gflops = {p: wl.flops / best[p] / 1e9 for p in peer_names if p in best}
        line += verdict(spec, wl.flops / best["ours"] / 1e9, peer_gflops, bound, bars)
        if peer_gflops:
            ratios.append(wl.flops / best["ours"] / 1e9 / max(peer_gflops.values()))
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
    if args.suite == "models" and ratios:
        geomean = statistics.geometric_mean(ratios)
        ok = "met" if geomean >= MODELS_GEOMEAN_BAR else "MISSED"
        lines.append(
            f"geomean over {len(ratios)} rows: {geomean:.2f}x the fastest peer "
            f"(bar {MODELS_GEOMEAN_BAR:.2f}x: {ok})"
        )
    print("\n".join(["", *lines]))


if __name__ == "__main__":
    main()
