"""Every test here compiles into a private kernel cache, never the user's."""

import pytest


@pytest.fixture(autouse=True, scope="session")
def _private_kernel_cache(tmp_path_factory: pytest.TempPathFactory):
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TENSORTUNE_CACHE_DIR", str(tmp_path_factory.mktemp("kernels")))
        yield
