"""The conv2d space's ``channels`` variant: vectors over output channels from packed weights,
broadcast input pixels; correct for strides, padding, ragged K and tiny C, and only offered
where every lane of a vector reads the same input element."""

from __future__ import annotations

import re
from dataclasses import replace

import numpy as np
import pytest

import tensortune as tt
from tensortune.pipeline import build_source
from tensortune.space.registry import design_space

from .matches import assert_configs_match_numpy

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
    ds = design_space(tt.workload(spec), target)
    assert_configs_match_numpy(ds, [{**ds.default, "vector_axis": "channels", **t} for t in TILES])


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


EPILOGUE_SPECS = [
    "conv2d:C=8,H=9,W=11,K=20,R=3,S=3,pad=1,epilogue=bias+relu",  # ragged K and columns
    "conv2d:C=6,H=12,W=12,K=6,R=3,S=3,stride=2,pad=1,groups=6,epilogue=bias+relu",  # depthwise
    "conv2d:C=4,H=7,W=9,K=12,R=1,S=1,epilogue=relu",
    "conv2d:C=5,H=8,W=10,K=7,R=3,S=3,pad=1,layout=NHWC,epilogue=bias+relu",
]


@pytest.mark.parametrize("spec", EPILOGUE_SPECS)
def test_fused_epilogue_matches_numpy(spec: str, target) -> None:
    wl = tt.workload(spec)
    ds = design_space(wl, target)
    assert ds.space.knob("fuse_epilogue").choices == (True, False)
    configs = [
        {**ds.default, "vector_axis": axis, "inline_pad": pad, **tile, "fuse_epilogue": True}
        for axis in ds.space.knob("vector_axis").choices
        for pad in (False, True)
        for tile in ({}, {"rows": 2, "vectors": 1, "lanes": 8, "pixel_rows": 1})
    ]
    assert assert_configs_match_numpy(ds, configs, skip_invalid=True) >= 3


def test_fused_epilogue_writes_tiles_in_one_parallel_region(avx512_target) -> None:
    wl = tt.workload("conv2d:C=32,H=28,W=28,K=32,R=3,S=3,pad=1,groups=32,epilogue=bias+relu")
    ds = design_space(wl, avx512_target)
    assert ds.default["fuse_epilogue"] and ds.default["inline_pad"]  # depthwise defaults
    fused, _ = build_source(ds.schedule(ds.default), "conv2d", avx512_target)
    apart, _ = build_source(ds.schedule({**ds.default, "fuse_epilogue": False}), "c", avx512_target)
    assert fused.count("#pragma omp parallel") == 1 and apart.count("#pragma omp parallel") == 2
    assert "tt_alloc(" in apart and "computed at" in fused
    assert "tt_alloc(" not in fused.split("int conv2d(")[1]  # the conv's tile is a local array


def test_epilogue_knob_only_where_there_is_one(target) -> None:
    ds = design_space(tt.workload("conv2d:C=4,H=8,W=8,K=8,R=3,S=3,pad=1"), target)
    assert "fuse_epilogue" not in ds.space.names  # its configs recorded before the knob still apply


@pytest.mark.parametrize(
    ("spec", "tile"),
    [
        ("conv2d:C=64,H=56,W=56,K=64,R=3,S=3,pad=1", (2, 7)),  # two vectors x 7 pixels
        ("conv2d:C=3,H=224,W=224,K=64,R=7,S=7,stride=2,pad=3", (2, 7)),  # the ResNet stem
        ("conv2d:C=48,H=56,W=56,K=144,R=1,S=1", (1, 7)),  # 144 = 9 vectors: one covers evenly
        ("conv2d:C=8,H=13,W=13,K=20,R=3,S=3,pad=1", (2, 7)),  # ragged K, 13 = 7 + 6
        ("conv2d:C=8,H=16,W=16,K=32,R=1,S=1", (2, 8)),  # 16 = 8 + 8 beats 7 + 7 + 2
        ("conv2d:C=4,H=5,W=5,K=16,R=3,S=3,pad=1", (1, 5)),  # a row shorter than the tile
    ],
)
def test_wide_register_file_default_tile(spec: str, tile: tuple[int, int], avx512_target) -> None:
    default = design_space(tt.workload(spec), avx512_target).default
    assert default["vector_axis"] == "channels"
    assert (default["vectors"], default["rows"]) == tile


