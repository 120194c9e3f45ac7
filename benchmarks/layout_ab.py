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
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common
from models import ab_model, ab_summary, beside_ort

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
        proto, feeds, session, want = ab_model(name, args.threads)
        graph = from_onnx(proto)
        auto = choose_layout(optimize(graph), lanes_for(target), target.vector_registers)
        builds = {layout: compile_model(graph, target=target, layout=layout) for layout in LAYOUTS}
        times = beside_ort(name, builds, feeds, want, session, args.rounds)
        print(
            f"{name} ({args.threads} threads, {args.rounds} rounds; auto picks {auto}): "
            + ab_summary(times, "NCHW", "NHWC"),
            flush=True,
        )


if __name__ == "__main__":
    main()
