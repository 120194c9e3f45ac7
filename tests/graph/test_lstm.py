"""LSTM import: a 2-layer LSTM language-model core (embedding, two stacked LSTMs with initial
states, a decoder) unrolled over its sequence, compiled and checked against ONNX Runtime."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the graph tests need the optional onnx package")
pytest.importorskip("onnxruntime", reason="the graph tests compare against onnxruntime")

from onnx import TensorProto, helper  # noqa: E402

from tensortune.graph import ModelError, compile_model, from_onnx  # noqa: E402

from . import builders  # noqa: E402


def lstm_lm(seq: int = 4, batch: int = 2, vocab: int = 12, dim: int = 6, hidden: int = 8):
    b = builders.Builder(11)
    x = b.op("Gather", [b.weight(vocab, dim, scale=1.0), "ids"], axis=0)  # [seq, batch, dim]
    states = []
    for layer, width in enumerate((dim, hidden)):
        w, r = b.weight(1, 4 * hidden, width), b.weight(1, 4 * hidden, hidden)
        bias = b.weight(1, 8 * hidden, scale=0.1)
        inputs = [x, w, r, bias]
        if layer == 0:  # initial states on the first layer, zeros on the second
            inputs += ["", b.weight(1, batch, hidden, scale=0.5), b.weight(1, batch, hidden)]
        y, y_h, y_c = b.op("LSTM", inputs, outputs=3, hidden_size=hidden)
        x = b.op("Squeeze", [y, b.const(np.array([1], np.int64))])  # [seq, batch, hidden]
        states += [y_h, y_c]
    logits = b.op("Add", [b.op("MatMul", [x, b.weight(hidden, vocab)]), b.weight(vocab)])
    model = b.model({}, [logits, *states])
    model.graph.input.append(helper.make_tensor_value_info("ids", TensorProto.INT64, [seq, batch]))
    return model


def test_two_layer_lstm_matches_onnxruntime(target):
    model = lstm_lm()
    ids = np.random.default_rng(0).integers(0, 12, (4, 2)).astype(np.int64)
    compiled = compile_model(from_onnx(model), target=target)
    ours = compiled.run({"ids": ids})
    for info, want in zip(compiled.outputs, builders.run_ort(model, {"ids": ids}), strict=True):
        got = ours[info.name]
        assert got.shape == want.shape
        assert np.abs(got - want).max() / np.abs(want).max() < 1e-4, info.name
    with pytest.raises(ModelError, match="beyond int32"):  # narrowed in the C entry point
        compiled.run({"ids": ids + 2**40})


def test_unsupported_lstm_forms_are_named():
    model = lstm_lm()
    lstm = next(n for n in model.graph.node if n.op_type == "LSTM")
    lstm.attribute.append(helper.make_attribute("layout", 1))
    with pytest.raises(ModelError, match=r"unsupported LSTM node .*layout=1"):
        from_onnx(model)
