"""ONNX import: the IR, attributes that became inputs across opsets, and the clear errors."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the graph tests need the optional onnx package")
pytest.importorskip("onnxruntime", reason="the graph tests compare against onnxruntime")

from onnx import TensorProto, helper  # noqa: E402

from tensortune.errors import TensorTuneError  # noqa: E402
from tensortune.graph import ModelError, from_onnx  # noqa: E402

from . import builders  # noqa: E402


def test_import_builds_typed_ir():
    g = from_onnx(builders.resnet_block())
    assert [n.op for n in g.nodes] == [
        "Conv", "BatchNormalization", "Relu", "Conv", "BatchNormalization", "Add", "Relu"
    ]  # fmt: skip
    assert g.inputs[0].shape == (1, 8, 8, 8) and g.inputs[0].dtype == "float32"
    assert g.outputs[0].shape == (1, 8, 8, 8)
    assert all(n.outputs[0] in g.values for n in g.nodes)
    assert all(isinstance(a, np.ndarray) for a in g.initializers.values())


def test_import_from_path_and_bytes(tmp_path):
    model = builders.classifier_head()
    path = tmp_path / "head.onnx"
    onnx.save(model, path)
    for source in (path, str(path), model.SerializeToString()):
        assert from_onnx(source).outputs[0].shape == (1, 10)


@pytest.mark.parametrize("opset", [13, 17, 18, 21])
def test_attributes_that_became_inputs(opset):
    """Squeeze/Unsqueeze axes, ReduceMean axes, Split sizes and Clip bounds in either form."""
    b = builders.Builder(7)
    if opset >= 18:
        r = b.op("ReduceMean", ["x", b.const(np.array([1], np.int64))], keepdims=0)
    else:
        r = b.op("ReduceMean", ["x"], axes=[1], keepdims=0)
    u = b.op("Unsqueeze", [r, b.const(np.array([1], np.int64))])
    s = b.op("Squeeze", [u, b.const(np.array([1], np.int64))])
    parts = b.op("Split", [s, b.const(np.array([2, 4], np.int64))], outputs=2, axis=1)
    clip = b.op("Clip", [parts[1], b.const(np.float32(-0.2)), b.const(np.float32(0.3))])
    model = b.model({"x": (2, 3, 6)}, [parts[0], clip], opset=opset)
    g = from_onnx(model)
    x = np.random.default_rng(0).standard_normal((2, 3, 6)).astype(np.float32)
    for ours, theirs in zip(
        g.reference({"x": x}).values(), builders.run_ort(model, {"x": x}), strict=True
    ):
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)


def test_unsupported_operator_is_one_clear_error():
    b = builders.Builder()
    y = b.op("Einsum", ["x", "x"], equation="ij,ij->i")
    with pytest.raises(ModelError) as info:
        from_onnx(b.model({"x": (2, 3)}, [y]))
    message = str(info.value)
    assert "Einsum" in message and "Einsum2" in message  # the operator and its node name
    assert "supported operators" in message and "Conv" in message and "MatMul" in message
    assert isinstance(info.value, TensorTuneError)


def test_unsupported_attribute_names_it():
    b = builders.Builder()
    y = b.op("Relu", ["x"], bogus=3)
    with pytest.raises(ModelError, match="unsupported attribute bogus of Relu node"):
        from_onnx(b.model({"x": (2, 3)}, [y]))


def test_training_batchnorm_is_refused():
    b = builders.Builder()
    consts = [b.const(np.ones(3, np.float32)) for _ in range(4)]
    y = b.op("BatchNormalization", ["x", *consts], training_mode=1)
    with pytest.raises(ModelError, match="training"):
        from_onnx(b.model({"x": (1, 3, 2, 2)}, [y], opset=15))


@pytest.mark.parametrize("damage", ["truncated", "garbage", "empty"])
def test_corrupt_file_is_a_clear_error(tmp_path, damage):
    data = builders.resnet_block().SerializeToString()
    bad = {"truncated": data[: len(data) // 2], "garbage": b"\x08\xff" * 50, "empty": b""}[damage]
    path = tmp_path / "bad.onnx"
    path.write_bytes(bad)
    with pytest.raises(ModelError, match=r"corrupt|truncated|no graph"):
        from_onnx(path)


def test_missing_file():
    with pytest.raises(ModelError, match="no ONNX model file"):
        from_onnx("/nonexistent/model.onnx")


def test_symbolic_dims_need_shapes():
    b = builders.Builder()
    y = b.op("Relu", ["x"])
    model = b.model({"x": ("batch", 3, 4)}, [y])
    with pytest.raises(ModelError, match=r"symbolic dimensions.*shapes="):
        from_onnx(model)
    g = from_onnx(model, shapes={"x": (2, 3, 4)})
    assert g.outputs[0].shape == (2, 3, 4)
    with pytest.raises(ModelError, match="does not fit"):
        from_onnx(model, shapes={"x": (2, 5, 4)})
    with pytest.raises(ModelError, match="names no input"):
        from_onnx(model, shapes={"y": (2, 3, 4)})


def test_opset_outside_range():
    b = builders.Builder()
    y = b.op("Relu", ["x"])
    with pytest.raises(ModelError, match="opset 12"):
        from_onnx(b.model({"x": (2, 3)}, [y], opset=12))


def test_constant_nodes_become_initializers():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    nodes = [
        helper.make_node("Constant", [], ["c"], value_float=2.0),
        helper.make_node("Mul", ["x", "c"], ["y"]),
    ]
    model = helper.make_model(
        helper.make_graph(nodes, "g", [x], [y]), opset_imports=[helper.make_opsetid("", 17)]
    )
    g = from_onnx(model)
    assert [n.op for n in g.nodes] == ["Mul"] and float(g.initializers["c"]) == 2.0
    out = g.reference({"x": np.ones((2, 2), np.float32)})["y"]
    np.testing.assert_array_equal(out, np.full((2, 2), 2.0, np.float32))