@pytest.mark.parametrize(
    ("spec", "tile"),
    [
        ("conv2d:C=64,H=56,W=56,K=64,R=3,S=3,pad=1", (2, 6)),  # as measured on Zen 3
        ("conv2d:C=128,H=28,W=28,K=128,R=3,S=3,pad=1", (2, 6)),  # 28 = 6 x 4 + 4
        ("conv2d:C=1024,H=14,W=14,K=256,R=1,S=1", (2, 5)),  # 14 = 5 + 5 + 4, not 6 + 6 + 2
        ("conv2d:C=512,H=7,W=7,K=512,R=3,S=3,pad=1", (1, 7)),  # one tile a row, not 6 + 1
    ],
)
def test_narrow_register_file_tile_leaves_no_starved_row_end(
    spec: str, tile: tuple[int, int]
) -> None:
    """AVX2's 16 registers: the tile covering a row in the fewest cycles, its last, narrower
    tile counted (a 2x1 tile's 2 accumulators wait on the FMA latency), on a tie the fewest
    tiles a row; 2x6 where the row's end keeps enough accumulators."""
    avx2 = replace(tt.Target.cross("avx2", num_threads=2), l2_bytes=512 * 1024)  # Zen 3's
    default = design_space(tt.workload(spec), avx2).default
    assert default["vector_axis"] == "channels"
    assert (default["vectors"], default["rows"]) == tile


@pytest.mark.parametrize(
    ("spec", "isa", "level"),
    [
        ("conv2d:C=80,H=73,W=73,K=192,R=3,S=3", "avx2", "O2"),  # 2x6 tile + 8 shared scalars
        ("conv2d:C=288,H=35,W=35,K=384,R=3,S=3,stride=2", "avx2", "O2"),
        ("conv2d:C=128,H=17,W=23,K=128,R=1,S=7", "avx2", "O2"),  # a 1x7 window: 7 columns
        ("conv2d:C=128,H=80,W=80,K=255,R=1,S=1", "avx2", "O3"),  # one column: nothing peeled
        ("conv2d:C=3,H=64,W=64,K=96,R=4,S=4,stride=4", "avx2", "O3"),  # windows do not overlap
        ("conv2d:C=512,H=14,W=14,K=512,R=3,S=3,pad=1,groups=32", "avx2", "O2"),  # 16 a group
        ("conv2d:C=256,H=28,W=28,K=256,R=3,S=3,stride=2,groups=32", "avx2", "O3"),  # 2 groups
        ("conv2d:C=80,H=73,W=73,K=192,R=3,S=3", "avx512", "O3"),  # 32 registers hold them
    ],
)
def test_channel_tile_default_compiles_windows_at_o2_on_narrow_register_files(
    spec: str, isa: str, level: str
) -> None:
    """On 16 registers gcc's -O3 peels the window's column loop and keeps the broadcasts that
    neighbouring pixels share live across it, which spills the tile's accumulators; the
    default of a channel tile whose overlapping windows share scalars is built at -O2 there
    (not where the windows do not overlap, nor where a tile's vectors read two groups)."""
    ds = design_space(tt.workload(spec), tt.Target.cross(isa, num_threads=2))
    assert ds.default["vector_axis"] == "channels"
    assert ds.default["opt_level"] == level
    assert ds.schedule(ds.default).flags["opt_level"] == level


def test_default_blocks_input_channels_whose_input_outgrows_l2() -> None:
    """Blocks of input channels as many as fit half of L2 (512 KB on this target), where all of
    them do not; none where they do, or where only blocks too short to pay would."""
    avx2 = replace(tt.Target.cross("avx2", num_threads=2), l2_bytes=512 * 1024)  # Zen 3's

    def default(spec: str) -> dict:
        return design_space(tt.workload(spec), avx2).default

    assert default("conv2d:C=1024,H=14,W=14,K=256,R=1,S=1")["c_block"] == 256  # 200 KB a block
    assert default("conv2d:C=1024,H=28,W=28,K=256,R=1,S=1")["c_block"] == 0  # 128: 400 KB
    assert default("conv2d:C=512,H=7,W=7,K=512,R=3,S=3,pad=1").get("c_block", 0) == 0  # 100 KB
    with_epilogue = tt.workload("conv2d:C=1024,H=14,W=14,K=64,R=1,S=1,epilogue=bias+relu")
    ds = design_space(with_epilogue, avx2)
    assert ds.default["c_block"] == 256 and ds.space.is_valid(ds.default)  # the epilogue apart


