"""benchmarks/tune_suite.py --suite models: 40+ layers of real networks spanning the op classes."""

import importlib.util
import sys
from pathlib import Path

import pytest

import tensortune as tt
from tensortune.workload import zoo

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture(scope="module")
def tune_suite():
    spec = importlib.util.spec_from_file_location("tune_suite", BENCHMARKS / "tune_suite.py")
    module = importlib.util.module_from_spec(spec)
    path = list(sys.path)
    try:
        spec.loader.exec_module(module)  # it puts benchmarks/ on sys.path for its helpers
    finally:
        sys.path[:] = path
    return module


def test_models_suite_spans_every_op_class_with_unround_shapes(tune_suite):
    rows = tune_suite.models_suite()
    assert len(rows) >= 40
    labels = [label for label, _ in rows]
    assert len(set(labels)) == len(labels)
    keyed = zoo.by_key()
    assert all(keyed[label].workload() == wl for label, wl in rows), "a row is not its zoo layer"
    workloads = [wl for _, wl in rows]
    assert set(tune_suite.OP_CLASSES) <= {tune_suite.op_class(wl) for wl in workloads}
    assert 2 * sum(not tune_suite.is_round(wl) for wl in workloads) >= len(rows)


def test_the_suite_check_rejects_a_suite_without_some_op_class(tune_suite, monkeypatch):
    no_pooling = [k for k in tune_suite.MODELS if not k.endswith(("maxpool1", "model.9.m"))]
    monkeypatch.setattr(tune_suite, "MODELS", no_pooling)
    with pytest.raises(AssertionError, match="missing \\['pooling'\\]"):
        tune_suite.models_suite()


def test_standard_suite_rows_are_labelled_by_their_specs(tune_suite):
    rows = tune_suite.SUITES["standard"]()
    assert rows == [(spec, tt.workload(spec)) for spec in tune_suite.SUITE]
    assert not any(wl.constants for _, wl in rows)


def test_models_suite_layers_keep_their_weights_constant(tune_suite):
    rows = dict(tune_suite.models_suite())
    assert rows["resnet50/fc"].constants == ("W",)
    assert rows["gpt2_small/h.0.mlp.c_fc@decode257"].constants == ("B", "bias")
    assert rows["vit_b16/encoder.layers.encoder_layer_0.mlp.3"].constants == ("W",)
    assert rows["vit_b16/encoder.layers.encoder_layer_0.self_attention.softmax"].constants == ()
    attention = "vit_b16/encoder.layers.encoder_layer_0.self_attention.matmul(q,k^T)"
    assert rows[attention].constants == ()  # both operands are activations


def test_models_bars_apply_to_every_row_and_attention_against_pytorch(tune_suite):
    bars = tune_suite.MODEL_BARS
    assert tune_suite.bar_for("batch_matmul:B=12,M=197,N=197,K=64", bars) == ("pytorch", 1.0)
    assert tune_suite.bar_for("conv2d:C=3,H=9,W=9,K=4,R=3,S=3", bars) == ("best peer", 0.85)
    assert tune_suite.bar_for("softmax:rows=3,cols=4") == ("pytorch", 1.1)  # standard's own
