"""Whole-model latency: a ResNet-18-shaped ONNX model compiled by tensortune beside ONNX Runtime.

    python benchmarks/models.py [--threads 2] [--db tuning.db] [--budget 20m] [--rounds 6]

The model is built with onnx.helper (random weights, batch 1, 224x224; no downloads), compiled
with ``tensortune.graph.compile_model`` into one shared library (design-space default schedules,
or the database's best with ``--db``; ``--budget`` first tunes the model into it with
``tensortune.tune_model``), checked against ONNX Runtime (max error relative to the output's largest
magnitude), then both are timed in interleaved blocks (``common.measure``): median per call,
best block, and the ratio (> 1: we are faster).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common
import onnx
from onnx import TensorProto, helper, numpy_helper

from tensortune.cli.model_commands import parse_duration
from tensortune.graph import compile_model, extract_tasks, from_onnx, tune_model
from tensortune.target import Target


class _Net:
    """Nodes and random initializers, one call at a time."""

    def __init__(self, seed: int = 0):
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits, self.n = [], [], 0

    def name(self, stem: str) -> str:
        self.n += 1
        return f"{stem}_{self.n}"

    def const(self, array: np.ndarray) -> str:
        name = self.name("w")
        self.inits.append(numpy_helper.from_array(array.astype(np.float32), name))
        return name

    def op(self, op: str, inputs: list[str], **attrs) -> str:
        out = self.name(op.lower())
        self.nodes.append(helper.make_node(op, inputs, [out], self.name(op), **attrs))
        return out

    def conv_bn(self, x: str, c: int, k: int, size: int, stride: int = 1, relu: bool = True):
        w = self.const(self.rng.normal(0, np.sqrt(2 / (c * size * size)), (k, c, size, size)))
        pad = size // 2
        y = self.op("Conv", [x, w], kernel_shape=[size, size], strides=[stride] * 2, pads=[pad] * 4)
        r = self.rng
        stats = [r.uniform(0.5, 1.5, k), r.uniform(-0.1, 0.1, k), r.uniform(-0.1, 0.1, k)]
        bn = [self.const(s) for s in (*stats, r.uniform(0.5, 1.5, k))]
        y = self.op("BatchNormalization", [y, *bn], epsilon=1e-5)
        return self.op("Relu", [y]) if relu else y

    def block(self, x: str, c: int, k: int, stride: int) -> str:
        y = self.conv_bn(self.conv_bn(x, c, k, 3, stride), k, k, 3, relu=False)
        skip = x if stride == 1 and c == k else self.conv_bn(x, c, k, 1, stride, relu=False)
        return self.op("Relu", [self.op("Add", [y, skip])])


def resnet18(classes: int = 1000) -> onnx.ModelProto:
    """ResNet-18 as torchvision defines it (batch 1, 3x224x224), with random weights."""
    net = _Net()
    y = net.conv_bn("input", 3, 64, 7, 2)
    y = net.op("MaxPool", [y], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    c = 64
    for k, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
        y = net.block(net.block(y, c, k, stride), k, k, 1)
        c = k
    y = net.op("Flatten", [net.op("GlobalAveragePool", [y])], axis=1)
    fc = net.const(net.rng.normal(0, 0.01, (classes, 512)))
    y = net.op("Gemm", [y, fc, net.const(np.zeros(classes))], transB=1)
    graph = helper.make_graph(
        net.nodes,
        "resnet18",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 224, 224])],
        [helper.make_tensor_value_info(y, TensorProto.FLOAT, [1, classes])],
        net.inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def ort_session(model: onnx.ModelProto, threads: int):
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    return ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--db", default=None, help="tuning database (default: none, defaults)")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument(
        "--budget", type=parse_duration, default=None, help="tune first: 90, 20m (needs --db)"
    )
    args = parser.parse_args()
    target = Target.detect(num_threads=args.threads)
    if args.budget and not args.db:
        parser.error("--budget needs --db (where the tuning records go)")

    model = resnet18()
    graph = from_onnx(model)
    tasks = extract_tasks(graph)
    calls = sum(t.weight for t in tasks)
    print(f"resnet18: {len(graph.nodes)} ONNX nodes -> {calls} kernel calls, {len(tasks)} tasks")
    if args.budget:
        result = tune_model(graph, budget=args.budget, db=args.db, target=target)
        print(
            f"tuned {result.trials} trials in {result.seconds:.0f} s (budget {args.budget:.0f} s)"
        )
    start = time.perf_counter()
    compiled = compile_model(graph, db=args.db, target=target)
    print(f"compiled in {time.perf_counter() - start:.1f} s")
    mib = 1024 * 1024
    print(
        f"activation arena {compiled.memory.size / mib:.1f} MiB "
        f"(without reuse {compiled.memory.unplanned / mib:.1f} MiB)"
    )

    x = np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype(np.float32)
    sess = ort_session(model, args.threads)
    ours, theirs = compiled(x), sess.run(None, {"input": x})[0]
    error = float(np.abs(ours - theirs).max() / np.abs(theirs).max())
    print(f"max error relative to the largest output: {error:.1e}")

    best = common.measure(
        [
            common.Contender("tensortune", lambda: compiled(x)),
            common.Contender("onnxruntime", lambda: sess.run(None, {"input": x})),
        ],
        rounds=args.rounds,
    )
    ratio = best["onnxruntime"] / best["tensortune"]
    print(f"{'model':10} {'tensortune ms':>14} {'onnxruntime ms':>15} {'speed vs ORT':>13}")
    print(
        f"{'resnet18':10} {best['tensortune'] * 1e3:14.2f} {best['onnxruntime'] * 1e3:15.2f} "
        f"{ratio:12.2f}x"
    )


if __name__ == "__main__":
    main()