DEFAULT_SPECS = [
    "conv2d:C=3,H=23,W=23,K=20,R=7,S=7,stride=2,pad=3,epilogue=bias+relu",  # stem-like, ragged
    "conv2d:C=9,H=13,W=13,K=36,R=3,S=3,pad=1,epilogue=bias+relu",
    "conv2d:C=20,H=7,W=7,K=144,R=1,S=1,epilogue=relu",
    "conv2d:C=10,H=14,W=14,K=10,R=3,S=3,pad=1,groups=10,epilogue=bias+relu",  # 7 channels a tile
    "conv2d:C=9,H=13,W=13,K=9,R=3,S=3,stride=2,pad=1,groups=9,epilogue=bias+relu",  # 7-wide
    "conv2d:C=9,H=7,W=5,K=9,R=3,S=3,pad=1,groups=9",
    "conv2d:C=5,H=6,W=37,K=20,R=1,S=1,epilogue=bias+relu",  # a short reduction: columns
    "conv2d:C=40,H=7,W=7,K=32,R=3,S=3,pad=1",  # a late stage: a row's end in a narrower tile
    "conv2d:C=600,H=11,W=11,K=16,R=1,S=1",  # input past half of L2: blocks, 600 = 2 x 256 + 88
    "conv2d:C=11,H=19,W=21,K=24,R=3,S=3,stride=2",  # stride 2, pad 0: 9x10 outputs, -O2 on AVX2
    "conv2d:C=7,H=17,W=19,K=40,R=3,S=3",  # odd rows (17 outputs), ragged K, -O2 on AVX2
    "conv2d:C=3,H=70,W=70,K=24,R=3,S=3,stride=2,pad=1",  # AVX-512 column tile, 35 = 32 + 3
    "conv2d:C=40,H=32,W=32,K=20,R=3,S=3,pad=1,epilogue=bias+relu",  # 4 KB planes, ragged K
    "conv2d:C=3,H=96,W=96,K=32,R=3,S=3,stride=2,pad=1,epilogue=bias+relu",  # 48 = 3 vectors
]


@pytest.mark.parametrize("spec", DEFAULT_SPECS)
def test_defaults_match_numpy(spec: str, target) -> None:
    wl = tt.workload(spec)
    ds = design_space(wl, target)
    inputs = wl.random_inputs(0)
    kernel = tt.compile(wl, schedule=ds.schedule(ds.default), target=target)
    np.testing.assert_allclose(kernel(*inputs), wl.reference(inputs), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    "spec",
    [
        "conv2d:C=3,H=224,W=224,K=24,R=3,S=3,stride=2,pad=1",  # a stem: 27 FMAs a scatter
        "conv2d:C=24,H=56,W=56,K=144,R=1,S=1",  # a reduction of 24
        "conv2d:C=64,H=160,W=160,K=32,R=1,S=1",  # planes 100 KB apart: one L1 set
        "conv2d:C=32,H=320,W=320,K=64,R=3,S=3,stride=2,pad=1",  # 160x160 outputs
    ],
)
def test_scattered_channel_tiles_give_way_to_column_tiles(spec: str, avx512_target) -> None:
    """32 registers: NCHW outputs whose channel tile's scattered write-back outweighs its FMAs
    take 8 channels x 2 vectors of columns; AVX2's default is left as it was measured."""
    ds = design_space(tt.workload(spec), avx512_target)
    tile = (ds.default["vector_axis"], ds.default["rows"], ds.default["vectors"])
    assert tile == ("columns", 8, 2) and ds.default["parallel_fuse"]
    assert ds.space.is_valid(ds.default)
    avx2 = design_space(tt.workload(spec), tt.Target.cross("avx2", num_threads=2)).default
    assert (avx2["rows"], avx2["vectors"]) != (8, 2)


@pytest.mark.parametrize(
    ("spec", "tile"),
    [
        ("conv2d:C=3,H=160,W=160,K=32,R=3,S=3,stride=2,pad=1", (16, 1)),  # 80 = 5 vectors
        ("conv2d:C=16,H=112,W=112,K=48,R=1,S=1", (16, 1)),  # 112 = 7 vectors
        ("conv2d:C=3,H=224,W=224,K=24,R=3,S=3,stride=2,pad=1", (8, 2)),  # 24 channels, not 16s
        ("conv2d:C=3,H=320,W=320,K=32,R=3,S=3,stride=2,pad=1", (8, 2)),  # 160 = 10 vectors
    ],
)
def test_rows_of_an_odd_number_of_vectors_take_one_vector_of_16_channels(
    spec: str, tile: tuple[int, int], avx512_target
) -> None:
    """Two vectors would leave the last column block of such a row half empty; the one-vector
    tile tests its padding inline, at -O2."""
    ds = design_space(tt.workload(spec), avx512_target)
    assert ds.default["vector_axis"] == "columns"
    assert (ds.default["rows"], ds.default["vectors"]) == tile and ds.space.is_valid(ds.default)
    one_vector = tile == (16, 1)
    assert ds.default["inline_pad"] == one_vector
    assert (ds.default["opt_level"] == "O2") == one_vector


@pytest.mark.parametrize(
    "spec",
    [
        "conv2d:C=3,H=224,W=224,K=64,R=7,S=7,stride=2,pad=3",  # 147 FMAs a scatter
        "conv2d:C=3,H=224,W=224,K=96,R=4,S=4,stride=4",  # stride 4: column loads gather
        "conv2d:C=32,H=147,W=147,K=64,R=3,S=3,pad=1",  # planes not a multiple of 4 KB
        "conv2d:C=64,H=56,W=56,K=64,R=1,S=1",  # 12.25 KB planes, a reduction of 64
    ],
)
def test_channel_tiles_stay_where_their_fmas_outweigh_the_scatter(spec: str, avx512_target) -> None:
    assert design_space(tt.workload(spec), avx512_target).default["vector_axis"] == "channels"


