"""Every op-class design space gives correct kernels: its default config and random samples.

Shapes are small and deliberately awkward (1, primes, non-multiples of the vector width) so the
tails, guards and strided variants of each template get compiled and checked against NumPy.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

import tensortune as tt
from tensortune.errors import BuildError
from tensortune.pipeline import build_source
from tensortune.space.registry import design_space

from .matches import assert_configs_match_numpy

SPECS = [
    "matmul:M=1,N=61,K=37",
    "matmul:M=19,N=45,K=23",
    "matmul:M=16,N=32,K=8,epilogue=bias+gelu",
    "dense:M=5,N=33,K=17,epilogue=bias+relu",
    "batch_matmul:B=2,M=7,N=20,K=9",
    "conv2d:C=3,H=11,W=13,K=5,R=3,S=3,pad=1",
    "conv2d:C=4,H=9,W=9,K=18,R=3,S=3,stride=2,pad=1",
    "conv2d:C=6,H=7,W=7,K=4,R=1,S=1,groups=2",
    "conv2d:C=5,H=8,W=10,K=7,R=3,S=3,layout=NHWC",
    "depthwise_conv2d:C=6,H=9,W=11,R=3,S=3,stride=2,pad=1",
    "maxpool2d:C=3,H=9,W=9,R=3,S=3,stride=2,pad=1",
    "maxpool2d:N=2,C=19,H=7,W=10,R=2,S=2,layout=NHWC",
    "softmax:rows=5,cols=37",
    "layernorm:rows=3,cols=50",
]
SAMPLES = 3


@pytest.mark.parametrize("spec", SPECS)
def test_default_and_sampled_configs_match_numpy(spec: str, target) -> None:
    ds = design_space(tt.workload(spec), target)
    configs = [ds.default, *ds.space.sample(np.random.default_rng(len(spec)), SAMPLES)]
    assert_configs_match_numpy(ds, configs)


def test_gemv_default_unrolls_the_reduction(target) -> None:
    """A one-row matmul streams B and adds several rows of it per store of the output."""
    ds = design_space(tt.workload("matmul:M=1,N=256,K=64"), target)
    trace = ds.schedule(ds.default).trace
    assert ds.default["variant"] == "stream" and ds.default["k_unroll"] > 1
    assert any(
        step["primitive"] == "unroll" and step["args"]["loop"].startswith("k") for step in trace
    )


def test_k_unroll_only_applies_to_the_stream_variant(target) -> None:
    ds = design_space(tt.workload("matmul:M=32,N=32,K=32"), target)
    assert not ds.space.is_valid({**ds.default, "variant": "tile", "k_unroll": 4})


@pytest.mark.parametrize(
    ("spec", "k_block"),
    [("matmul:M=19,N=45,K=768", 384), ("batch_matmul:B=2,M=7,N=20,K=512", 256)],
)
@pytest.mark.parametrize("pack_at", ["root", "panel"])
def test_k_blocked_gemm_matches_numpy(spec: str, k_block: int, pack_at: str, target) -> None:
    """Blocks of k outside ragged tiles (rfactor): every block adds into the output."""
    wl = tt.workload(spec)
    ds = design_space(wl, target)
    config = {**ds.default, "variant": "tile", "k_block": k_block, "pack_b": True}
    config |= {"pack_at": pack_at, "order": "ji", "mr": 5, "nb": 2}
    sch = ds.schedule(config)
    assert any(step["primitive"] == "rfactor" for step in sch.trace)
    inputs = wl.random_inputs(0)
    got = tt.compile(wl, schedule=sch, target=target)(*inputs)
    np.testing.assert_allclose(got, wl.reference(inputs), rtol=1e-4, atol=1e-4)


def test_k_block_is_only_offered_when_it_splits_k(target) -> None:
    ds = design_space(tt.workload("matmul:M=32,N=32,K=768"), target)
    assert ds.space.is_valid({**ds.default, "k_block": 384})
    assert not ds.space.is_valid({**ds.default, "k_block": 512})
    # one block of all of k is no block (rfactor refuses it): only k_block=0 says that
    ds = design_space(tt.workload("matmul:M=32,N=32,K=512"), target)
    assert not ds.space.is_valid({**ds.default, "variant": "tile", "k_block": 512})


SUITE_SHAPES = [  # the GEMM-like and row shapes of the standard suite (conv lowers slowly)
    "matmul:M=1024,N=1024,K=1024",
    "matmul:M=128,N=3072,K=768",
    "matmul:M=128,N=768,K=3072",
    "matmul:M=1,N=4096,K=4096",
    "batch_matmul:B=12,M=128,N=128,K=64",
    "softmax:rows=1536,cols=128",
]


@pytest.mark.parametrize("isa", ["avx2", "avx512"])
@pytest.mark.parametrize("spec", SUITE_SHAPES)
def test_default_and_sampled_configs_of_real_shapes_lower(spec: str, isa: str) -> None:
    """What the tuner will try on real shapes must lower, whatever the vector width: a config
    that fails to schedule is a trial wasted and, as the default, a wrong fallback."""
    target = tt.Target.cross(isa, num_threads=2)
    ds = design_space(tt.workload(spec), target)
    for config in [ds.default, *ds.space.sample(np.random.default_rng(1), 12)]:
        build_source(ds.schedule(config), "kernel", target)


@pytest.mark.parametrize("threads", [1, 2, 8])
@pytest.mark.parametrize("isa", ["avx512", "avx2", "sse4", "neon"])
def test_every_default_is_a_config_of_its_space_on_every_target(isa: str, threads: int) -> None:
    """The default is what an untuned compile builds: on a one-thread target too (the norm
    space's default once broke its own constraint there, so `tt.compile` of a softmax failed)."""
    try:
        target = tt.Target.cross(isa, num_threads=threads)
    except BuildError as exc:  # no cross compiler here: CI installs one and requires it
        if os.environ.get("TENSORTUNE_REQUIRE_AARCH64") == "1":
            raise
        pytest.skip(str(exc))
    for spec in SPECS:
        ds = design_space(tt.workload(spec), target)
        ds.space.validate(ds.default)
