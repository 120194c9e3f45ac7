from pathlib import Path

import pytest

from tensortune.build import compiler
from tensortune.build.compiler import CompileError
from tensortune.measure.builder import build_candidates
from tensortune.target import Target

from . import c_kernels


@pytest.fixture(scope="module")
def target() -> Target:
    return Target.from_string("generic threads=1")


def test_results_follow_input_order_and_failures_are_values(target: Target):
    results = build_candidates(
        [c_kernels.GOOD, c_kernels.NO_COMPILE, (c_kernels.WRONG, "-O1"), c_kernels.SLOW], target
    )
    assert [isinstance(r, CompileError) for r in results] == [False, True, False, False]
    error = results[1]
    assert isinstance(error, CompileError)
    assert "expected expression" in error.log
    assert all(isinstance(r, Path) and r.exists() for r in (results[0], results[2], results[3]))
    assert len({results[0], results[2], results[3]}) == 3


def test_identical_sources_compile_once(
    target: Target, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
):
    monkeypatch.setenv("TENSORTUNE_CACHE_DIR", str(tmp_path))
    calls: list[tuple[str, tuple[str, ...]]] = []
    real = compiler.compile_library

    def counting(source, target, extra_flags=()):
        calls.append((source, tuple(extra_flags)))
        return real(source, target, extra_flags)

    monkeypatch.setattr("tensortune.measure.builder.compile_library", counting)
    sources = [c_kernels.GOOD, (c_kernels.GOOD,), c_kernels.GOOD, (c_kernels.GOOD, "-O1")]
    results = build_candidates(sources, target, n_workers=2)
    assert results[0] == results[1] == results[2] != results[3]
    assert sorted(calls) == sorted([(c_kernels.GOOD, ()), (c_kernels.GOOD, ("-O1",))])


def test_empty_batch(target: Target):
    assert build_candidates([], target) == []