def test_depthwise_default_on_wide_register_files_tiles_output_rows(avx512_target) -> None:
    """32 registers: one channel's output rows (at most 8) x the fewest, widest vectors
    covering a row, at most 14 accumulators; rows narrower than a vector run the epilogue
    apart."""
    narrow = "conv2d:C=96,H=7,W=7,K=96,R=3,S=3,pad=1,groups=96,epilogue=bias+relu"
    default = design_space(tt.workload(narrow), avx512_target).default
    assert not default["fuse_epilogue"] and default["rows"] == 7
    mid = "conv2d:C=96,H=14,W=14,K=96,R=3,S=3,pad=1,groups=96,epilogue=bias+relu"
    ds = design_space(tt.workload(mid), avx512_target)
    tile = (ds.default["rows"], ds.default["vectors"], ds.default["lanes"])
    assert ds.default["fuse_epilogue"] and tile == (8, 1, 16), "one 16-lane vector, not 2 x 8"
    assert ds.default["row_axis"] == "pixels" and ds.space.is_valid(ds.default)
    wide = "conv2d:C=96,H=56,W=56,K=96,R=3,S=3,pad=1,groups=96,epilogue=bias+relu"
    ds = design_space(tt.workload(wide), avx512_target)
    assert ds.default["fuse_epilogue"] and ds.default["row_axis"] == "pixels"
    assert ds.default["rows"] * ds.default["vectors"] <= 14 and ds.space.is_valid(ds.default)


@pytest.mark.parametrize(
    ("spec", "tile"),
    [
        ("C=144,H=56,W=56,K=144,R=5,S=5,stride=2,pad=2", (8, 1, True)),
        ("C=480,H=14,W=14,K=480,R=5,S=5,pad=2", (8, 1, True)),
        ("C=192,H=28,W=28,K=192,R=7,S=7,pad=3", (4, 2, False)),  # 7 weights + 8 accumulators
    ],
)
def test_depthwise_default_tiles_output_rows_on_narrow_register_files(
    spec: str, tile: tuple[int, int, bool]
) -> None:
    """16 registers: 8 output rows x 1 vector, or 4 x 2 under a window 7 rows tall, read from
    a padded copy."""
    avx2 = replace(tt.Target.cross("avx2", num_threads=2), l2_bytes=512 * 1024)  # Zen 3's
    default = design_space(tt.workload(f"conv2d:{spec},groups={spec[2:5]}"), avx2).default
    assert default["row_axis"] == "pixels"
    assert (default["rows"], default["vectors"], default["inline_pad"]) == tile


@pytest.mark.parametrize(
    ("spec", "axis"),
    [
        ("conv2d:C=16,H=40,W=40,K=48,R=1,S=1,epilogue=bias+relu", "columns"),
        ("conv2d:C=16,H=40,W=40,K=48,R=1,S=1", "columns"),
        ("conv2d:C=32,H=40,W=40,K=48,R=1,S=1", "columns"),  # two vectors of reduction
        ("conv2d:C=33,H=40,W=40,K=48,R=1,S=1", "channels"),  # past two vectors
        ("conv2d:C=16,H=80,W=80,K=48,R=1,S=1,stride=2", "columns"),  # stride 2: two loads
        ("conv2d:C=16,H=160,W=160,K=48,R=1,S=1,stride=4", "channels"),  # stride 4: gathers
        ("conv2d:C=16,H=40,W=31,K=48,R=1,S=1", "channels"),  # rows under two vectors
    ],
)
def test_short_reductions_vectorize_output_rows(spec: str, axis: str, avx512_target) -> None:
    """On 32 registers a conv reducing over at most two vectors' worth of inputs at stride 1
    or 2 stores whole output lines (``scattered_column_tile``)."""
    default = design_space(tt.workload(spec), avx512_target).default
    assert default["vector_axis"] == axis


@pytest.mark.parametrize(
    ("spec", "tile"),
    [
        ("conv2d:C=64,H=56,W=56,K=64,R=3,S=3,pad=1", (2, 7, "rsc")),  # two vectors x 7 pixels
        ("conv2d:C=3,H=224,W=224,K=64,R=7,S=7,stride=2,pad=3", (2, 7, "crs")),  # the stem
        ("conv2d:C=24,H=56,W=56,K=144,R=1,S=1", (3, 7, "rsc")),  # 144 = 3 x 48, not 2 x 32
        ("conv2d:C=144,H=14,W=14,K=144,R=3,S=3,pad=1,groups=144", (3, 7, "crs")),  # depthwise
        ("conv2d:C=32,H=16,W=16,K=24,R=1,S=1", (2, 8, "rsc")),  # ragged K: 24 < 2 x 16
        ("conv2d:C=16,H=5,W=5,K=16,R=3,S=3,pad=1", (1, 5, "rsc")),  # a row shorter than 7
    ],
)
def test_nhwc_default_tile(spec: str, tile: tuple[int, int, str], avx512_target) -> None:
    """NHWC on 32 registers: 2 (or 3) vectors of output channels x 5-8 pixels of a row."""
    default = design_space(tt.workload(f"{spec},layout=NHWC"), avx512_target).default
    assert default["vector_axis"] == "columns" and default["lanes"] == 16
    assert (default["vectors"], default["rows"], default["reduce_order"]) == tile


