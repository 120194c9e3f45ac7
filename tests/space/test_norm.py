"""The normalisation space: every config schedules, and the fused row loop is all vector code."""

from __future__ import annotations

import re

import numpy as np
import pytest

import tensortune as tt
from tensortune.pipeline import build_source
from tensortune.space.registry import design_space


@pytest.mark.parametrize("spec", ["softmax:rows=6,cols=48", "layernorm:rows=3,cols=50"])
def test_every_config_builds_a_schedule(spec: str, target) -> None:
    ds = design_space(tt.workload(spec), target)
    assert {"rows_per_block", "parallel", "lanes", "recompute", "unroll"} <= set(ds.space.names)
    for config in ds.space.enumerate():
        ds.schedule(config)


@pytest.mark.parametrize("recompute", [False, True])
@pytest.mark.parametrize("spec", ["softmax:rows=256,cols=128", "layernorm:rows=256,cols=96"])
def test_row_loop_is_one_parallel_region_of_vector_loops(spec: str, recompute: bool, avx512_target):
    """Statistics and the final pass sit in one row loop; with cols a multiple of the lanes every
    loop inside it does one vector operation per iteration, and exp is the vector exp."""
    ds = design_space(tt.workload(spec), avx512_target)
    config = {**ds.default, "lanes": 16, "recompute": recompute, "parallel": True}
    source, _ = build_source(ds.schedule(config), "kernel", avx512_target)
    lines = source[source.index("int kernel(") :].splitlines()
    assert sum("#pragma omp parallel" in line for line in lines) == 1
    loops = [(n, m.group(1)) for n, line in enumerate(lines) if (m := _FOR.search(line))]
    column_loops = [n for n, var in loops if not var.startswith("i0")]
    assert column_loops
    for n in column_loops:
        assert "f32x16(" in lines[n + 1], lines[n : n + 2]
    assert "expf(" not in source
    assert ("tt_exp_nonpos_f32x16(" in source) == spec.startswith("softmax")


def _runnable(isa: str) -> tt.Target:
    """A 2-thread target of `isa` that this machine can run (skipped when it cannot)."""
    if isa == "avx512" and tt.Target.detect().isa != "avx512":
        pytest.skip("needs an AVX-512 host")
    return tt.Target.detect(num_threads=2, isa=isa)


@pytest.mark.parametrize("isa", ["avx2", "avx512"])
@pytest.mark.parametrize(
    "spec", ["softmax:rows=7,cols=197", "softmax:rows=3,cols=5003", "layernorm:rows=9,cols=37"]
)
def test_default_and_sampled_configs_match_numpy(spec: str, isa: str) -> None:
    """Rows off the vector width (masked tails), odd row counts (a partial last block)."""
    target = _runnable(isa)
    wl = tt.workload(spec)
    ds = design_space(wl, target)
    inputs = wl.random_inputs(0)
    want = wl.reference(inputs)
    for config in [ds.default, *ds.space.sample(np.random.default_rng(2), 5)]:
        got = tt.compile(wl, schedule=ds.schedule(config), target=target)(*inputs)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=str(config))


@pytest.mark.parametrize("isa", ["avx2", "avx512"])
def test_softmax_of_wide_rows_keeps_float32_accuracy(isa: str) -> None:
    """exp over its whole range: rows spread over [-120, 0] below their max (exp near 1, tiny,
    denormal and 0), masked entries at -inf, and a row holding a NaN, which is NaN throughout."""
    target = _runnable(isa)
    wl = tt.workload("softmax:rows=6,cols=203")
    rng = np.random.default_rng(3)
    x = np.stack([rng.uniform(-lo, 0, 203) for lo in (1, 20, 90, 120, 120, 5)]).astype(np.float32)
    x[3, ::7] = -np.inf
    x[4, 50] = np.nan
    want = wl.reference([x])
    ds = design_space(wl, target)
    got = tt.compile(wl, schedule=ds.schedule(ds.default), target=target)(x)
    assert np.isnan(got[4]).all()
    np.testing.assert_allclose(np.delete(got, 4, 0), np.delete(want, 4, 0), rtol=2e-6, atol=1e-30)


@pytest.mark.parametrize("isa", ["avx2", "avx512"])
def test_default_splits_rows_evenly_and_blocks_short_rows(isa: str) -> None:
    """Long rows: one row per block (35 rows in blocks of 32 gave one thread 32 of them), the
    reductions unrolled; short rows: statistics for a block of rows at once."""
    target = tt.Target.cross(isa, num_threads=2)
    long_rows = design_space(tt.workload("softmax:rows=35,cols=10000"), target).default
    short_rows = design_space(tt.workload("softmax:rows=2364,cols=197"), target).default
    assert (long_rows["rows_per_block"], long_rows["stats_at"]) == (1, "row")
    assert short_rows["rows_per_block"] > 1 and short_rows["stats_at"] == "block"
    assert long_rows["fast_math"] and short_rows["fast_math"]
    assert long_rows["unroll"] > 1  # several accumulators per reduction


def test_default_final_pass_multiplies_by_a_reciprocal(avx512_target) -> None:
    """fast_math in the default: the compiler may hoist 1/sum out of the final pass."""
    ds = design_space(tt.workload("softmax:rows=35,cols=10000"), avx512_target)
    assert ds.schedule(ds.default).flags.get("fast_math") is True


_FOR = re.compile(r"for \(int (\w+) = 0;")
