"""Transferable features: every op class, random legal schedules, documented columns."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import tensortune as tt
from tensortune.cost_model import (
    LOOP_FEATURES,
    TRANSFERABLE_FEATURES,
    LoopNestFeatures,
    feature_docs,
    transferable_features,
)
from tensortune.cost_model import features as features_module
from tensortune.cost_model.features import (
    ACCESS_FEATURES,
    BUILD_FEATURES,
    DELTA_FEATURES,
    PROGRAM_FEATURES,
    TARGET_FEATURES,
)
from tensortune.space.registry import design_space
from tensortune.target import Target

#: One small workload of every op class (and the layout and epilogue forms).
SPECS = (
    "matmul:M=24,N=40,K=32",
    "matmul:M=16,N=32,K=16,epilogue=bias+gelu",
    "dense:M=4,N=64,K=48",
    "batch_matmul:B=3,M=16,N=24,K=32",
    "conv2d:C=8,H=10,W=10,K=16,R=3,S=3,pad=1",
    "conv2d:C=4,H=9,W=9,K=8,R=3,S=3,stride=2,layout=NHWC",
    "depthwise_conv2d:C=8,H=12,W=12,R=5,S=5,pad=2",
    "maxpool2d:C=8,H=12,W=12,R=3,S=3,stride=2",
    "softmax:rows=8,cols=40",
    "layernorm:rows=6,cols=48",
)


def column(name: str) -> int:
    return TRANSFERABLE_FEATURES.index(name)


@pytest.mark.parametrize("spec", SPECS)
def test_deterministic_and_finite_for_random_schedules(spec: str, target: Target) -> None:
    design = design_space(tt.workload(spec), target)
    configs = [design.default, *design.space.sample(np.random.default_rng(len(spec)), 6)]
    x = transferable_features(design, configs)
    assert x.shape == (len(configs), len(TRANSFERABLE_FEATURES)) and x.dtype == np.float64
    assert np.isfinite(x).all()
    fresh = design_space(tt.workload(spec), target)  # a new space: nothing cached
    np.testing.assert_array_equal(transferable_features(fresh, configs), x)
    np.testing.assert_array_equal(transferable_features(design, configs[::-1]), x[::-1])
    in_run = LoopNestFeatures(design)(configs)
    np.testing.assert_array_equal(in_run[:, : len(TRANSFERABLE_FEATURES)], x)
    assert in_run.shape[1] == len(TRANSFERABLE_FEATURES) + len(design.space.feature_names)


def test_no_knob_in_the_transferable_set(target: Target) -> None:
    assert len(set(TRANSFERABLE_FEATURES)) == len(TRANSFERABLE_FEATURES)
    assert PROGRAM_FEATURES == LOOP_FEATURES + ACCESS_FEATURES + BUILD_FEATURES
    for spec in SPECS:
        knobs = design_space(tt.workload(spec), target).space.feature_names
        assert not set(knobs) & set(TRANSFERABLE_FEATURES)


def test_arithmetic_kinds_follow_the_op(target: Target) -> None:
    def row(spec: str) -> np.ndarray:
        design = design_space(tt.workload(spec), target)
        return transferable_features(design, [design.default])[0]

    gemm, pool, softmax = row(SPECS[0]), row(SPECS[7]), row(SPECS[8])
    assert gemm[column("ops_mul")] >= 1 and gemm[column("ops_addsub")] >= 1
    assert pool[column("ops_minmax")] >= 1 and pool[column("ops_mul")] == 0
    assert softmax[column("ops_call")] >= 1  # exp


def test_target_columns_describe_the_target() -> None:
    design = design_space(tt.workload(SPECS[0]), Target.cross("avx512", num_threads=4))
    narrow = design_space(tt.workload(SPECS[0]), Target.cross("avx2", num_threads=1))
    wide = transferable_features(design, [design.default])[0]
    row = transferable_features(narrow, [narrow.default])[0]
    assert wide[column("target_vector_bits")] == 512 and row[column("target_vector_bits")] == 256
    assert wide[column("target_f32_lanes")] == 16 and row[column("target_f32_lanes")] == 8
    assert (wide[column("target_threads")], row[column("target_threads")]) == (4, 1)
    assert wide[column("target_has_avx512")] == 1 and row[column("target_has_avx512")] == 0
    assert wide[column("target_has_fma")] == row[column("target_has_fma")] == 1


def test_working_set_grows_with_the_problem(target: Target) -> None:
    def row(spec: str) -> np.ndarray:
        design = design_space(tt.workload(spec), target)
        return transferable_features(design, [design.default])[0]

    small, big = row("matmul:M=32,N=32,K=32"), row("matmul:M=256,N=256,K=256")
    assert big[column("log_flops")] == small[column("log_flops")] + 9
    assert big[column("log_compulsory_bytes")] > small[column("log_compulsory_bytes")]
    assert big[column("log_bytes_outer")] >= small[column("log_bytes_outer")]


def test_every_feature_is_documented_once_in_column_order() -> None:
    sections = {s.constant: [row[0] for row in s.rows] for s in feature_docs.SECTIONS}
    assert sections["LOOP_FEATURES"] == list(LOOP_FEATURES)
    assert sections["ACCESS_FEATURES"] == list(ACCESS_FEATURES)
    assert sections["BUILD_FEATURES"] == list(BUILD_FEATURES)
    assert sections["TARGET_FEATURES"] == list(TARGET_FEATURES)
    assert list(DELTA_FEATURES) == [f"delta_{name}" for name in PROGRAM_FEATURES]
    assert TRANSFERABLE_FEATURES == PROGRAM_FEATURES + DELTA_FEATURES + TARGET_FEATURES
    for section in feature_docs.SECTIONS:
        assert all(meaning and unit for _, meaning, unit in section.rows), section.title
    page = feature_docs.markdown()
    documented = re.findall(r"^\| `([a-z0-9_<>]+)` \|", page, flags=re.MULTILINE)
    assert documented == [
        *PROGRAM_FEATURES,
        "delta_<name>",
        *TARGET_FEATURES,
    ]


def test_no_configs_and_a_bounded_cache(target: Target) -> None:
    designs = [design_space(tt.workload(f"softmax:rows=2,cols={n}"), target) for n in range(1, 41)]
    for design in designs:
        assert transferable_features(design, []).shape == (0, len(TRANSFERABLE_FEATURES))
    assert len(features_module._EXTRACTORS) <= 16


def test_the_docs_page_is_the_generated_one() -> None:
    """docs/cost_model_features.md is ``python -m tensortune.cost_model.feature_docs``'s output."""
    page = Path(__file__).resolve().parents[2] / "docs" / "cost_model_features.md"
    assert page.read_text() == feature_docs.markdown(), (
        "regenerate: python -m tensortune.cost_model.feature_docs > docs/cost_model_features.md"
    )
