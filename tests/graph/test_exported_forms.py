"""Forms torch's exporters emit (found exporting real models with both of them), built here with
onnx.helper so CI covers them without torch: causal masks (Trilu), ReduceSum/Max/Min and
LogSoftmax, an int64 attention mask viewed before its Cast, values named like the locals of the
generated C entry point, an unrolled LSTM step's gate slices fused into its state update, and
Linear's [N, K] weights stored transposed once."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the graph tests need the optional onnx package")
pytest.importorskip("onnxruntime", reason="the graph tests compare against onnxruntime")

from onnx import TensorProto, helper  # noqa: E402

from tensortune.graph import (  # noqa: E402
    ModelError,
    compile_model,
    extract_tasks,
    from_onnx,
    optimize,
)

from . import builders  # noqa: E402
from .builders import check_against_ort  # noqa: E402


def test_trilu_on_activations_and_as_a_folded_causal_mask(target):
    """torch.tril/triu: on a tensor computed at run time (a kernel) and on a constant (a
    causal mask ``ones(n, n).tril()`` folded away at compile time, then a masked Softmax)."""
    b = builders.Builder(20)
    upper = b.op("Trilu", ["x", b.const(np.array(1, np.int64))])
    lower = b.op("Trilu", ["x", b.const(np.array(-1, np.int64))], upper=0)
    causal = b.op("Cast", [b.op("Trilu", [b.const(np.ones((5, 5), np.float32))], upper=0)], to=9)
    masked = b.op("Where", [causal, "x", b.const(np.float32(-np.inf))])
    probs = b.op("Softmax", [masked], axis=-1)
    model = b.model({"x": (1, 2, 5, 5)}, [upper, lower, probs])
    check_against_ort(model, target)
    kept = [n.op for n in optimize(from_onnx(model)).nodes].count("Trilu")
    assert kept == 2  # the mask's Trilu is a constant now


@pytest.mark.parametrize("opset", [13, 18])
def test_reductions_and_log_softmax(target, opset):
    """ReduceSum (axes an input), ReduceMax / ReduceMin (axes an attribute before opset 18,
    an input from 18) and LogSoftmax over the last and a middle axis, on logits wide enough
    that softmax underflows to 0 (its log would be -inf; LogSoftmax's is finite)."""
    b = builders.Builder(21)

    def axes(op: str, values: list[int], **attrs):
        if op == "ReduceSum" or opset >= 18:
            return b.op(op, ["x", b.const(np.array(values, np.int64))], **attrs)
        return b.op(op, ["x"], axes=values, **attrs)

    total = axes("ReduceSum", [1], keepdims=0)
    top = axes("ReduceMax", [-1])
    bottom = axes("ReduceMin", [0, 2], keepdims=0)
    wide = b.op("Mul", ["x", b.const(np.float32(60.0))])
    last = b.op("LogSoftmax", [wide], axis=-1)
    middle = b.op("LogSoftmax", [wide], axis=1)
    model = b.model({"x": (2, 3, 7)}, [total, top, bottom, last, middle], opset=opset)
    check_against_ort(model, target)


def test_int64_mask_viewed_before_its_cast(target):
    """An int64 attention mask Unsqueezed (a view: no kernel) and then Cast: the view must read
    the int32 copy the entry point narrows the input into, not the int64 input itself."""
    b = builders.Builder(22)
    ids = b.op("Unsqueeze", ["mask", b.const(np.array([1], np.int64))])  # [1, 1, 6]
    keep = b.op("Cast", [ids], to=TensorProto.FLOAT)
    bias = b.op("Mul", [b.op("Sub", [b.const(np.float32(1.0)), keep]), b.const(np.float32(-1e4))])
    out = b.op("Softmax", [b.op("Add", ["x", bias])], axis=-1)
    model = b.model({"x": (1, 6, 6)}, [out])
    model.graph.input.append(helper.make_tensor_value_info("mask", TensorProto.INT64, [1, 6]))
    x = np.random.default_rng(0).standard_normal((1, 6, 6)).astype(np.float32)
    mask = np.array([[1, 1, 1, 1, 0, 0]], np.int64)
    compiled = check_against_ort(model, target, feeds={"x": x, "mask": mask})
    with pytest.raises(ModelError, match="beyond int32"):
        compiled.run({"x": x, "mask": mask + 2**40})


def test_values_named_like_the_entry_points_locals(target):
    """Weights named ``w`` and ``m`` and a value named ``v`` (torch names parameters freely):
    the entry point's C locals get other names."""
    b = builders.Builder(23)
    b.const(b.rng.standard_normal((8, 8)).astype(np.float32), "w")
    b.const(b.rng.standard_normal(8).astype(np.float32), "m")
    b.nodes += [
        helper.make_node("MatMul", ["x", "w"], ["xw"]),
        helper.make_node("Add", ["xw", "m"], ["v"]),
        helper.make_node("Softmax", ["v"], ["i"], axis=-1),
    ]
    check_against_ort(b.model({"x": (4, 8)}, ["i"]), target)


@pytest.mark.parametrize("i_is_an_output, kernels", [(False, 2), (True, 3)])
def test_lstm_cell_gate_slices_fuse_into_the_state_update(target, i_is_an_output, kernels):
    """An LSTM step as the importer unrolls it: four gate slices of one [1, 4H] tensor, their
    activations, ``c = f * c0 + i * g`` and ``h = o * tanh(c)``: the c kernel and the h kernel
    read the slices in place (seven kernels before); a slice read elsewhere keeps its own."""
    hidden = 4
    b = builders.Builder(25)

    def gate(k: int, act: str) -> str:
        bounds = [b.const(np.array([v], np.int64)) for v in (k * hidden, (k + 1) * hidden, 1)]
        return b.op(act, [b.op("Slice", ["gates", *bounds])])

    i, o, f, g = gate(0, "Sigmoid"), gate(1, "Sigmoid"), gate(2, "Sigmoid"), gate(3, "Tanh")
    c = b.op("Add", [b.op("Mul", [i, g]), b.op("Mul", [f, "c0"])])
    h = b.op("Mul", [o, b.op("Tanh", [c])])
    outputs = [c, h, i] if i_is_an_output else [c, h]
    model = b.model({"gates": (1, 4 * hidden), "c0": (1, hidden)}, outputs)
    compiled = check_against_ort(model, target)
    assert len(compiled.steps) == kernels


def test_linear_weights_are_stored_transposed_once(target):
    """torch's Linear exports Gemm(transB=1) with [N, K] weights: stored [K, N] once and built
    from the matmul template, so a batch-1 row accumulates contiguous weight rows."""
    model = builders.classifier_head()  # 16 features, 10 classes
    gemm = next(n for n in optimize(from_onnx(model)).nodes if n.op == "Gemm")
    assert gemm.attr("transB") == 0 and gemm.inputs[1].endswith("/T")
    task = next(
        t for t in extract_tasks(from_onnx(model)) if t.workload.name.startswith("graph:Gemm")
    )
    assert task.workload.op == "matmul"
    check_against_ort(model, target)


def test_non_constant_trilu_diagonal_is_one_clear_error():
    b = builders.Builder(24)
    k = b.op("Cast", [b.op("ReduceMax", ["x"], keepdims=0)], to=TensorProto.INT64)
    model = b.model({"x": (3, 3)}, [b.op("Trilu", ["x", k])])
    with pytest.raises(ModelError, match=r"Trilu node .*k must be a constant"):
        compile_model(from_onnx(model))