def test_nhwc_default_on_narrow_register_files_is_unchanged() -> None:
    avx2 = replace(tt.Target.cross("avx2", num_threads=2), l2_bytes=512 * 1024)  # Zen 3's
    spec = "conv2d:C=64,H=56,W=56,K=64,R=3,S=3,pad=1,layout=NHWC"
    default = design_space(tt.workload(spec), avx2).default
    assert (default["vectors"], default["lanes"], default["rows"]) == (4, 8, 2)


NHWC_SPECS = [
    "conv2d:C=3,H=23,W=21,K=20,R=7,S=7,stride=2,pad=3,layout=NHWC,epilogue=bias+relu",
    "conv2d:C=19,H=9,W=13,K=37,R=3,S=3,pad=1,layout=NHWC,epilogue=bias+relu",  # ragged C, K
    "conv2d:C=33,H=6,W=9,K=144,R=1,S=1,layout=NHWC,epilogue=relu",
    "conv2d:C=21,H=11,W=11,K=21,R=3,S=3,stride=2,pad=1,groups=21,layout=NHWC,epilogue=bias+relu",
    "conv2d:C=18,H=7,W=3,K=36,R=5,S=5,pad=2,groups=18,layout=NHWC",  # channel multiplier 2
    "conv2d:C=12,H=9,W=9,K=30,R=3,S=3,pad=1,groups=3,layout=NHWC",  # grouped
]


@pytest.mark.parametrize("spec", NHWC_SPECS)
def test_nhwc_defaults_match_numpy(spec: str, target) -> None:
    """The default, and with the channel blocks outside the pixel loops (or inside)."""
    wl = tt.workload(spec)
    ds = design_space(wl, target)
    inputs = wl.random_inputs(0)
    flip = {"channels_outer": not ds.default["channels_outer"]}
    for config in (ds.default, {**ds.default, **flip}):
        kernel = tt.compile(wl, schedule=ds.schedule(config), target=target)
        got = kernel(*inputs)
        np.testing.assert_allclose(got, wl.reference(inputs), rtol=1e-4, atol=1e-4)


def test_nhwc_channel_blocks_outer_where_weights_outgrow_l2(avx512_target) -> None:
    big = "conv2d:C=512,H=7,W=7,K=512,R=3,S=3,pad=1,layout=NHWC"  # 9.4 MB of weights
    default = design_space(tt.workload(big), avx512_target).default
    assert default["channels_outer"] and default["parallel_fuse"]
    small = "conv2d:C=64,H=56,W=56,K=64,R=3,S=3,pad=1,layout=NHWC"  # 147 KB
    assert not design_space(tt.workload(small), avx512_target).default["channels_outer"]
    nchw = design_space(tt.workload(big.replace(",layout=NHWC", "")), avx512_target)
    assert "channels_outer" not in nchw.space.names  # every NCHW record stays a point


PACK_SPECS = [
    "conv2d:C=19,H=9,W=13,K=37,R=3,S=3,pad=1,layout=NHWC,epilogue=bias+relu",  # ragged C, K
    "conv2d:C=21,H=11,W=12,K=50,R=3,S=3,stride=2,pad=1,layout=NHWC",
    "conv2d:C=33,H=6,W=9,K=20,R=1,S=1,layout=NHWC,epilogue=relu",
    "conv2d:C=13,H=10,W=11,K=24,R=1,S=1,stride=2,layout=NHWC,epilogue=bias+relu",
    "conv2d:C=12,H=9,W=9,K=30,R=3,S=3,pad=1,groups=3,layout=NHWC",  # grouped
]
PACK_TILES: list[dict[str, object]] = [
    {},
    {"reduce_order": "crs", "inline_pad": True},
    {"rows": 3, "vectors": 2, "lanes": 8, "channels_outer": True, "parallel_fuse": True},
]


def _runnable(isa: str) -> tt.Target:
    """A 2-thread target for ``isa`` whose kernels this CPU runs (else the test is skipped)."""
    try:
        return tt.Target.detect(num_threads=2, isa=isa)
    except tt.TensorTuneError as exc:
        pytest.skip(str(exc))


