"""Where a model loses to ONNX Runtime: our per-kernel profile beside ORT's own per-node one.

    python benchmarks/profile_model.py --model mobilenet_v2|resnet18 [--db PATH] [--threads 2]
        [--rounds 30] [--exporter torchscript|dynamo] [--rows]

The model (``torch_models.py``, batch 1, seeded random weights) is exported to ONNX, compiled
with ``--db``'s best schedules (no ``--db``: the design-space defaults) and checked against ONNX
Runtime. Then, all at ``--threads`` threads in one run: the whole model timed in interleaved
rounds (ours and ORT's), our profile (``CompiledModel.profile``: every kernel call timed in
place) and ORT's (``SessionOptions.enable_profiling``: the median of each node's
``kernel_time`` events over the rounds).

ORT's nodes are matched to our kernels by name: a node's own name, or the value it writes (ORT's
NCHWc convolutions are named ``<output>_nchwc``), when one of our kernel's fused nodes has that
name or writes that value. ORT's matched nodes are summed per kernel, then per operator class;
ORT's unmatched nodes (layout reorders, nodes we compute as views) are listed apart.
``--rows`` prints every kernel call, not only the classes.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common
from models import TOLERANCE, exported, ort_session, relative_error
from torch_models import EXPORTERS, MODELS, build, input_names

from tensortune.graph import compile_model, from_onnx
from tensortune.graph.profile import ModelProfile, ProfileRow
from tensortune.target import Target


def ort_profile(proto: Any, feeds: dict[str, np.ndarray], threads: int, rounds: int) -> dict:
    """ORT node name -> median microseconds of its kernel over ``rounds`` runs (after one
    warm-up run, whose events are dropped), and op type."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads, opts.inter_op_num_threads = threads, 1
    opts.enable_profiling = True
    with tempfile.TemporaryDirectory() as tmp:
        opts.profile_file_prefix = str(Path(tmp) / "ort")
        session = ort.InferenceSession(
            proto.SerializeToString(), opts, providers=["CPUExecutionProvider"]
        )
        for _ in range(rounds + 1):
            session.run(None, feeds)
        events = json.loads(Path(session.end_profiling()).read_text())
    times: dict[str, list[float]] = defaultdict(list)
    ops: dict[str, str] = {}
    for e in events:
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
            name = e["name"].removesuffix("_kernel_time")
            times[name].append(float(e["dur"]))
            ops[name] = e["args"].get("op_name", "?")
    return {n: (statistics.median(t[1:] or t), ops[n]) for n, t in times.items()}


def match(rows: tuple[ProfileRow, ...], model: Any, ort_nodes: dict) -> tuple[dict, dict]:
    """ORT's microseconds per our step, and ORT's nodes that match none of our kernels."""
    owner: dict[str, int] = {}
    for row, call in zip(rows, model.steps, strict=True):
        for node in call.group.nodes:
            owner[node.name] = row.step
            for value in node.outputs:
                owner[value] = row.step
    per_step: dict[int, float] = defaultdict(float)
    unmatched: dict[str, tuple[float, str]] = {}
    for name, (us, op) in ort_nodes.items():
        key = name.removesuffix("_nchwc")
        step = owner.get(name, owner.get(key))
        if step is None:
            unmatched[name] = (us, op)
        else:
            per_step[step] += us
    return per_step, unmatched


def report(prof: ModelProfile, per_step: dict, unmatched: dict, show_rows: bool) -> None:
    if show_rows:
        print(f"\n{'step':>4} {'ops':18} {'class':24} {'output':14} {'ours us':>8} {'ORT us':>8}")
        for r in prof.rows:
            theirs = per_step.get(r.step)
            cell = f"{theirs:8.1f}" if theirs is not None else f"{'-':>8}"
            shape = "x".join(map(str, r.shape))
            print(f"{r.step:4d} {r.ops:18} {r.op:24} {shape:14} {r.us:8.1f} {cell}")
    classes: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0])
    for r in prof.rows:
        c = classes[r.op]
        c[0] += 1
        c[1] += r.us
        c[2] += per_step.get(r.step, 0.0)
    head = f"{'class':24} {'calls':>5} {'ours us':>9} {'ORT us':>9} {'ORT/ours':>8}"
    print(f"\n{head} {'lost us':>8}")
    for op, (calls, ours, theirs) in sorted(classes.items(), key=lambda kv: kv[1][2] - kv[1][1]):
        ratio = theirs / ours if ours else float("nan")
        print(f"{op:24} {calls:5d} {ours:9.1f} {theirs:9.1f} {ratio:8.2f} {ours - theirs:8.1f}")
    extra = sum(us for us, _ in unmatched.values())
    if unmatched:
        by_op: dict[str, float] = defaultdict(float)
        for us, op in unmatched.values():
            by_op[op] += us
        ranked = sorted(by_op.items(), key=lambda x: -x[1])
        listed = ", ".join(f"{op} {us:.1f}" for op, us in ranked)
        print(f"ORT nodes matching none of ours: {len(unmatched)}, {extra:.1f} us ({listed})")
    ort_total = sum(per_step.values()) + extra
    print(f"sum of kernels: ours {prof.total_us:.1f} us, ORT {ort_total:.1f} us")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=list(MODELS), default="mobilenet_v2")
    parser.add_argument("--db", default=None, help="tuning database (default: none, defaults)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--exporter", choices=EXPORTERS, default="torchscript")
    parser.add_argument("--rows", action="store_true", help="every kernel call, not only classes")
    args = parser.parse_args()
    common.limit_threads(args.threads)
    target = Target.detect(num_threads=args.threads)
    module, inputs = build(args.model)
    proto, exporter = exported(args.model, module, inputs, args.exporter)
    model = compile_model(from_onnx(proto), db=args.db, target=target)
    feeds = {n: t.numpy() for n, t in zip(input_names(module), inputs, strict=True)}
    session = ort_session(proto, args.threads)
    want = session.run(None, feeds)[0]
    error = relative_error(model.run(feeds)[model.outputs[0].name], want)
    print(
        f"{args.model} ({exporter}): {len(model.steps)} kernel calls, {args.threads} threads, "
        f"database {args.db or 'none'}; max error vs ORT {error:.1e}"
    )
    if error >= TOLERANCE:
        raise SystemExit(f"{args.model}: WRONG against ONNX Runtime, not profiled")
    contenders = [
        common.Contender("tensortune", lambda: model.run(feeds)),
        common.Contender("onnxruntime", lambda: session.run(None, feeds)),
    ]
    times = common.rounds_of(contenders, rounds=max(2, args.rounds // 3))
    ms = {c: statistics.median(t) * 1e3 for c, t in times.items()}
    prof = model.profile(feeds, rounds=args.rounds)
    ort_nodes = ort_profile(proto, feeds, args.threads, args.rounds)
    per_step, unmatched = match(prof.rows, model, ort_nodes)
    report(prof, per_step, unmatched, args.rows)
    print(
        f"whole model, median of interleaved rounds: ours {ms['tensortune']:.3f} ms, ORT "
        f"{ms['onnxruntime']:.3f} ms (ORT/ours {ms['onnxruntime'] / ms['tensortune']:.2f}x)"
    )


if __name__ == "__main__":
    main()
