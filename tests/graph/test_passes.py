"""Shape inference, constant folding, batch-norm folding, Identity/Dropout removal, fusion."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the graph tests need the optional onnx package")
pytest.importorskip("onnxruntime", reason="the graph tests compare against onnxruntime")

from tensortune.graph import extract_tasks, from_onnx, fuse, optimize  # noqa: E402
from tensortune.graph.shapes import infer_node, propagate  # noqa: E402

from . import builders  # noqa: E402

MODELS = [
    builders.resnet_block,
    builders.inverted_residual,
    builders.classifier_head,
    builders.encoder_layer,
    builders.op_zoo,
    builders.conv_gemm,
]


def _inputs(graph, seed=0):
    rng = np.random.default_rng(seed)
    return {v.name: rng.standard_normal(v.shape).astype(v.dtype) for v in graph.inputs}


@pytest.mark.parametrize("build", MODELS, ids=lambda f: f.__name__)
def test_inferred_shapes_match_onnxruntime(build):
    """Our own inference (not onnx.shape_inference) gives every value ORT computes."""
    model = build()
    g = from_onnx(model)
    feeds = _inputs(g)
    theirs = builders.run_ort(model, feeds)
    ours = g.reference(feeds)
    for info, value in zip(g.outputs, theirs, strict=True):
        assert info.shape == value.shape and info.dtype == value.dtype.name
        scale = max(1.0, float(np.abs(value).max()))
        assert np.abs(ours[info.name] - value).max() / scale < 1e-5


def test_shape_rules_agree_with_reference_semantics():
    """For every node of every model, the explicit rule equals the NumPy result's shape."""
    for build in MODELS:
        g = from_onnx(build())
        known, consts = propagate(g)
        env = {**g.initializers, **_inputs(g)}
        for node in g.nodes:
            from tensortune.graph.reference import run_node

            outs = run_node(node, [env[i] if i else None for i in node.inputs])
            rule = infer_node(node, known, consts)
            for name, value, (shape, dtype) in zip(node.outputs, outs, rule, strict=False):
                env[name] = value
                assert (tuple(value.shape), value.dtype.name) == (shape, dtype), node.name


@pytest.mark.parametrize("build", MODELS, ids=lambda f: f.__name__)
def test_optimize_preserves_results(build):
    g = from_onnx(build())
    feeds = _inputs(g)
    before, after = g.reference(feeds), optimize(g).reference(feeds)
    for name, value in before.items():
        np.testing.assert_allclose(after[name], value, rtol=1e-4, atol=1e-5)


def test_shape_chains_fold_to_constants():
    g = optimize(from_onnx(builders.encoder_layer()))
    ops = {n.op for n in g.nodes}
    assert not ops & {"Shape", "Gather", "Concat", "Unsqueeze", "Identity", "Dropout"}
    reshapes = [n for n in g.nodes if n.op == "Reshape"]
    assert reshapes and all(n.inputs[1] in g.initializers for n in reshapes)


def test_batchnorm_folds_into_conv_weights():
    g = optimize(from_onnx(builders.resnet_block()))
    assert [n.op for n in g.nodes] == ["Conv", "Relu", "Conv", "Add", "Relu"]
    assert all(len(n.inputs) == 3 for n in g.nodes if n.op == "Conv")  # a bias appeared


def test_batchnorm_elsewhere_becomes_multiply_add():
    g = optimize(from_onnx(builders.conv_gemm()))
    ops = [n.op for n in g.nodes]
    assert "BatchNormalization" not in ops and "Mul" in ops and "Add" in ops


def test_fusion_groups():
    def kinds(build):
        g = optimize(from_onnx(build()))
        return ["+".join(n.op for n in grp.nodes) for grp in fuse(g)]

    assert kinds(builders.resnet_block) == ["Conv+Relu", "Conv+Add+Relu"]
    assert kinds(builders.inverted_residual) == ["Conv+Clip", "Conv+Clip", "Conv"]
    encoder = kinds(builders.encoder_layer)
    assert "MatMul+Add+Div+Erf+Add+Mul+Mul" in encoder  # the erf GELU inlined
    assert "MatMul+Add+Add" in encoder  # bias + residual epilogue
    assert "Softmax" in encoder and "LayerNormalization" in encoder  # kept whole


def test_fusion_keeps_values_read_elsewhere():
    """An intermediate read outside its group ends the group there (one output per kernel)."""
    b = builders.Builder()
    conv = b.conv("x", 4, 4, 3, bias=True, pads=[1, 1, 1, 1])
    relu = b.op("Relu", [conv])
    sig = b.op("Sigmoid", [relu])
    other = b.op("MaxPool", [relu], kernel_shape=[1, 1])
    out = b.op("Add", [sig, other])
    g = optimize(from_onnx(b.model({"x": (1, 4, 5, 5)}, [out])))
    groups = fuse(g)
    assert ["+".join(n.op for n in grp.nodes) for grp in groups] == [
        "Conv+Relu", "Sigmoid", "MaxPool+Add"
    ]  # fmt: skip


def test_extract_tasks_deduplicates():
    tasks = extract_tasks(from_onnx(builders.twin_convs()))
    assert [t.weight for t in tasks] == [3]
    assert tasks[0].workload.op == "conv2d" and tasks[0].flops > 0
    encoder = extract_tasks(from_onnx(builders.encoder_layer()))
    weights = {t.workload.name.split(":")[1]: t.weight for t in encoder}
    assert weights["MatMul+Add"] == 3  # the Q, K and V projections: one kernel
    assert weights["LayerNormalization"] == 2
    assert sum(t.weight for t in encoder) == 15


def test_conv_tasks_of_a_model_with_inputs_past_half_of_l2_get_a_design_space() -> None:
    """The default's input-channel blocks are sized from the conv's input planes: a model's conv
    task (``graph:Conv...``) has no C, H, W parameters to read them from, and must not fail."""
    from tensortune.space import design_space
    from tensortune.target import Target

    target = Target.cross("avx2")
    tasks = extract_tasks(from_onnx(builders.resnet_block(c=512, hw=14)))
    convs = [t for t in tasks if "Conv" in t.workload.name]
    assert convs
    for task in convs:
        ds = design_space(task.workload, target)
        assert ds.space.is_valid(ds.default)
