"""The normalisation space: every config schedules, and the fused row loop is all vector code."""

from __future__ import annotations

import re

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
    assert ("tt_exp_f32x16(" in source) == spec.startswith("softmax")


_FOR = re.compile(r"for \(int (\w+) = 0;")
