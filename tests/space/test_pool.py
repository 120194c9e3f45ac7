"""The pooling space: register tiles of independent accumulators with the window loops outside,
correct for both layouts, both row axes, strides, padding (inlined or materialised) and batch."""

from __future__ import annotations

import numpy as np
import pytest

import tensortune as tt
from tensortune.space.registry import design_space

from .matches import assert_configs_match_numpy

SPECS = [
    "maxpool2d:C=5,H=11,W=13,R=3,S=3,stride=2,pad=1",
    "maxpool2d:N=2,C=3,H=8,W=19,R=2,S=2",
    "maxpool2d:C=21,H=9,W=9,R=3,S=3,stride=2,pad=1,layout=NHWC",
]


@pytest.mark.parametrize("spec", SPECS)
def test_every_row_axis_and_pad_choice_matches_numpy(spec: str, target) -> None:
    ds = design_space(tt.workload(spec), target)
    knobs = {k.name: k.choices for k in ds.space.knobs}
    tile = {"rows": 3, "vectors": 2, "lanes": 4, "parallel_fuse": True}
    configs = [
        {**ds.default, "row_axis": row_axis, "inline_pad": inline_pad, **tile}
        for row_axis in knobs["row_axis"]
        for inline_pad in knobs["inline_pad"]
    ]
    assert_configs_match_numpy(ds, configs, rtol=0, atol=0)


def test_window_loops_run_outside_the_register_tile(avx512_target) -> None:
    wl = tt.workload("maxpool2d:C=8,H=16,W=16,R=3,S=3,stride=1,pad=1")
    ds = design_space(wl, avx512_target)
    config = {**ds.default, "rows": 4, "vectors": 1, "lanes": 16}
    trace = ds.schedule(config).trace
    cache_write = next(step for step in trace if step["primitive"] == "cache_write")
    reorders = [step["args"]["loops"] for step in trace if step["primitive"] == "reorder"]
    assert cache_write["args"]["scope"] == "register"
    assert any(loops[:2] == ["r", "s"] for loops in reorders)


def test_pad_choice_only_offered_when_there_is_a_pad(target) -> None:
    padded = design_space(tt.workload("maxpool2d:C=4,H=8,W=8,R=3,S=3,pad=1"), target)
    unpadded = design_space(tt.workload("maxpool2d:C=4,H=8,W=8,R=2,S=2"), target)
    assert padded.space.knob("inline_pad").choices == (True, False)
    assert unpadded.space.knob("inline_pad").choices == (True,)


@pytest.mark.parametrize("isa", ["avx2", "avx512"])
@pytest.mark.parametrize(
    "spec",
    [
        "maxpool2d:C=6,H=20,W=20,R=5,S=5,stride=1,pad=2",  # SPPF's window: pad materialised
        "maxpool2d:C=5,H=13,W=17,R=3,S=3,stride=1,pad=1",
        "maxpool2d:C=3,H=15,W=15,R=3,S=3,stride=2,pad=1",
        "maxpool2d:C=4,H=9,W=23,R=2,S=2,stride=2",
        "maxpool2d:C=7,H=11,W=11,R=5,S=5,stride=2,pad=2,layout=NHWC",
    ],
)
def test_default_and_sampled_configs_match_numpy(spec: str, isa: str) -> None:
    if isa == "avx512" and tt.Target.detect().isa != "avx512":
        pytest.skip("needs an AVX-512 host")
    target = tt.Target.detect(num_threads=2, isa=isa)
    ds = design_space(tt.workload(spec), target)
    configs = [ds.default, *ds.space.sample(np.random.default_rng(3), 4)]
    assert_configs_match_numpy(ds, configs, rtol=0, atol=0)


def test_default_materialises_the_pad_of_a_window_that_rereads_its_input(target) -> None:
    """5x5 stride 1 reads each input 25 times: the pad is copied once, not tested per step;
    3x3 stride 2 reads it 2.25 times: the tests stay inline."""
    sppf = design_space(tt.workload("maxpool2d:C=256,H=20,W=20,R=5,S=5,pad=2"), target)
    strided = design_space(tt.workload("maxpool2d:C=64,H=56,W=56,R=3,S=3,stride=2,pad=1"), target)
    assert sppf.default["inline_pad"] is False
    assert strided.default["inline_pad"] is True


def test_configs_recorded_before_unroll_window_still_apply(target) -> None:
    ds = design_space(tt.workload("maxpool2d:C=6,H=20,W=20,R=5,S=5,stride=1,pad=2"), target)
    old = {k: v for k, v in ds.default.items() if k != "unroll_window"}
    assert ds.space.complete(old) == ds.default
    ds.space.validate(ds.space.complete(old))
