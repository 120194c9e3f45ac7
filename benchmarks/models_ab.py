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
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common
from conv_ab import conv_module_at
from models import ab_model, ab_summary, beside_ort

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
        proto, feeds, session, want = ab_model(name, args.threads)
        models = {
            "old": compiled(proto, target, old_space),
            "new": compiled(proto, target, new_space),
        }
        times = beside_ort(name, models, feeds, want, session, args.rounds)
        print(
            f"{name} ({args.threads} threads, {args.rounds} rounds, base {args.base}): "
            + ab_summary(times, "old", "new"),
            flush=True,
        )


if __name__ == "__main__":
    main()
