"""Fixtures shared by the whole suite."""

from __future__ import annotations

import pytest

from tensortune.target import Target


@pytest.fixture(autouse=True, scope="session")
def _private_kernel_cache(tmp_path_factory: pytest.TempPathFactory):
    """Every test compiles into a throwaway kernel cache, never the user's."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TENSORTUNE_CACHE_DIR", str(tmp_path_factory.mktemp("kernels")))
        yield


@pytest.fixture(scope="session")
def target() -> Target:
    """A fixed 2-thread target, whatever the machine's core count."""
    return Target.detect(num_threads=2)
