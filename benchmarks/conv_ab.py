"""Old against new default conv kernels of a real model's layers, timed in one process.

    python benchmarks/conv_ab.py --model resnet18|mobilenet_v2 [--base REV] [--threads 2]
        [--rounds 10] [--only REGEX] [--config JSON ...] [--ort] [--all]
    python benchmarks/conv_ab.py --zoo resnet50/layer3.1.conv1 [--zoo KEY ...] [same options]
    python benchmarks/conv_ab.py --spec conv2d:C=3,H=160,W=160,K=32,R=3,S=3,stride=2,pad=1 [...]

Every conv task of the model (as ``extract_tasks`` finds them: weights constant, as a compiled
model runs them; fed the model's own weights and random activations) is built with the design
space's default at git revision ``--base`` (``conv.py`` and ``conv_tiles.py`` as they were there,
loaded beside the current ones) and with today's default, both through today's ``build``, so an old
default that is no longer a point of the space fails loudly. ``--config`` (repeatable) adds a
contender: today's default with those knobs overridden. Each kernel is checked against NumPy, then
all are timed in interleaved rounds (``common.rounds_of``: the C harness, weights packed once,
operands copied to fresh memory for each block of calls: with one placement each, two builds of the
same config ran up to 1.27x apart) and each layer prints the medians and the paired new/old ratio.
Layers whose two defaults agree are listed, not timed (``--all``: timed too). ``--ort`` adds ONNX
Runtime running the same fused nodes as a one-group model, with its per-call Python overhead (a few
microseconds) and its NCHWc reorders in and out (which it skips between convs inside a model): a
bound, not its in-model time (``profile_model.py`` has that).

``--zoo`` (repeatable) times layers of ``tensortune.workload.zoo`` instead (the models suite's
rows: weights constant, random values; ``--spec``, repeatable, any conv2d spec the same way),
``--ort`` then being ONNX Runtime as ``tune_suite.py`` runs it (``peers_for``); the weighted
sums count each layer once.
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
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common
from models import ort_session
from peers import peers_for
from torch_models import MODELS, build, export_onnx

import tensortune as tt
from tensortune.graph import from_onnx
from tensortune.graph.tasks import Lowered, lower_graph
from tensortune.memory import aligned
from tensortune.space.registry import design_space
from tensortune.target import Target
from tensortune.workload import zoo

ROOT = Path(__file__).resolve().parent.parent


def conv_module_at(rev: str) -> types.ModuleType:
    """``tensortune/space/conv.py`` as it was at ``rev``, imported beside today's, with the
    ``conv_tiles.py`` of ``rev`` (where it had one) as its default tiles."""
    tiles = _module_at(rev, "conv_tiles") if _source_at(rev, "conv_tiles") else None
    today = sys.modules.get("tensortune.space.conv_tiles")
    if tiles is not None:
        sys.modules["tensortune.space.conv_tiles"] = tiles
    try:
        return _module_at(rev, "conv")
    finally:
        if today is not None:
            sys.modules["tensortune.space.conv_tiles"] = today


def _source_at(rev: str, name: str) -> str | None:
    """``tensortune/space/<name>.py`` at ``rev``, or None where it did not exist."""
    shown = subprocess.run(
        ["git", "show", f"{rev}:tensortune/space/{name}.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    return shown.stdout if shown.returncode == 0 else None


def _module_at(rev: str, name: str) -> types.ModuleType:
    source = _source_at(rev, name)
    if source is None:
        raise SystemExit(f"tensortune/space/{name}.py does not exist at {rev}")
    spec = importlib.util.spec_from_loader(f"tensortune.space._{name}_base", loader=None)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    module.__package__ = "tensortune.space"
    exec(compile(source, f"{rev}:{name}.py", "exec"), module.__dict__)
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
    parser.add_argument(
        "--zoo", action="append", default=[], help="a zoo layer (network/layer) instead of --model"
    )
    parser.add_argument(
        "--spec", action="append", default=[], help="a conv2d workload spec instead of --model"
    )
    args = parser.parse_args()
    if args.rounds < 2:
        parser.error(f"--rounds must be at least 2 (a ratio's noise needs two), got {args.rounds}")
    common.limit_threads(args.threads)
    target = Target.detect(num_threads=args.threads)
    old_conv = conv_module_at(args.base)
    extra = [json.loads(text) for text in args.config]
    totals: dict[str, float] = {}
    for wl, weight, values, ort in _layers(args):
        if args.only and not re.search(args.only, wl.name):
            continue
        ds = design_space(wl, target)
        configs = {"old": old_conv.conv_space(wl, target).default, "new": ds.default}
        for k, knobs in enumerate(extra):
            if ds.space.is_valid({**ds.default, **knobs}):  # else that contender sits out
                configs[f"cfg{k}"] = {**ds.default, **knobs}
        label = f"{wl.name.split('|')[0][6:]:44s} x{weight}"
        if configs["old"] == configs["new"] and not extra and not args.all:
            print(f"{label}  same default")
            continue
        want = wl.reference(values)
        contenders = []
        for name, config in configs.items():
            kernel = tt.compile(wl, schedule=ds.schedule(config), target=target)
            fed = common.feeds(kernel, wl, values)
            got = kernel(*fed)
            common.check(f"{wl.name} [{name}]", got, want)
            timer = common.kernel_timer(kernel, [*fed, got], fresh_placement=True)
            contenders.append(common.Contender(name, lambda: None, timer))
        if args.ort:
            run = ort()
            common.check(f"{wl.name} [ort]", common.as_array(run()), want, rtol=1e-3)
            contenders.append(common.Contender("ort", run))
        times = common.rounds_of(contenders, rounds=args.rounds)
        us = {n: statistics.median(t) * 1e6 for n, t in times.items()}
        gflops = "  ".join(f"{n} {wl.flops / v / 1e3:6.1f}" for n, v in us.items())
        for n, v in us.items():
            totals[n] = totals.get(n, 0.0) + v * weight
        cells = "  ".join(f"{n} {v:8.1f}" for n, v in us.items())
        ratios = "  ".join(
            f"{n}/old {common.paired_ratio(times, n, 'old'):.2f}" for n in us if n != "old"
        )
        print(f"{label}  {cells} us  {ratios} (+-{common.noise(times, 'new', 'old'):.0%})")
        print(f"    GFLOP/s  {gflops}")
        for n, config in configs.items():
            print(f"    {n} {config}", flush=True)
    print("weighted sums (us): " + "  ".join(f"{n} {v:.0f}" for n, v in totals.items()))


def _layers(args: argparse.Namespace) -> Iterator[tuple[Any, int, list[Any], Callable[[], Any]]]:
    """(workload, times the model runs it, input values, a maker of ONNX Runtime's call) per
    conv task of ``--model``, or per ``--zoo`` layer."""
    if args.zoo or args.spec:
        print(f"layers: {args.zoo + args.spec}, {args.threads} threads, base {args.base}")
        layers = zoo.by_key()
        chosen = [layers[key] for key in args.zoo] + [zoo.Layer("", "", s) for s in args.spec]
        for layer in chosen:
            wl = layer.workload()
            values = wl.random_inputs(0)
            yield wl, 1, values, lambda w=wl, v=values: peers_for(w, v, args.threads)["onnxruntime"]
        return
    module, inputs = build(args.model)
    graph, steps = lower_graph(from_onnx(export_onnx(module, inputs, "torchscript")))
    seen: dict[str, int] = {}
    layers_: list[Lowered] = []
    for step in steps:
        if isinstance(step, Lowered) and step.workload.op == "conv2d":
            if step.workload.name not in seen:
                layers_.append(step)
            seen[step.workload.name] = seen.get(step.workload.name, 0) + 1
    print(f"{args.model}: {len(layers_)} conv tasks, {args.threads} threads, base {args.base}")
    for step in layers_:
        yield (
            step.workload,
            seen[step.workload.name],
            layer_inputs(graph, step),
            _ort_call(graph, step, args.threads),
        )


def _ort_call(graph: Any, step: Lowered, threads: int) -> Callable[[], Callable[[], Any]]:
    """A maker of ONNX Runtime's call on ``step``'s fused nodes, fed the layer's inputs."""

    def make() -> Callable[[], Any]:
        session, names = ort_group(graph, step, threads)
        values = layer_inputs(graph, step)
        inputs = zip(step.workload.inputs, values, strict=True)
        by_value = {step.bindings[t.name].value: a for t, a in inputs}
        feed = {n: by_value[n] for n in names}
        return lambda: session.run(None, feed)[0]

    return make


if __name__ == "__main__":
    main()
