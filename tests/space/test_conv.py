"""The conv2d space's ``channels`` variant: vectors over output channels from packed weights,
broadcast input pixels; correct for strides, padding, ragged K and tiny C, and only offered
where every lane of a vector reads the same input element."""

from __future__ import annotations

import numpy as np
import pytest

import tensortune as tt
from tensortune.pipeline import build_source
from tensortune.space.registry import design_space

SPECS = [
    "conv2d:C=3,H=11,W=13,K=20,R=3,S=3,stride=2,pad=1",  # C=3, K not a multiple of 16
    "conv2d:C=5,H=9,W=9,K=16,R=3,S=3,pad=1",
    "conv2d:C=4,H=10,W=12,K=33,R=1,S=1",
    "conv2d:N=2,C=3,H=15,W=15,K=12,R=5,S=5,stride=2,pad=2,dilation=2",
]
TILES = [
    {},
    {
        "rows": 3,
        "vectors": 2,
        "lanes": 8,
        "pixel_rows": 2,
        "inline_pad": False,
        "reduce_order": "crs",
    },
    {"rows": 5, "vectors": 1, "lanes": 8, "parallel_fuse": False},
]


@pytest.mark.parametrize("spec", SPECS)
def test_channel_tiles_match_numpy(spec: str, target) -> None:
    wl = tt.workload(spec)
    ds = design_space(wl, target)
    inputs = wl.random_inputs(0)
    want = wl.reference(inputs)
    for tile in TILES:
        config = {**ds.default, "vector_axis": "channels", **tile}
        kernel = tt.compile(wl, schedule=ds.schedule(config), target=target)
        np.testing.assert_allclose(kernel(*inputs), want, rtol=1e-4, atol=1e-4, err_msg=str(tile))


def test_channel_tile_loads_packed_weights_and_broadcasts_inputs(avx512_target) -> None:
    wl = tt.workload("conv2d:C=8,H=8,W=8,K=32,R=3,S=3,stride=2,pad=1")
    ds = design_space(wl, avx512_target)
    assert ds.default["vector_axis"] == "channels"
    config = {**ds.default, "inline_pad": False}
    source, _ = build_source(ds.schedule(config), "conv2d", avx512_target)
    assert "tt_load_f32x16(&W_pack[" in source
    assert "tt_bcast_f32x16(&X_pad[" in source  # one scalar of the input per output pixel
    assert "held in registers" in source


def test_register_tiles_that_do_not_fit_are_rejected(avx512_target) -> None:
    ds = design_space(tt.workload("conv2d:C=64,H=28,W=28,K=64,R=3,S=3,pad=1"), avx512_target)
    base = {**ds.default, "vector_axis": "channels"}
    assert ds.space.is_valid({**base, "vectors": 2, "rows": 14, "pixel_rows": 1})
    assert not ds.space.is_valid({**base, "vectors": 2, "rows": 14, "pixel_rows": 2})
    assert not ds.space.is_valid({**base, "vectors": 3, "rows": 10})
    assert not ds.space.is_valid({**base, "vectors": 4, "lanes": 16, "rows": 14})
    assert not ds.space.is_valid({**base, "vector_axis": "columns", "pixel_rows": 2})


@pytest.mark.parametrize(
    "spec",
    [
        "conv2d:C=6,H=7,W=7,K=4,R=1,S=1,groups=2",
        "conv2d:C=5,H=8,W=10,K=7,R=3,S=3,layout=NHWC",
        "depthwise_conv2d:C=6,H=9,W=11,R=3,S=3,stride=2,pad=1",
    ],
)
def test_channel_tiles_are_only_offered_for_ungrouped_nchw(spec: str, target) -> None:
    ds = design_space(tt.workload(spec), target)
    assert ds.space.knob("vector_axis").choices == ("columns",)
    assert ds.default["vector_axis"] == "columns"
