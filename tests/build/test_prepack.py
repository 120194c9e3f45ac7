"""Kernels built with constant weights: the weights are packed once by ``<kernel>_prepack``, the
kernel takes the packed copy and computes what it computed before (checked against NumPy), and
its C has no packing loop left."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tensortune.backend import backend_for
from tensortune.errors import KernelArgumentError
from tensortune.pipeline import compile
from tensortune.space.registry import design_space
from tensortune.workload import workload

SETTINGS = settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _function(source: str, name: str) -> str:
    """The C text of function ``name`` in a translation unit."""
    start = source.index(f"int {name}(")
    return source[start : source.index("\n}\n", start) + 3]


def _conv_reference(x: np.ndarray, w: np.ndarray, stride: int, pad: int) -> np.ndarray:
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    r, s = w.shape[2:]
    windows = np.lib.stride_tricks.sliding_window_view(xp, (r, s), axis=(2, 3))
    windows = windows[:, :, ::stride, ::stride]
    return np.einsum("ncpqrs,kcrs->nkpq", windows, w, optimize=True)


def _compile_both(spec: str, config_change: dict, weights: str, target):
    wl = workload(spec)
    ds = design_space(wl, target)
    sch = ds.schedule({**ds.default, **config_change})
    return wl, compile(wl, sch, target, constants=(weights,)), compile(wl, sch, target)


def _check_split_source(kernel, name: str, weights: str) -> None:
    packed = f"{weights}_pack"
    run = _function(kernel.source, name)
    prepack = _function(kernel.source, f"{name}_prepack")
    store = re.compile(rf"(store\w*\(&{packed}\[|\b{packed}\[[^\]]*\] =)")
    assert not store.search(run), "the kernel still packs the weights"
    assert f"stage {packed}" not in run and f"restrict {weights}," not in run
    assert f"const float* restrict {packed}," in run.splitlines()[0]
    assert store.search(prepack) and f"stage {packed}" in prepack
    assert [a.name for a in kernel.prepack.args] == [weights, packed]


@SETTINGS
@given(
    st.sampled_from([3, 8, 16]),
    st.sampled_from([8, 20, 32]),
    st.integers(3, 9),
    st.sampled_from([(1, 1, 0), (3, 1, 1), (3, 2, 1)]),
)
def test_conv_with_constant_weights_matches_numpy(target, c, k, hw, window):
    r, stride, pad = window
    spec = f"conv2d:C={c},H={hw},W={hw},K={k},R={r},S={r},stride={stride},pad={pad}"
    wl, kernel, plain = _compile_both(spec, {}, "W", target)
    x, w = wl.random_inputs(seed=c + k + hw)
    assert kernel.prepack is not None and plain.prepack is None
    _check_split_source(kernel, "conv2d", "W")
    y = kernel(x, kernel.prepack(w))
    np.testing.assert_allclose(y, _conv_reference(x, w, stride, pad), rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(y, plain(x, w))  # the same arithmetic in the same order


@SETTINGS
@given(
    st.integers(16, 40), st.integers(5, 70), st.integers(3, 50), st.sampled_from(["root", "panel"])
)
def test_dense_with_constant_weights_matches_numpy(target, m, n, k, pack_at):
    wl, kernel, plain = _compile_both(
        f"dense:M={m},N={n},K={k}", {"pack_b": True, "pack_at": pack_at, "order": "ji"}, "W", target
    )
    x, w = wl.random_inputs(seed=m + n + k)
    _check_split_source(kernel, "dense", "W")
    y = kernel(x, kernel.prepack(w))
    np.testing.assert_allclose(y, x @ w.T, rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(y, plain(x, w))


def test_without_constants_the_source_is_unchanged(target):
    wl = workload("conv2d:C=16,H=7,W=7,K=32,R=3,S=3,pad=1")
    ds = design_space(wl, target)
    sch = ds.schedule(ds.default)
    backend = backend_for(target)
    source, split = backend.generate_prepacked(sch, "conv2d")
    assert split.prepack is None
    assert source == backend.generate(sch, "conv2d")[0]
    assert "prepack" not in source
    with_weights, _ = backend.generate_prepacked(sch, "conv2d", ("W",))
    assert "constant inputs: W" in with_weights  # the header says what was fixed


def test_feeds_take_inputs_by_name_and_run_the_prepack_once(target):
    wl, kernel, plain = _compile_both("dense:M=20,N=33,K=17", {"pack_b": True}, "W", target)
    x, w = wl.random_inputs(seed=1)
    feeds = kernel.feeds({"W": w, "X": x})
    assert [a.shape for a in feeds] == [spec.shape for spec in kernel.inputs]
    assert feeds[0] is x and feeds[1] is not w  # the packed copy takes the weights' place
    np.testing.assert_array_equal(kernel(*feeds), plain(x, w))
    assert all(a is b for a, b in zip(plain.feeds({"W": w, "X": x}), (x, w), strict=True))


def test_feeds_name_a_missing_input(target):
    _, kernel, _ = _compile_both("dense:M=20,N=33,K=17", {"pack_b": True}, "W", target)
    with pytest.raises(KernelArgumentError, match=r"argument 'W' .* among X"):
        kernel.feeds({"X": np.zeros((20, 17), np.float32)})
