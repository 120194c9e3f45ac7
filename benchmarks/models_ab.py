"""Whole models with the conv defaults of a git revision against today's, in one process.

    python benchmarks/models_ab.py [--models resnet18,mobilenet_v2] [--base REV] [--threads 2]
        [--rounds 10]

Each model (``torch_models.py``, batch 1, exported by torchscript) is compiled twice without a
database (every kernel its design space's default): once with ``conv.py`` as it was at
``--base`` standing in for the conv template, once with today's. Both are checked against ONNX
Runtime, then the two and ONNX Runtime are timed in interleaved rounds (``common.rounds_of``):
the medians, and the paired ratios new/old and ORT/new (ORT's speed over ours: above 1 we win).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common
from conv_ab import conv_module_at
from models import beside_ort, ort_session
from torch_models import MODELS, build, export_onnx, input_names

from tensortune.graph import compile_model, from_onnx
from tensortune.space import registry
from tensortune.target import Target

CONV_OPS = ("conv2d", "depthwise_conv2d")


def compiled(proto, target: Target, factory):
    """The model compiled with ``factory`` as the conv template (restored afterwards)."""
    saved = {op: registry.TEMPLATES[op] for op in CONV_OPS}
    registry.TEMPLATES.update(dict.fromkeys(CONV_OPS, factory))
    try:
        return compile_model(from_onnx(proto), target=target)
    finally:
        registry.TEMPLATES.update(saved)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="resnet18,mobilenet_v2")
    parser.add_argument("--base", default="HEAD", help="git revision of the old conv defaults")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    common.limit_threads(args.threads)
    target = Target.detect(num_threads=args.threads)
    old_space = conv_module_at(args.base).conv_space
    new_space = registry.TEMPLATES["conv2d"]
    for name in args.models.split(","):
        assert name in MODELS, f"unknown model {name}"
        module, inputs = build(name)
        proto = export_onnx(module, inputs, "torchscript")
        feeds = {n: t.numpy() for n, t in zip(input_names(module), inputs, strict=True)}
        session = ort_session(proto, args.threads)
        want = session.run(None, feeds)[0]
        models = {
            "old": compiled(proto, target, old_space),
            "new": compiled(proto, target, new_space),
        }
        times = beside_ort(name, models, feeds, want, session, args.rounds)
        ms = {c: statistics.median(t) * 1e3 for c, t in times.items()}
        print(
            f"{name} ({args.threads} threads, {args.rounds} rounds, base {args.base}): "
            f"old {ms['old']:.2f} ms, new {ms['new']:.2f} ms, ORT {ms['ort']:.2f} ms; "
            f"new/old {common.paired_ratio(times, 'new', 'old'):.2f} "
            f"(+-{common.noise(times, 'new', 'old'):.0%}), "
            f"ORT/old {common.paired_ratio(times, 'ort', 'old'):.2f}, "
            f"ORT/new {common.paired_ratio(times, 'ort', 'new'):.2f} "
            f"(+-{common.noise(times, 'ort', 'new'):.0%})",
            flush=True,
        )


if __name__ == "__main__":
    main()
