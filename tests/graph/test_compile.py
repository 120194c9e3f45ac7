"""Compiled models against ONNX Runtime, fused kernels, deduplicated builds, run-time errors."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the graph tests need the optional onnx package")
pytest.importorskip("onnxruntime", reason="the graph tests compare against onnxruntime")

from tensortune.graph import ModelError, compile_model, from_onnx  # noqa: E402

from . import builders  # noqa: E402
from .builders import check_against_ort as _check  # noqa: E402


def test_resnet_block(target):
    compiled = _check(builders.resnet_block(), target)
    assert len(compiled.steps) == 2  # conv+bn+relu, conv+bn+add+relu
    epilogue = compiled.steps[1].unit.source
    assert "fmax" in epilogue or "max" in epilogue  # the ReLU is in the conv kernel's C


def test_mobilenet_inverted_residual(target):
    compiled = _check(builders.inverted_residual(), target, layout="NCHW")
    assert len(compiled.steps) == 3
    nhwc = _check(builders.inverted_residual(), target, layout="NHWC")
    assert len(nhwc.steps) == 5  # the same three, a transpose in and one out


def test_classifier_head(target):
    _check(builders.classifier_head(), target)


def test_transformer_encoder_layer(target):
    compiled = _check(builders.encoder_layer(), target)
    assert len(compiled.kernels) < len(compiled.steps)  # Q/K/V share one kernel


def test_op_zoo(target):
    _check(builders.op_zoo(), target)


def test_conv_gemm(target):
    _check(builders.conv_gemm(), target)


def test_identical_kernels_built_once(target):
    compiled = _check(builders.twin_convs(), target)
    assert len(compiled.steps) == 3 and len(compiled.kernels) == 1


def test_single_input_call_and_errors(target):
    compiled = compile_model(builders.classifier_head(), target=target)
    x = np.random.default_rng(0).standard_normal((1, 16, 4, 4)).astype(np.float32)
    y = compiled(x)
    assert y.shape == (1, 10)
    np.testing.assert_array_equal(compiled(x), y)  # repeatable
    other = compiled(2 * x)  # each call's output is an array of its own
    assert other is not y and not np.shares_memory(other, y)
    np.testing.assert_array_equal(compiled(x), y)
    with pytest.raises(ModelError, match=r"input 'x' must be \(1, 16, 4, 4\) float32"):
        compiled(x[:, :8])
    with pytest.raises(ModelError, match="float32, got"):
        compiled(x.astype(np.float64))
    with pytest.raises(ModelError, match=r"missing \['x'\]"):
        compiled.run({})
    with pytest.raises(ModelError, match=r"unknown \['y'\]"):
        compiled.run({"x": x, "y": x})


def test_call_with_a_mapping(target):
    compiled = compile_model(builders.classifier_head(), target=target)
    x = np.random.default_rng(1).standard_normal((1, 16, 4, 4)).astype(np.float32)
    out = compiled({"x": x})
    assert list(out) == [compiled.outputs[0].name]
    np.testing.assert_array_equal(out[compiled.outputs[0].name], compiled(x))


def test_gelu_op_and_embedding_gather(target):
    """Opset 20's Gelu (both forms) and a Gather of runtime int64 ids (an embedding)."""
    from onnx import TensorProto, helper

    b = builders.Builder(8)
    table = b.weight(10, 6, scale=1.0)
    emb = b.op("Gather", [table, "ids"], axis=0)
    exact = b.op("Gelu", [emb])
    approx = b.op("Gelu", [b.op("Exp", [emb])], approximate="tanh")
    out = b.op("Add", [b.op("Reciprocal", [b.op("Add", [approx, b.const(np.float32(1))])]), exact])
    model = b.model({}, [out], opset=20)
    model.graph.input.append(helper.make_tensor_value_info("ids", TensorProto.INT64, [2, 3]))
    g = from_onnx(model)
    ids = np.array([[0, 9, 3], [3, 5, 1]], np.int64)
    compiled = compile_model(g, target=target)
    theirs = builders.run_ort(model, {"ids": ids})[0]
    ours = compiled(ids)
    assert ours.shape == (2, 3, 6)
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-5)


def test_symbolic_model_compiles_with_shapes(target, tmp_path):
    b = builders.Builder(9)
    y = b.op("Relu", [b.op("MatMul", ["x", b.weight(4, 3)])])
    model = b.model({"x": ("batch", "seq", 4)}, [y])
    path = tmp_path / "dyn.onnx"
    onnx.save(model, path)
    with pytest.raises(ModelError, match="symbolic"):
        compile_model(str(path), target=target)
    compiled = compile_model(str(path), target=target, shapes={"x": (2, 5, 4)})
    x = np.random.default_rng(0).standard_normal((2, 5, 4)).astype(np.float32)
    np.testing.assert_allclose(compiled(x), builders.run_ort(model, {"x": x})[0], rtol=1e-5)


def test_decomposed_layernorm_silu_and_middle_axis_softmax(target):
    _check(builders.decomposed_norms(), target)


def test_memory_plan_reuses_the_arena(target):
    """Deep chains reuse bytes; a step's output never overlaps what it reads (restrict)."""
    compiled = _check(builders.encoder_layer(), target)
    plan = compiled.memory
    assert 0 < plan.size < plan.unplanned

    def span(value):
        place = compiled.places[value]
        info = compiled.graph.values[value]
        return place.offset, place.offset + info.size * 4

    for call in compiled.steps:
        *inputs, out = call.values
        lo, hi = span(out)
        assert compiled.places[out].region == "arena" and lo % 64 == 0
        for value in inputs:
            if compiled.places[value].region == "arena":
                a, b = span(value)
                assert b <= lo or hi <= a, f"{out} overlaps {value}"
