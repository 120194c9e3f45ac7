"""Old against new default conv kernels of a real model's layers, timed in one process.

    python benchmarks/conv_ab.py --model resnet18|mobilenet_v2 [--base REV] [--threads 2]
        [--rounds 10] [--only REGEX] [--config JSON ...] [--ort] [--all]

Every conv task of the model (as ``extract_tasks`` finds them: weights constant, as a compiled
model runs them; fed the model's own weights and random activations) is built with the design
space's default at git revision ``--base`` (``conv.py`` as it was there, loaded beside the
current one) and with today's default, both through today's ``build``, so an old default that is
no longer a point of the space fails loudly. ``--config`` (repeatable) adds a contender: today's
default with those knobs overridden. Each kernel is checked against NumPy, then all are timed in
interleaved rounds (``common.rounds_of``: the C harness, weights packed once) and each layer
prints the medians and the paired new/old ratio. Layers whose two defaults agree are listed, not
timed (``--all``: timed too). ``--ort`` adds ONNX Runtime running the same fused nodes as a
one-group model, with its per-call Python overhead (a few microseconds) and its NCHWc reorders
in and out (which it skips between convs inside a model): a bound, not its in-model time
(``profile_model.py`` has that).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import statistics
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common
from models import ort_session
from torch_models import MODELS, build, export_onnx

import tensortune as tt
from tensortune.graph import from_onnx
from tensortune.graph.tasks import Lowered, lower_graph
from tensortune.memory import aligned
from tensortune.space.registry import design_space
from tensortune.target import Target

ROOT = Path(__file__).resolve().parent.parent


def conv_module_at(rev: str) -> types.ModuleType:
    """``tensortune/space/conv.py`` as it was at ``rev``, imported beside today's."""
    source = subprocess.run(
        ["git", "show", f"{rev}:tensortune/space/conv.py"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    spec = importlib.util.spec_from_loader("tensortune.space._conv_base", loader=None)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    module.__package__ = "tensortune.space"
    exec(compile(source, f"{rev}:conv.py", "exec"), module.__dict__)
    return module


def layer_inputs(graph: Any, step: Lowered) -> list[Any]:
    """The workload's inputs: the model's weights where it reads them, random activations."""
    values = step.workload.random_inputs(0)
    for k, t in enumerate(step.workload.inputs):
        binding = step.bindings[t.name]
        if binding.value in graph.initializers:
            weight = graph.initializers[binding.value].astype(values[k].dtype)
            values[k] = aligned(np.ascontiguousarray(weight.reshape(binding.shape)))
    return values


def ort_group(graph: Any, step: Lowered, threads: int) -> Any:
    """An ONNX Runtime session computing ``step``'s fused nodes alone (weights as initializers)."""
    import onnx
    from onnx import helper, numpy_helper

    nodes = step.group.nodes
    produced = {o for n in nodes for o in n.outputs}
    inits, inputs = [], []
    for value in dict.fromkeys(v for n in nodes for v in n.inputs if v and v not in produced):
        info = graph.values[value]
        if value in graph.initializers:
            inits.append(numpy_helper.from_array(graph.initializers[value], value))
        else:
            inputs.append(helper.make_tensor_value_info(value, onnx.TensorProto.FLOAT, info.shape))
    out = step.group.output
    outputs = [helper.make_tensor_value_info(out, onnx.TensorProto.FLOAT, graph.values[out].shape)]
    onnx_nodes = [
        helper.make_node(n.op, list(n.inputs), list(n.outputs), n.name, **dict(n.attrs))
        for n in nodes
    ]
    model = helper.make_model(
        helper.make_graph(onnx_nodes, "group", inputs, outputs, inits),
        opset_imports=[helper.make_opsetid("", 17)],
    )
    return ort_session(model, threads), [i.name for i in inputs]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=list(MODELS), default="resnet18")
    parser.add_argument("--base", default="HEAD", help="git revision of the old default")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--only", default="", help="only tasks whose name matches this regex")
    parser.add_argument(
        "--config", action="append", default=[], help="JSON knobs over the new default (repeat)"
    )
    parser.add_argument("--ort", action="store_true", help="ONNX Runtime on each group too")
    parser.add_argument("--all", action="store_true", help="time layers whose defaults agree")
    args = parser.parse_args()
    if args.rounds < 2:
        parser.error(f"--rounds must be at least 2 (a ratio's noise needs two), got {args.rounds}")
    common.limit_threads(args.threads)
    target = Target.detect(num_threads=args.threads)
    old_conv = conv_module_at(args.base)
    module, inputs = build(args.model)
    graph, steps = lower_graph(from_onnx(export_onnx(module, inputs, "torchscript")))
    seen: dict[str, int] = {}
    layers: list[Lowered] = []
    for step in steps:
        if isinstance(step, Lowered) and step.workload.op == "conv2d":
            if step.workload.name not in seen:
                layers.append(step)
            seen[step.workload.name] = seen.get(step.workload.name, 0) + 1
    extra = [json.loads(text) for text in args.config]
    print(f"{args.model}: {len(layers)} conv tasks, {args.threads} threads, base {args.base}")
    totals: dict[str, float] = {}
    for step in layers:
        wl = step.workload
        if args.only and not re.search(args.only, wl.name):
            continue
        weight = seen[wl.name]
        ds = design_space(wl, target)
        configs = {"old": old_conv.conv_space(wl, target).default, "new": ds.default}
        for k, knobs in enumerate(extra):
            if ds.space.is_valid({**ds.default, **knobs}):  # else that contender sits out
                configs[f"cfg{k}"] = {**ds.default, **knobs}
        label = f"{wl.name.split('|')[0][6:]:44s} x{weight}"
        if configs["old"] == configs["new"] and not extra and not args.all:
            print(f"{label}  same default")
            continue
        values = layer_inputs(graph, step)
        want = wl.reference(values)
        contenders = []
        for name, config in configs.items():
            kernel = tt.compile(wl, schedule=ds.schedule(config), target=target)
            fed = common.feeds(kernel, wl, values)
            got = kernel(*fed)
            common.check(f"{wl.name} [{name}]", got, want)
            timer = common.kernel_timer(kernel, [*fed, got])
            contenders.append(common.Contender(name, lambda: None, timer))
        if args.ort:
            session, names = ort_group(graph, step, args.threads)
            by_value = {
                step.bindings[t.name].value: a for t, a in zip(wl.inputs, values, strict=False)
            }
            feed = {n: by_value[n] for n in names}
            common.check(f"{wl.name} [ort]", session.run(None, feed)[0], want)
            contenders.append(common.Contender("ort", lambda s=session, f=feed: s.run(None, f)))
        times = common.rounds_of(contenders, rounds=args.rounds)
        us = {n: statistics.median(t) * 1e6 for n, t in times.items()}
        for n, v in us.items():
            totals[n] = totals.get(n, 0.0) + v * weight
        cells = "  ".join(f"{n} {v:8.1f}" for n, v in us.items())
        ratios = "  ".join(
            f"{n}/old {common.paired_ratio(times, n, 'old'):.2f}" for n in us if n != "old"
        )
        print(f"{label}  {cells} us  {ratios} (+-{common.noise(times, 'new', 'old'):.0%})")
        print(f"    old {configs['old']}\n    new {configs['new']}", flush=True)
    print("weighted sums (us): " + "  ".join(f"{n} {v:.0f}" for n, v in totals.items()))


if __name__ == "__main__":
    main()
