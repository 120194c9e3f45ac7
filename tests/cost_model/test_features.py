"""Loop-nest features: fixed shape, deterministic, and they see what the lowered code does."""

from __future__ import annotations

import numpy as np
import pytest

import tensortune as tt
from tensortune.cost_model import LOOP_FEATURES, TRANSFERABLE_FEATURES, LoopNestFeatures
from tensortune.cost_model.features import PROGRAM_FEATURES
from tensortune.errors import ScheduleError
from tensortune.schedule import Schedule
from tensortune.space import Knob, SearchSpace
from tensortune.space.registry import design_space
from tensortune.space.template import DesignSpace
from tensortune.target import Target


def column(name: str) -> int:
    return LOOP_FEATURES.index(name)


@pytest.fixture(scope="module")
def gemm(avx512_target: Target) -> DesignSpace:
    return design_space(tt.workload("matmul:M=64,N=64,K=64"), avx512_target)


def tile(gemm: DesignSpace, **knobs: object) -> dict:
    return {**gemm.default, "variant": "tile", **knobs}


def test_one_row_per_config_with_named_columns(gemm: DesignSpace) -> None:
    configs = gemm.space.sample(0, 5)
    x = LoopNestFeatures(gemm)(configs)
    names = LoopNestFeatures(gemm).names
    assert x.shape == (5, len(TRANSFERABLE_FEATURES) + len(gemm.space.feature_names))
    assert names == TRANSFERABLE_FEATURES + gemm.space.feature_names
    assert np.isfinite(x).all()


def test_deterministic_across_instances(gemm: DesignSpace) -> None:
    configs = gemm.space.sample(1, 4)
    np.testing.assert_array_equal(LoopNestFeatures(gemm)(configs), LoopNestFeatures(gemm)(configs))


def test_register_tile_shows_in_accumulators_and_reuse(gemm: DesignSpace) -> None:
    small, big = tile(gemm, mr=2, nr_vectors=1), tile(gemm, mr=8, nr_vectors=2)
    x = LoopNestFeatures(gemm)([small, big])
    assert x[0, column("accumulator_vectors")] == 2
    assert x[1, column("accumulator_vectors")] == 16
    assert x[1, column("fma_per_load")] > x[0, column("fma_per_load")]
    lanes = gemm.target.lanes("float32")
    assert x[0, column("vector_lanes")] == x[1, column("vector_lanes")] == lanes


def test_configs_that_lower_differently_differ(gemm: DesignSpace) -> None:
    packed = tile(gemm, pack_b=True, pack_at="root")
    unpacked = tile(gemm, pack_b=False, pack_at="root")
    x = LoopNestFeatures(gemm)([packed, unpacked])[:, : len(LOOP_FEATURES)]
    assert x[0, column("log_temp_bytes")] > x[1, column("log_temp_bytes")]
    assert not np.array_equal(x[0], x[1])


def test_program_key_ignores_knobs_the_build_ignores(target: Target) -> None:
    wl = tt.workload("matmul:M=32,N=32,K=32")

    def build(config: dict) -> Schedule:
        s = Schedule(wl.outputs)
        s.split(s.stages[-1].name, s.stages[-1].leaves[0].name, config["tile"])
        return s

    space = SearchSpace([Knob("tile", (2, 4)), Knob("unused", (1, 2))])
    design = DesignSpace(wl, target, space, build, {"tile": 2, "unused": 1})
    features = LoopNestFeatures(design)
    keys = [features.program_key(c) for c in space.enumerate()]  # (2,1) (2,2) (4,1) (4,2)
    assert keys[0] == keys[1] != keys[2] == keys[3]


def test_a_config_that_fails_to_schedule_gets_missing_loop_features(target: Target) -> None:
    wl = tt.workload("matmul:M=32,N=32,K=32")

    def build(config: dict) -> Schedule:
        s = Schedule(wl.outputs)
        if config["bad"]:
            raise ScheduleError("split", "i", "this variant cannot be built")
        return s

    space = SearchSpace([Knob("bad", (False, True))])
    design = DesignSpace(wl, target, space, build, {"bad": False})
    x = LoopNestFeatures(design)([{"bad": False}, {"bad": True}])
    assert np.isfinite(x[0]).all()
    assert (x[0, len(PROGRAM_FEATURES) : 2 * len(PROGRAM_FEATURES)] == 0).all()  # the default
    assert np.isnan(x[1, : 2 * len(PROGRAM_FEATURES)]).all()  # program and delta columns
    assert np.isfinite(x[1, 2 * len(PROGRAM_FEATURES) :]).all()  # target and knob columns remain