@pytest.mark.parametrize("isa", ["avx512", "avx2"])
@pytest.mark.parametrize("spec", PACK_SPECS)
def test_nhwc_packed_weights_match_numpy(spec: str, isa: str) -> None:
    """Weight panels for channel counts off the vector width, strides 1 and 2, 1x1 and 3x3,
    both reduce orders, channel blocks inside or outside the pixel loops."""
    target = _runnable(isa)
    wl = tt.workload(spec)
    ds = design_space(wl, target)
    assert ds.space.knob("pack_weights").choices == (False, True)
    inputs = wl.random_inputs(0)
    want = wl.reference(inputs)
    checked = 0
    for tile in PACK_TILES:
        config = {**ds.default, **tile, "pack_weights": True}
        if not ds.space.is_valid(config):
            continue
        source, _ = build_source(ds.schedule(config), "conv2d", target)
        assert "W_pack[" in source
        kernel = tt.compile(wl, schedule=ds.schedule(config), target=target)
        np.testing.assert_allclose(kernel(*inputs), want, rtol=1e-4, atol=1e-4, err_msg=str(tile))
        checked += 1
    assert checked >= 2


@pytest.mark.parametrize("isa", ["avx512", "avx2"])
def test_nhwc_packed_tile_reads_one_contiguous_weight_stream(isa: str) -> None:
    """The tile's innermost reduce loop (c, rsc order) steps its panel by one tile width: the
    weight loads run along memory, not K floats apart as in the unpacked NHWC weights."""
    target = tt.Target.cross(isa, num_threads=2)
    wl = tt.workload("conv2d:C=64,H=7,W=7,K=96,R=3,S=3,pad=1,layout=NHWC")
    ds = design_space(wl, target)
    lanes = 16 if isa == "avx512" else 8
    config = {**ds.default, "vectors": 2, "lanes": lanes, "rows": 3, "reduce_order": "rsc"}
    config["pack_weights"] = True
    source, _ = build_source(ds.schedule(config), "conv2d", target)
    load = f"tt_load_f32x{lanes}(&W_pack[c * {2 * lanes} + "
    assert load in source
    plain, _ = build_source(ds.schedule({**config, "pack_weights": False}), "conv2d", target)
    assert "W_pack" not in plain and f"tt_load_f32x{lanes}(&W[c * 96 + " in plain


@pytest.mark.parametrize("isa", ["avx512", "avx2"])
def test_nhwc_defaults_pack_dense_weights(isa: str) -> None:
    """Dense NHWC convs read weight panels by default; depthwise ones their few weights."""
    cross = tt.Target.cross(isa, num_threads=2)
    dense = "conv2d:C=512,H=7,W=7,K=512,R=3,S=3,pad=1,layout=NHWC,epilogue=bias+relu"
    assert design_space(tt.workload(dense), cross).default["pack_weights"]
    depthwise = "conv2d:C=96,H=14,W=14,K=96,R=3,S=3,pad=1,groups=96,layout=NHWC"
    assert not design_space(tt.workload(depthwise), cross).default["pack_weights"]
    nchw = design_space(tt.workload(dense.replace(",layout=NHWC", "")), cross)
    assert "pack_weights" not in nchw.space.names  # every NCHW record stays a point


def test_nhwc_configs_from_before_the_pack_knob_still_build(target) -> None:
    """A config without ``pack_weights`` (recorded before the knob) is still a point of the
    space (``absent_means``), and builds the unpacked tile it was measured as."""
    wl = tt.workload("conv2d:C=19,H=9,W=13,K=37,R=3,S=3,pad=1,layout=NHWC,epilogue=bias+relu")
    ds = design_space(wl, target)
    old = {k: v for k, v in ds.default.items() if k != "pack_weights"}
    assert ds.space.is_valid(old)
    assert ds.schedule(old).trace == ds.schedule({**old, "pack_weights": False}).trace
    schedule = ds.build(old)
    source, _ = build_source(schedule, "conv2d", target)
    assert "W_pack" not in source
    inputs = wl.random_inputs(0)
    kernel = tt.compile(wl, schedule=ds.build(old), target=target)
    np.testing.assert_allclose(kernel(*inputs), wl.reference(inputs), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    "spec",
    [
        "conv2d:C=32,H=9,W=9,K=32,R=3,S=3,pad=1,groups=4",
        "conv2d:C=64,H=7,W=7,K=64,R=3,S=3,stride=2,pad=1,groups=4",
        "conv2d:C=64,H=8,W=8,K=64,R=1,S=1,groups=2",
        "conv2d:C=24,H=7,W=9,K=36,R=3,S=3,pad=1,groups=3",
    ],
)
@pytest.mark.parametrize("constant", [False, True])
def test_grouped_convs_tile_output_channels_and_match_numpy(spec, constant, target) -> None:
    """Groups of 8 or more output channels take channel-vector tiles by default (ResNeXt's
    32-group convs: 3x the column tiles' speed), and every channel-tile config of them, the
    default and samples, with the weights packed once or per call, computes what NumPy does."""
    wl = tt.workload(spec).with_constants(("W",) if constant else ())
    ds = design_space(wl, target)
    assert ds.default["vector_axis"] == "channels"
    samples = ds.space.sample(np.random.default_rng(len(spec)), 12)
    configs = [ds.default, *[c for c in samples if c["vector_axis"] == "channels"][:3]]
    inputs = wl.random_inputs(0)
    values = {t.name: a for t, a in zip(wl.inputs, inputs, strict=True)}
    for config in configs:
        kernel = tt.compile(wl, schedule=ds.schedule(config), target=target, constants=wl.constants)
        got = kernel(*kernel.feeds(values))
        np.testing.assert_allclose(
            got, wl.reference(inputs), rtol=1e-4, atol=1e-4, err_msg=str(config)
        )


