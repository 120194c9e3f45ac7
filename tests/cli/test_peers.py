"""The peers a workload is compared with: each computes the workload's result, and ONNX Runtime
gets a workload's constant inputs as initializers (which it packs once, as our kernel does)."""

import importlib.util

import numpy as np
import pytest

import tensortune as tt
from tensortune.cli.peers import peers_for

pytest.importorskip("onnxruntime")


@pytest.mark.parametrize("constants", [(), ("W",)])
def test_onnxruntime_computes_the_conv_with_or_without_constant_weights(constants):
    wl = tt.workload("conv2d:C=5,H=9,W=9,K=7,R=3,S=3,pad=1").with_constants(constants)
    inputs = wl.random_inputs(0)
    run = peers_for(wl, inputs, threads=1)["onnxruntime"]
    np.testing.assert_allclose(run(), wl.reference(inputs), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    "spec, constants",
    [
        ("dense:M=3,N=5,K=4", ["W"]),
        ("dense:M=1,N=6,K=4,epilogue=bias+gelu", ["W", "bias"]),
        ("matmul:M=3,N=5,K=4,epilogue=relu", []),
        ("batch_matmul:B=2,M=3,N=5,K=4,epilogue=bias+relu", []),
        ("conv2d:C=5,H=9,W=9,K=7,R=3,S=3,pad=1,epilogue=bias+gelu", ["W", "bias"]),
    ],
)
def test_peers_run_dense_layers_and_fused_epilogues(spec, constants):
    """The GEMM rows of the models suite (dense on [N, K] weights, bias and activation after)
    have ONNX Runtime (and PyTorch, where installed) beside them, each computing the result."""
    wl = tt.workload(spec).with_constants(constants)
    inputs = wl.random_inputs(0)
    peers = peers_for(wl, inputs, threads=1)
    assert "onnxruntime" in peers
    assert ("pytorch" in peers) == (importlib.util.find_spec("torch") is not None)
    for run in peers.values():
        np.testing.assert_allclose(np.asarray(run()), wl.reference(inputs), rtol=1e-4, atol=1e-4)


def test_constant_weights_are_initializers_not_feeds(monkeypatch):
    import onnxruntime as ort

    seen = {}
    real = ort.InferenceSession

    def spy(model_bytes, *args, **kwargs):
        session = real(model_bytes, *args, **kwargs)
        seen["inputs"] = [i.name for i in session.get_inputs()]
        return session

    monkeypatch.setattr(ort, "InferenceSession", spy)
    wl = tt.workload("matmul:M=3,N=5,K=4").with_constants(["B"])
    peers_for(wl, wl.random_inputs(0), threads=1)
    assert seen["inputs"] == ["in0"]