def test_build_flags_are_program_features_and_deltas_are_against_the_default(
    gemm: DesignSpace,
) -> None:
    o2, o3 = tile(gemm, opt_level="O2"), tile(gemm, opt_level="O3")
    x = LoopNestFeatures(gemm).transferable([o2, o3, gemm.default])
    level = TRANSFERABLE_FEATURES.index("build_opt_level")
    assert x[0, level] == 2 and x[1, level] == 3
    differ = np.flatnonzero(x[0, : len(PROGRAM_FEATURES)] != x[1, : len(PROGRAM_FEATURES)])
    assert [PROGRAM_FEATURES[i] for i in differ] == ["build_opt_level"]
    delta = slice(len(PROGRAM_FEATURES), 2 * len(PROGRAM_FEATURES))
    np.testing.assert_array_equal(x[2, delta], 0)
    np.testing.assert_array_equal(
        x[0, delta], x[0, : len(PROGRAM_FEATURES)] - x[2, : len(PROGRAM_FEATURES)]
    )


def test_a_column_walked_down_costs_a_cache_line_per_element(avx512_target: Target) -> None:
    """dense's weights are [N, K]: a vector over N gathers one element per row. Unrolling k by 16
    uses all 16 floats of each line it fetches; unrolled by 1 it refetches every line 16 times."""
    design = design_space(tt.workload("dense:M=1,N=768,K=768"), avx512_target)
    stream = {**design.default, "variant": "stream", "nr_vectors": 1}
    x = LoopNestFeatures(design).transferable(
        [{**stream, "k_unroll": 16}, {**stream, "k_unroll": 1}]
    )
    l1 = TRANSFERABLE_FEATURES.index("log_l1_traffic_per_flop")
    assert x[1, l1] - x[0, l1] == pytest.approx(4.0)  # log2(16)
    inner = TRANSFERABLE_FEATURES.index("log_bytes_inner")
    # the output read and written (one line), the broadcast input (one), 16 lines of weights
    assert x[1, inner] == pytest.approx(np.log2((1 + 1 + 16) * 64))


def test_register_pressure_counts_the_tiles_live_vectors_against_the_targets_registers(
    avx512_target: Target,
) -> None:
    """A 6x2 tile keeps 12 accumulators, its 2 vectors of B and 1 broadcast of A live: 15
    registers, of 32 on AVX-512 and 16 on AVX2. An 8x2 tile (19) spills 3 on AVX2, where the
    template's own constraint forbids it; its build, without the constraint, still makes it."""
    avx2 = Target.cross("avx2", num_threads=2)
    wl = tt.workload("matmul:M=64,N=64,K=64")
    rows = []
    for target, mr in ((avx512_target, 6), (avx2, 6), (avx2, 8)):
        built = design_space(wl, target)
        free = DesignSpace(wl, target, SearchSpace(built.space.knobs), built.build, built.default)
        rows.append(LoopNestFeatures(free)([tile(free, mr=mr, nr_vectors=2)])[0])
    x = np.array(rows)
    np.testing.assert_array_equal(x[:, column("accumulator_vectors")], [12, 12, 16])
    np.testing.assert_allclose(x[:, column("register_pressure")], [15 / 32, 15 / 16, 19 / 16])
    np.testing.assert_array_equal(x[:, column("spilled_vectors")], [0, 0, 3])


def test_a_depthwise_tile_streams_its_operands(avx512_target: Target) -> None:
    """In a depthwise tile every accumulator has its own input vector and weight broadcast: no
    operand feeds two of them, so both stream through one register each and 28 rows need
    28 + 2 registers, not the 28 + 28 + 1 an outer-product tile of 28 loads would."""
    design = design_space(
        tt.workload("depthwise_conv2d:C=64,H=14,W=14,R=3,S=3,pad=1"), avx512_target
    )
    one_channel_per_row = {"row_axis": "channels", "vectors": 1, "lanes": 16, "rows": 28}
    config = {**design.default, **one_channel_per_row}
    x = LoopNestFeatures(design)([config])[0]
    assert x[column("accumulator_vectors")] == x[column("vector_loads")] == 28
    assert x[column("broadcasts")] == 28
    assert x[column("register_pressure")] == pytest.approx(30 / 32)
    assert x[column("spilled_vectors")] == 0
