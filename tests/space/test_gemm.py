"""The GEMM space's ``dot`` variant: few-row products whose operands are both contiguous along k
(dense's W[N, K]) as dot products, checked against NumPy at odd sizes (tails in every loop, k
shorter than a vector), read in the C it generates, and offered only where it applies; configs
recorded before it existed still build. Batched products whose B fits in L1 (attention over a
window) read B in place by default; column panels are grouped no more than the row has."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import tensortune as tt
from tensortune.pipeline import split_source
from tensortune.space.registry import design_space


def _check(wl: tt.Workload, target: tt.Target, config: dict) -> None:
    ds = design_space(wl, target)
    kernel = tt.compile(wl, schedule=ds.schedule(config), target=target, constants=wl.constants)
    inputs = wl.random_inputs(0)
    got = kernel(*kernel.feeds({t.name: a for t, a in zip(wl.inputs, inputs, strict=True)}))
    want = wl.reference(inputs)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=str(config))


def _k_loop(source: str) -> tuple[str, str]:
    """The first loop over blocks of k in the kernel, and the code after it."""
    start = source.index("for (int k_o")
    depth, end = 0, start
    for end in range(source.index("{", start), len(source)):
        depth += {"{": 1, "}": -1}.get(source[end], 0)
        if depth == 0:
            break
    return source[start : end + 1], source[end + 1 :]


@pytest.mark.parametrize("m", [1, 3, 7])
@pytest.mark.parametrize("n, k", [(37, 29), (13, 5), (9, 100)])
def test_dot_default_matches_numpy(m: int, n: int, k: int, target) -> None:
    wl = tt.workload(f"dense:M={m},N={n},K={k}")
    ds = design_space(wl, target)
    assert ds.default["variant"] == "dot"
    _check(wl, target, ds.default)


@pytest.mark.parametrize(
    "spec, constants",
    [
        ("dense:M=7,N=37,K=29", ()),
        ("dense:M=3,N=21,K=5,epilogue=bias+gelu", ()),
        ("dense:M=5,N=19,K=13", ("W",)),
    ],
)
def test_sampled_dot_configs_match_numpy(spec: str, constants: tuple[str, ...], target) -> None:
    wl = tt.workload(spec).with_constants(constants)
    ds = design_space(wl, target)
    configs = [c for c in ds.space.sample(0, 300) if c["variant"] == "dot"][:6]
    assert len(configs) == 6
    for config in configs:
        _check(wl, target, config)


@pytest.mark.parametrize("isa", ["avx2", "avx512"])
def test_dot_keeps_a_vector_accumulator_per_pair_of_rows(isa: str) -> None:
    """Every load along k is a contiguous vector of X or W, each (row of X, row of W) pair sums
    into an accumulator of its own, and the lanes are added up only after the loop over k."""
    target = tt.Target.cross(isa, num_threads=2)
    wl = tt.workload("dense:M=7,N=1000,K=1280")
    ds = design_space(wl, target)
    config = ds.default
    assert config["variant"] == "dot"
    source, _ = split_source(ds.schedule(config), "dense", target, wl.constants)
    run = source[source.index("int dense(") :]
    loop, after = _k_loop(run)
    lanes = target.lanes("float32")
    updates = config["mr"] * config["b_rows"]
    assert loop.count("dense_acc_v") == 2 * updates  # acc = acc + X * W, once each
    assert loop.count(f"tt_load_f32x{lanes}(&W[") == updates
    assert "hsum" not in loop and "W_pack" not in run and "lane by lane" not in run
    assert after.count(f"tt_hsum_f32x{lanes}(dense_acc_v") >= updates


@pytest.mark.parametrize(
    "spec, offered",
    [
        ("dense:M=1,N=1000,K=1280", True),
        ("dense:M=32,N=64,K=64", True),
        ("dense:M=33,N=64,K=64", False),  # enough rows for packed tiles to reuse B
        ("matmul:M=1,N=4096,K=4096", False),  # B[K, N]: its columns are strided along k
        ("batch_matmul:B=12,M=1,N=257,K=64", False),
    ],
)
def test_dot_is_offered_for_few_rows_contiguous_along_k(spec: str, offered: bool) -> None:
    ds = design_space(tt.workload(spec), tt.Target.cross("avx2", num_threads=2))
    assert ("dot" in ds.space.knob("variant").choices) is offered
    assert (ds.default["variant"] == "dot") is offered


@pytest.mark.parametrize("m", [1, 16])
def test_constant_weights_keep_packed_tiles(m: int) -> None:
    """Packed once before the calls, W's panels are read as one stream, which beat dot products
    on Zen 3; only a W that changes every call is read in place."""
    wl = tt.workload(f"dense:M={m},N=1000,K=1280").with_constants(["W"])
    ds = design_space(wl, tt.Target.cross("avx2", num_threads=2))
    assert ds.default["variant"] == "tile" and ds.default["pack_b"]


def test_configs_recorded_before_dot_still_build(target) -> None:
    """Records from before the variant lack ``b_rows``: the space completes them."""
    wl = tt.workload("dense:M=3,N=37,K=29")
    old = {
        "variant": "tile",
        "mr": 3,
        "nr_vectors": 2,
        "nb": 4,
        "order": "ji",
        "pack_b": True,
        "pack_at": "root",
        "k_unroll": 1,
        "k_block": 0,
        "opt_level": "O3",
    }
    for config in (old, {**old, "variant": "stream", "k_unroll": 8, "pack_b": False}):
        _check(wl, target, config)


def _pinned(isa: str) -> tt.Target:
    """A cross target with a 32 KiB L1, whatever this machine's caches."""
    return dataclasses.replace(tt.Target.cross(isa, num_threads=2), l1d_bytes=32 * 1024)


