"""A synthetic tuning problem with a known optimum, shared by the search tests."""

from __future__ import annotations

import math

import pytest

from tensortune.space import Config, Constraint, Knob, SearchSpace

POW2 = (1, 2, 4, 8, 16, 32, 64, 128)
#: log2 of the optimal value of each knob
OPTIMUM = (3, 5, 1, 4)


def synthetic_space() -> SearchSpace:
    """Four tile-size-like knobs and a register-pressure-like constraint."""
    return SearchSpace(
        [Knob(f"k{i}", POW2) for i in range(4)],
        [Constraint("tile_fits", lambda c: c["k0"] * c["k1"] <= 1024)],
    )


def synthetic_cost(config: Config) -> float:
    """Seconds: a curved valley (Rosenbrock-like coupling of k0 and k1) plus failures."""
    if config["k2"] == 128 and config["k3"] == 128:
        return math.inf  # a "build failure" region
    x = [math.log2(config[f"k{i}"]) - o for i, o in enumerate(OPTIMUM)]
    valley = (x[1] - x[0]) ** 2 + 0.3 * x[0] ** 2
    return 1e-3 * (1 + 0.2 * valley + 0.1 * x[2] ** 2 + 0.1 * x[3] ** 2)


@pytest.fixture(scope="session")
def space() -> SearchSpace:
    return synthetic_space()


@pytest.fixture(scope="session")
def best_cost(space: SearchSpace) -> float:
    return min(synthetic_cost(c) for c in space.enumerate())
