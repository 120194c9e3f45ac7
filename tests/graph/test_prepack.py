"""Compiled models pack their weights once, at load: each kernel's packing stage runs in
``<model>_prepack``, the per-call kernels read the packed copies, and the outputs still match
ONNX Runtime (and the model compiled without prepacking)."""

from __future__ import annotations

import re

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the graph tests need the optional onnx package")
pytest.importorskip("onnxruntime", reason="the graph tests compare against onnxruntime")

from tensortune.graph import compile_model, from_onnx  # noqa: E402

from . import builders  # noqa: E402
from .test_compile import TOLERANCE  # noqa: E402

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
