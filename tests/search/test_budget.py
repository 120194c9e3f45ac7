"""Budget: the stop reasons a tuner reports (the tuning loop stops on them)."""

from __future__ import annotations

import pytest

from tensortune.search import Budget
from tensortune.search.budget import Pace


def test_no_reason_while_within_limits() -> None:
    assert Budget(10, max_seconds=5, early_stop=3).exhausted(9, 4.9, 2) is None


@pytest.mark.parametrize(
    ("args", "match"),
    [((10, 0.0, 0), "trial budget"), ((1, 6.0, 0), "time budget"), ((1, 0.0, 3), "no improvement")],
)
def test_each_limit_gives_its_reason(args: tuple[int, float, int], match: str) -> None:
    reason = Budget(10, max_seconds=5, early_stop=3).exhausted(*args)
    assert reason is not None and match in reason


def test_optional_limits_are_off_by_default() -> None:
    assert Budget(100).exhausted(5, 1e9, 10**6) is None


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_trials": -1},
        {"max_trials": 2.5},
        {"max_trials": 1, "max_seconds": 0},
        {"max_trials": 1, "early_stop": 0},
    ],
)
def test_rejects_nonsense(kwargs: dict) -> None:
    with pytest.raises(ValueError):
        Budget(**kwargs)


def test_zero_trials_is_a_budget_already_spent() -> None:
    reason = Budget(0).exhausted(0, 0.0, 0)
    assert reason is not None and "trial budget" in reason


def test_room_is_what_is_left_of_the_time_cap() -> None:
    assert Budget(10, max_seconds=5).room(2.0) == pytest.approx(3.0)
    assert Budget(10).room(1e9) == float("inf")


def test_pace_plans_only_the_measurements_that_fit() -> None:
    pace = Pace()
    assert pace.per_measurement is None
    assert pace.fitting(8, 0.1) == 8  # nothing known yet: no reason to refuse
    pace.add(6.0, 3)  # 2 s a measurement
    assert pace.per_measurement == pytest.approx(2.0)
    assert pace.fitting(8, 5.0) == 2
    assert pace.fitting(8, 1.0) == 0
    assert pace.fitting(8, -3.0) == 0
    assert pace.fitting(8, float("inf")) == 8
