"""Compiled models pack their weights once, at load: each kernel's packing stage runs in
``<model>_prepack``, the per-call kernels read the packed copies, and the outputs still match
ONNX Runtime (and the model compiled without prepacking)."""

from __future__ import annotations

import re

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the graph tests need the optional onnx package")
pytest.importorskip("onnxruntime", reason="the graph tests compare against onnxruntime")

from tensortune.graph import compile_model, extract_tasks, from_onnx  # noqa: E402
from tensortune.graph.tasks import Lowered, lower_graph  # noqa: E402
from tensortune.space.registry import design_space  # noqa: E402
from tensortune.tuning.candidates import prepare  # noqa: E402
from tensortune.tuning.measuring import measuring_here  # noqa: E402
from tensortune.workload import CONSTANTS_MARK  # noqa: E402

from . import builders  # noqa: E402
from .builders import TOLERANCE  # noqa: E402

MODELS = {
    "resnet_block": builders.resnet_block,
    "inverted_residual": builders.inverted_residual,
    "encoder_layer": lambda: builders.encoder_layer(seq=16),  # rows enough to pack B
    "dqn": builders.dqn,
    "twin_convs": builders.twin_convs,
}
PACK_STORE = re.compile(r"(store\w*\(&\w+_pack\[|\b\w+_pack\[[^\]]*\] =)")


def _run_function(unit) -> str:
    start = unit.source.index(f"int {unit.name}(")
    return unit.source[start : unit.source.index("\n}\n", start)]


def _packing(compiled) -> list[str]:
    """The kernels whose per-call function fills a packed buffer."""
    return [u.name for u in compiled.kernels.values() if PACK_STORE.search(_run_function(u))]


def _relative_error(got: np.ndarray, want: np.ndarray) -> float:
    return float(np.abs(got - want).max() / max(np.abs(want).max(), 1e-6))


@pytest.mark.parametrize("which", sorted(MODELS))
def test_prepacked_model_matches_onnxruntime(target, which):
    model = MODELS[which]()
    g = from_onnx(model)
    rng = np.random.default_rng(0)
    feeds = {v.name: rng.standard_normal(v.shape).astype(v.dtype) for v in g.inputs}
    want = builders.run_ort(model, feeds)
    packed = compile_model(g, target=target)
    plain = compile_model(g, target=target, prepack=False)
    for compiled in (packed, plain):
        got = compiled.run(feeds)
        for info, value in zip(g.outputs, want, strict=True):
            assert _relative_error(got[info.name], value) < TOLERANCE, info.name
    assert plain.sizes.packed == 0 and not any(u.prepack for u in plain.kernels.values())
    prepacking = [u for u in packed.kernels.values() if u.prepack]
    if which != "inverted_residual":  # depthwise and 1x1 convs over 8 channels pack nothing
        assert prepacking and packed.sizes.packed > 0
    for unit in prepacking:
        assert not PACK_STORE.search(_run_function(unit)), f"{unit.name} still packs"
        assert f"{unit.name}_prepack(" in packed.entry
    # without prepacking the same kernels pack their weights on every call; activations (the
    # attention's batch matmuls) are packed per call either way
    assert len(_packing(plain)) == len(_packing(packed)) + len(prepacking)


def test_a_shared_kernel_packs_each_layers_weights(target):
    compiled = compile_model(builders.twin_convs(), target=target, name="twins")
    assert len(compiled.steps) == 3 and len(compiled.kernels) == 1
    (unit,) = compiled.kernels.values()
    assert unit.prepack, "the conv's weights should be packed once"
    assert compiled.entry.count(f"{unit.name}_prepack(") == 4  # prototype + one per layer
    calls = [line for line in compiled.entry.splitlines() if f"= {unit.name}(" in line]
    assert len({line.split("(", 2)[2] for line in calls}) == 3  # three distinct packed copies


def test_tasks_declare_constant_the_weights_the_model_packs(target):
    """One rule: a task's workload has the placeholders bound to weights as constants, the
    same inputs compile_model packs once; without prepacking, no constants."""
    g = from_onnx(builders.resnet_block())
    tasks = extract_tasks(g)
    graph, plan = lower_graph(g)
    for step in plan:
        if isinstance(step, Lowered):
            bound = [k for k, b in step.bindings.items() if b.value in graph.initializers]
            assert step.workload.constants == tuple(bound)
    convs = [t.workload for t in tasks if t.workload.op == "conv2d"]
    assert convs and all(wl.constants for wl in convs)
    for wl in convs:
        assert wl.name.endswith(CONSTANTS_MARK + ",".join(wl.constants))
    compiled = compile_model(g, target=target)
    for task, unit in zip(tasks, compiled.kernels.values(), strict=True):  # first-use order
        packed_from = {a.name for a in unit.prepack if a.role == "input"}
        assert packed_from <= set(task.workload.constants), unit.name
    _, unpacked = lower_graph(g, constants=False)
    assert not any(s.workload.constants for s in unpacked if isinstance(s, Lowered))


def test_a_tasks_candidate_is_measured_with_its_weights_packed_once(target):
    (task, *_) = extract_tasks(from_onnx(builders.resnet_block()))
    ds = design_space(task.workload, target)
    _, _, entry = prepare(ds, ds.default, target)
    assert entry.prepack is not None, "the block's 3x3 conv should pack its weights"
    results = []
    with measuring_here(ds, target, 20.0, 0, with_baseline=True) as measure:
        measure([ds.default], lambda i, trace, res: results.append(res))
    (result,) = results
    assert result.ok, result.error_msg  # checked against NumPy, then timed beside the default
    assert result.ratio is not None
