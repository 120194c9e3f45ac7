"""The per-kernel profile: every kernel call timed inside the model's own run."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the graph tests need the optional onnx package")
pytest.importorskip("onnxruntime", reason="the graph tests compare against onnxruntime")

from tensortune.graph import compile_model  # noqa: E402
from tensortune.graph.profile import profile_table, random_feeds, summary_lines  # noqa: E402

from . import builders  # noqa: E402


@pytest.fixture(scope="module")
def block(target):
    """A MobileNetV2 block big enough (32 channels, 24x24, 6x expansion) that its kernels
    dominate the Python call: a few hundred microseconds. In NCHW: three kernels, no
    transposes (tests/graph/test_layout.py profiles the NHWC form)."""
    model = builders.inverted_residual(c=32, hw=24, expand=6, out_c=32)
    return compile_model(model, target=target, layout="NCHW")


def test_rows_cover_every_kernel_call(block):
    prof = block.profile(rounds=5)
    assert [r.kernel for r in prof.rows] == [c.unit.name for c in block.steps]
    assert [r.step for r in prof.rows] == list(range(len(block.steps)))
    assert all(r.us > 0 for r in prof.rows)
    assert sum(r.share for r in prof.rows) == pytest.approx(1.0)
    graph_nodes = {n.name for n in block.graph.nodes}
    for row, call in zip(prof.rows, block.steps, strict=True):
        assert row.nodes and set(row.nodes) <= graph_nodes
        assert row.shape == block.graph.values[call.group.output].shape
    classes = [r.op for r in prof.rows]
    assert classes == ["Conv 1x1 s1", "Conv 3x3 depthwise s2", "Conv 1x1 s1"]
    assert prof.rows[1].ops == "Conv+Clip"  # batch norm folded, ReLU6 fused
    assert prof.by_op()["Conv 1x1 s1"][0] == 2


def test_every_step_is_timed_and_the_sum_stays_within_a_whole_run(block):
    """One row per kernel call, each timed, their shares adding up; the calls' sum is a whole
    run less the Python call and output copy, so never (beyond noise) above it. (How far below
    depends on the host's load: the tests run beside each other.)"""
    prof = block.profile(rounds=30)
    assert [r.step for r in prof.rows] == list(range(len(block.steps)))
    assert all(r.us > 0 for r in prof.rows)
    assert sum(r.share for r in prof.rows) == pytest.approx(1.0)
    assert prof.total_us < prof.whole_us * 1.25


def test_timed_run_computes_the_same(block):
    feeds = random_feeds(block.inputs, seed=3)
    want = block.run(feeds)
    seconds = np.zeros(len(block.steps))
    got = block._invoke(feeds, seconds)
    for name, value in want.items():
        np.testing.assert_array_equal(got[name], value)
    assert (seconds > 0).all()


def test_table_and_summary(block):
    prof = block.profile(feeds=random_feeds(block.inputs), rounds=3)
    table = profile_table(prof)
    assert table[0][:2] == ["step", "kernel"] and len(table) == len(prof.rows) + 1
    top = profile_table(prof, top=1)
    assert len(top) == 2 and float(top[1][5]) == pytest.approx(max(r.us for r in prof.rows), 0.1)
    lines = summary_lines(prof)
    assert any(line.startswith("Conv 3x3 depthwise s2") for line in lines)
    assert "whole model.run" in lines[-1]
