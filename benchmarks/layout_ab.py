"""Whole models with their convs in NCHW against NHWC (``compile_model(layout=...)``), untuned,
beside ONNX Runtime, in one process.

    python benchmarks/layout_ab.py [--models mobilenet_v2,resnet18,dqn] [--threads 1]
        [--rounds 10]

Each model (``torch_models.py``, batch 1, exported by torchscript) is compiled without a database
(every kernel its design space's default) in both layouts, each checked against ONNX Runtime,
then the two and ONNX Runtime are timed in interleaved rounds (``common.rounds_of``): the
medians, the paired ratio NHWC/NCHW, ORT/each (ORT's time over ours: above 1 we win), and the
layout "auto" picks for the model.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common
from models import beside_ort, ort_session
from torch_models import MODELS, build, export_onnx, input_names

from tensortune.graph import compile_model, from_onnx
from tensortune.graph.fold import optimize
from tensortune.graph.layout import choose_layout
from tensortune.space.template import lanes_for
from tensortune.target import Target

LAYOUTS = ("NCHW", "NHWC")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="mobilenet_v2,resnet18,dqn")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    if args.rounds < 2:
        raise SystemExit("--rounds must be at least 2 (the noise is a spread over rounds)")
    common.limit_threads(args.threads)
    target = Target.detect(num_threads=args.threads)
    for name in args.models.split(","):
        if name not in MODELS:
            raise SystemExit(f"unknown model {name}; known: {', '.join(MODELS)}")
        module, inputs = build(name)
        proto = export_onnx(module, inputs, "torchscript")
        feeds = {n: t.numpy() for n, t in zip(input_names(module), inputs, strict=True)}
        session = ort_session(proto, args.threads)
        want = session.run(None, feeds)[0]
        graph = from_onnx(proto)
        auto = choose_layout(optimize(graph), lanes_for(target), target.vector_registers)
        builds = {layout: compile_model(graph, target=target, layout=layout) for layout in LAYOUTS}
        times = beside_ort(name, builds, feeds, want, session, args.rounds)
        ms = {c: statistics.median(t) * 1e3 for c, t in times.items()}
        print(
            f"{name} ({args.threads} threads, {args.rounds} rounds; auto picks {auto}): "
            f"NCHW {ms['NCHW']:.3f} ms, NHWC {ms['NHWC']:.3f} ms, ORT {ms['ort']:.3f} ms; "
            f"NHWC/NCHW {common.paired_ratio(times, 'NHWC', 'NCHW'):.2f} "
            f"(+-{common.noise(times, 'NHWC', 'NCHW'):.0%}), "
            f"ORT/NCHW {common.paired_ratio(times, 'ort', 'NCHW'):.2f}, "
            f"ORT/NHWC {common.paired_ratio(times, 'ort', 'NHWC'):.2f} "
            f"(+-{common.noise(times, 'ort', 'NHWC'):.0%})",
            flush=True,
        )


if __name__ == "__main__":
    main()