def test_depthwise_and_small_groups_keep_column_tiles(target) -> None:
    """A depthwise lane would read its own input plane (a gather): no channel tiles there."""
    for spec in (
        "depthwise_conv2d:C=32,H=9,W=9,R=3,S=3,pad=1",
        "conv2d:C=8,H=9,W=9,K=8,R=3,S=3,groups=2",
    ):
        ds = design_space(tt.workload(spec), target)
        assert ds.space.knob("vector_axis").choices == ("columns",)


DEPTHWISE_SPECS = [
    "depthwise_conv2d:C=3,H=13,W=13,R=3,S=3,pad=1",
    "depthwise_conv2d:C=3,H=27,W=27,R=3,S=3,stride=2,pad=1",
    "depthwise_conv2d:C=2,H=13,W=27,R=5,S=5,pad=2",
    "depthwise_conv2d:C=2,H=27,W=13,R=5,S=5,stride=2,pad=2",
    "depthwise_conv2d:C=2,H=13,W=13,R=7,S=7,pad=3",
    "depthwise_conv2d:C=2,H=27,W=27,R=7,S=7,stride=2,pad=3",
    "conv2d:C=4,H=11,W=13,K=4,R=3,S=3,stride=2,pad=1,groups=4,epilogue=bias+relu",
]
ROW_TILES = [
    {"rows": 3, "vectors": 2, "lanes": 8, "inline_pad": True},
    {"rows": 8, "vectors": 1, "lanes": 8, "inline_pad": False},
    {"rows": 5, "vectors": 1, "lanes": 8, "inline_pad": True, "reduce_order": "rsc"},
]


@pytest.mark.parametrize("spec", DEPTHWISE_SPECS)
def test_depthwise_output_row_tiles_match_numpy(spec: str, target) -> None:
    """Tiles of a channel's output rows, ragged in rows and columns, strided, padded or not,
    with the epilogue fused or apart, compute what NumPy does."""
    wl = tt.workload(spec)
    ds = design_space(wl, target)
    assert ds.space.knob("row_axis").choices == ("channels", "pixels")
    fused = ({"fuse_epilogue": True}, {"fuse_epilogue": False}) if "epilogue" in spec else ({},)
    configs = [ds.default] + [
        {**ds.default, "row_axis": "pixels", **tile, **f} for tile in ROW_TILES for f in fused
    ]
    checked = assert_configs_match_numpy(ds, configs, skip_invalid=True)
    assert checked >= 3


@pytest.mark.parametrize("isa", ["avx2", "avx512"])
def test_depthwise_row_tile_unrolls_the_window_rows(isa: str) -> None:
    """A row tile unrolls the window's rows inside each column offset, so the tile's rows read
    each input row once per offset: a 7x7 window on 4 rows x 1 vector reads 10 distinct input
    rows' vectors per offset (not 28), and broadcasts 7 weights (not 28)."""
    cross = tt.Target.cross(isa, num_threads=2)
    wl = tt.workload("depthwise_conv2d:C=8,H=28,W=28,R=7,S=7,pad=3")
    ds = design_space(wl, cross)
    config = {**ds.default, "row_axis": "pixels", "rows": 4, "vectors": 1, "inline_pad": False}
    source, _ = build_source(ds.schedule(config), "conv2d", cross)
    conv = source.split("/* stage conv2d */")[1]
    assert "for (int s = 0; s < 7; ++s)" in conv and "for (int r " not in conv
    block = conv.split("for (int s = 0; s < 7; ++s) {")[1].split("}")[0]  # the full tile's
    loads = re.findall(r"tt_load_f32x\d+\(&X_pad\[([^\]]*)\]\)", block)
    weights = re.findall(r"tt_bcast_f32x\d+\(&W\[([^\]]*)\]\)", block)
    assert (len(loads), len(set(loads))) == (28, 10)
    assert (len(weights), len(set(weights))) == (28, 7)


