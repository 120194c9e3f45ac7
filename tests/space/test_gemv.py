"""GEMMs with a few rows (GEMV, decode attention): the default reads every operand with
contiguous vector loads, packing a constant weight matrix once when its columns are strided
(dense's W[N, K]), and computes what NumPy computes at odd sizes, with or without constants."""

from __future__ import annotations

import re

import numpy as np
import pytest

import tensortune as tt
from tensortune.pipeline import split_source
from tensortune.space.registry import design_space

SPECS = [
    "dense:M={m},N=37,K=29",
    "matmul:M={m},N=45,K=23",
    "batch_matmul:B=3,M={m},N=21,K=19",
]
CONSTANT = {"dense": ("W",), "matmul": ("B",), "batch_matmul": ()}


def _run(wl: tt.Workload, target: tt.Target, config: dict) -> np.ndarray:
    ds = design_space(wl, target)
    kernel = tt.compile(wl, schedule=ds.schedule(config), target=target, constants=wl.constants)
    inputs = wl.random_inputs(0)
    return kernel(*kernel.feeds({t.name: a for t, a in zip(wl.inputs, inputs, strict=True)}))


@pytest.mark.parametrize("spec", SPECS)
@pytest.mark.parametrize("m", [1, 2, 3, 5])
@pytest.mark.parametrize("constant", [False, True])
def test_few_row_defaults_match_numpy(spec: str, m: int, constant: bool, target) -> None:
    wl = tt.workload(spec.format(m=m))
    if constant:
        wl = wl.with_constants(CONSTANT[wl.op])
    ds = design_space(wl, target)
    got = _run(wl, target, ds.default)
    want = wl.reference(wl.random_inputs(0))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=str(ds.default))


@pytest.mark.parametrize("isa", ["avx512", "avx2"])
def test_one_row_dense_default_reads_packed_weight_panels(isa: str) -> None:
    """A one-row dense layer on constant W[N, K] reads W from panels packed once, one vector
    load per step of k: no lane-by-lane gather of a column of W."""
    target = tt.Target.cross(isa, num_threads=2)
    wl = tt.workload("dense:M=1,N=1000,K=2048").with_constants(["W"])
    ds = design_space(wl, target)
    assert ds.default["variant"] == "tile" and ds.default["pack_b"]
    source, _ = split_source(ds.schedule(ds.default), "dense", target, wl.constants)
    run = source[source.index("int dense(") :]
    run = run[: run.index("\n}\n")]
    assert re.search(r"load_f32x\d+\(&W_pack\[", run), "W_pack is not read by vector loads"
    assert "W[" not in run, "the per-call kernel still reads the unpacked W"
    assert "lane by lane" not in run


def test_decode_attention_default_tiles_each_batch_in_place(target) -> None:
    """Batched one-row products (decode attention) take a register tile per batch, not the
    streaming variant (whose column chunks run outside the batch), and do not pack B."""
    ds = design_space(tt.workload("batch_matmul:B=12,M=1,N=257,K=64"), target)
    assert ds.default["variant"] == "tile" and not ds.default["pack_b"]
    assert ds.default["mr"] == 1 and ds.default["nr_vectors"] == 4
