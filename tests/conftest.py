"""Fixtures shared by the whole suite."""

from __future__ import annotations

import os

import pytest

from tensortune.target import Target

pytest_plugins = ["tests.session_summary"]


@pytest.fixture(autouse=True, scope="session")
def _private_kernel_cache(tmp_path_factory: pytest.TempPathFactory):
    """Every test compiles into a throwaway kernel cache, never the user's, and times with short
    repeats (the tests check what the tuner does, not how fast a kernel runs); both reach the
    tuners that tests start as processes."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TENSORTUNE_CACHE_DIR", str(tmp_path_factory.mktemp("kernels")))
        patch.setenv("TENSORTUNE_MIN_REPEAT_MS", "2")
        yield


@pytest.fixture(scope="session")
def target() -> Target:
    """A fixed 2-thread target, whatever the machine's core count.

    TENSORTUNE_TEST_ISA downgrades it (e.g. ``avx2`` on an AVX-512 host), so one machine can
    check that the suite holds on the CPUs it lacks but users have."""
    return Target.detect(num_threads=2, isa=os.environ.get("TENSORTUNE_TEST_ISA") or None)


@pytest.fixture(scope="session")
def avx512_target() -> Target:
    """A 2-thread AVX-512 target whatever this CPU runs: for tests that read generated code or
    check register-file constraints (32 vector registers), never for running kernels."""
    return Target.cross("avx512", num_threads=2)