def test_depthwise_configs_from_before_the_row_knob_still_build(target) -> None:
    """A config without ``row_axis`` (recorded before it) builds the channel tile it was
    measured as; the knob exists only for depthwise NCHW convs."""
    wl = tt.workload("depthwise_conv2d:C=5,H=13,W=11,R=5,S=5,stride=2,pad=2")
    ds = design_space(wl, target)
    old = {k: v for k, v in ds.default.items() if k != "row_axis"} | {"rows": 3, "vectors": 1}
    assert ds.space.is_valid(old)
    assert ds.schedule(old).trace == ds.schedule({**old, "row_axis": "channels"}).trace
    assert ds.schedule(old).trace != ds.schedule({**old, "row_axis": "pixels"}).trace
    inputs = wl.random_inputs(0)
    kernel = tt.compile(wl, schedule=ds.build(old), target=target)
    np.testing.assert_allclose(kernel(*inputs), wl.reference(inputs), rtol=1e-4, atol=1e-4)
    for spec in (
        "conv2d:C=8,H=9,W=9,K=8,R=3,S=3,groups=2",
        "conv2d:C=1,H=9,W=9,K=8,R=3,S=3",  # one input channel, but every output reads it
        "conv2d:C=5,H=8,W=10,K=5,R=3,S=3,groups=5,layout=NHWC",
    ):
        assert "row_axis" not in design_space(tt.workload(spec), target).space.names


C_BLOCK_SPECS = [
    "conv2d:C=520,H=5,W=7,K=20,R=1,S=1",  # a short last block (520 = 4 x 128 + 8)
    "conv2d:C=512,H=5,W=5,K=24,R=3,S=3,pad=1",
    "conv2d:C=600,H=11,W=11,K=16,R=3,S=3,stride=2,pad=1,epilogue=bias+relu",
    # fewer channels, a long reduction (288 x 3 x 3, Inception's 3x3/2): 32-channel blocks
    "conv2d:C=288,H=13,W=13,K=20,R=3,S=3,stride=2",
]


@pytest.mark.parametrize("spec", C_BLOCK_SPECS)
def test_channel_tiles_over_blocks_of_input_channels_match_numpy(spec: str, target) -> None:
    ds = design_space(tt.workload(spec), target)
    assert ds.space.knob("c_block").choices == (0, 32, 128, 256)
    unfused = {"fuse_epilogue": False} if "fuse_epilogue" in ds.space.names else {}
    configs = [
        {**ds.default, "vector_axis": "channels", **tile, **unfused, "c_block": c_block}
        for tile, c_block in zip(TILES, (128, 256, 32), strict=True)
    ]
    assert all(ds.space.is_valid(c) for c in configs)
    assert_configs_match_numpy(ds, configs)


def test_channel_blocks_run_outside_the_tiles_and_old_configs_keep_whole_channels(
    avx512_target,
) -> None:
    """The block loop is the outermost, serial, with the tiles' parallel loop inside it (and the
    output reset before it in parallel); a
    config without the knob (recorded before it) sums all input channels in each tile; the
    knob exists where there are many input channels, or a long reduction, to block."""
    wl = tt.workload("conv2d:C=600,H=9,W=9,K=32,R=1,S=1,epilogue=relu")
    ds = design_space(wl, avx512_target)
    config = {**ds.default, "vector_axis": "channels", "fuse_epilogue": False, "c_block": 256}
    source, _ = build_source(ds.schedule(config), "conv", avx512_target)
    body = source[source.index("/* stage conv2d */") :]
    block = body.index("for (int c_o = 0; c_o < 3; ++c_o) {")
    tiles = body.index("#pragma omp parallel", block)
    assert tiles < body.index("for (int c_i = 0; c_i < 256;")
    assert body.index("#pragma omp parallel") < block  # the output's reset, in parallel too
    old = {k: v for k, v in config.items() if k != "c_block"}
    assert ds.space.is_valid(old) and ds.space.complete(old)["c_block"] == 0
    assert "c_o" not in build_source(ds.schedule(old), "conv", avx512_target)[0]
    for bad in ({"fuse_epilogue": True}, {"vector_axis": "columns"}):  # unfused channel tiles
        assert not ds.space.is_valid({**config, **bad}), bad
    for short in ("conv2d:C=256,H=9,W=9,K=32,R=1,S=1", "conv2d:C=128,H=9,W=9,K=32,R=3,S=3"):
        assert "c_block" not in design_space(tt.workload(short), avx512_target).space.names
    long = tt.workload("conv2d:C=288,H=9,W=9,K=32,R=3,S=3,stride=2")  # reduction 2592
    assert "c_block" in design_space(long, avx512_target).space.names
    # blocks split the channels in two or more: rfactor refuses one block of all 256
    whole = design_space(tt.workload("conv2d:C=256,H=9,W=9,K=32,R=3,S=3"), avx512_target)
    assert whole.space.knob("c_block").choices == (0, 32, 128)