@pytest.mark.parametrize(
    "spec",
    [
        "batch_matmul:B=3,M=49,N=49,K=32",  # swin's window attention, tails in rows and columns
        "batch_matmul:B=2,M=49,N=49,K=13",  # odd k
        "batch_matmul:B=4,M=19,N=9,K=31",
    ],
)
def test_small_batched_default_reads_b_in_place_and_matches_numpy(spec: str, target) -> None:
    wl = tt.workload(spec)
    ds = design_space(wl, target)
    assert not ds.default["pack_b"] and ds.default["pack_at"] == "root"
    _check(wl, target, ds.default)


@pytest.mark.parametrize("isa", ["avx2", "avx512"])
@pytest.mark.parametrize(
    "spec, in_place",
    [
        ("batch_matmul:B=192,M=49,N=49,K=32", True),  # 6 KB of B per product
        ("batch_matmul:B=12,M=197,N=197,K=64", False),  # 50 KB: packed, per batch
        ("batch_matmul:B=12,M=128,N=128,K=64", False),  # 32 KB, all of L1
        ("matmul:M=64,N=48,K=32", False),  # one product: packed once
    ],
)
def test_b_read_in_place_when_a_batch_of_it_fits_half_of_l1(
    isa: str, spec: str, in_place: bool
) -> None:
    """In place, the tiles multiply by B's rows where they are, and no copy of B is made."""
    target = _pinned(isa)
    wl = tt.workload(spec)
    ds = design_space(wl, target)
    source, _ = split_source(ds.schedule(ds.default), "k", target, wl.constants)
    run = source[source.index("int k(") :]
    lanes = target.lanes("float32")
    assert ("B_pack" not in run) is in_place
    assert (f"* tt_load_f32x{lanes}(&B[" in run) is in_place
    assert (f"* tt_load_f32x{lanes}(&B_pack[" in run) is not in_place


@pytest.mark.parametrize(
    "spec, nb",
    [
        ("batch_matmul:B=1,M=27,N=27,K=128", 2),  # 2 panels of 16 columns
        ("batch_matmul:B=192,M=49,N=49,K=32", 4),
        ("matmul:M=64,N=8,K=64", 1),
        ("matmul:M=128,N=768,K=3072", 2),  # long k: 2 panels a group
    ],
)
def test_default_groups_no_more_panels_than_the_row_has(spec: str, nb: int) -> None:
    ds = design_space(tt.workload(spec), _pinned("avx2"))
    assert ds.default["nb"] == nb


def test_configs_packing_small_batches_still_build(target) -> None:
    """The default before B was read in place (packed per batch) builds and is right."""
    wl = tt.workload("batch_matmul:B=3,M=49,N=49,K=32")
    packed = {**design_space(wl, target).default, "pack_b": True, "pack_at": "panel"}
    _check(wl, target, packed)
