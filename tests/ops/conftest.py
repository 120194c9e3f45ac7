import numpy as np
import pytest


@pytest.fixture
def rand():
    """A deterministic float32 array factory: ``rand(2, 3)`` is uniform in [-1, 1)."""
    rng = np.random.default_rng(0)

    def make(*shape: int) -> np.ndarray:
        return rng.uniform(-1, 1, shape).astype(np.float32)

    return make
