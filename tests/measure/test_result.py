import json

import pytest

from tensortune.measure.result import MeasureResult


def test_success_takes_the_median():
    result = MeasureResult.from_spread([3.0, 1.0, 2.0], number=10, run_seconds=0.5)
    assert result.ok
    assert result.seconds == 2.0
    assert result.spread == (3.0, 1.0, 2.0)
    assert result.error_kind is None


def test_failure_keeps_the_message():
    log = "x.c:1: error: nope\n" * 50
    result = MeasureResult.failure("compile", log, build_seconds=1.5)
    assert not result.ok
    assert result.seconds is None
    assert result.error_msg == log
    assert result.build_seconds == 1.5


def test_round_trip_through_json():
    for result in (
        MeasureResult.from_spread([1e-3, 2e-3], number=3),
        MeasureResult.failure("timeout", "too slow", run_seconds=2.0),
    ):
        assert MeasureResult.from_dict(json.loads(json.dumps(result.to_dict()))) == result


def test_is_frozen_and_hashable():
    result = MeasureResult.from_spread([1.0])
    with pytest.raises(AttributeError):
        result.seconds = 2.0  # type: ignore[misc]
    assert hash(result) == hash(MeasureResult.from_spread([1.0]))


@pytest.mark.parametrize(
    "fields",
    [
        {"seconds": None},
        {"seconds": 1.0, "error_kind": "crash"},
        {"seconds": None, "error_kind": "exploded"},
    ],
)
def test_inconsistent_results_are_rejected(fields: dict):
    with pytest.raises(ValueError):
        MeasureResult(**fields)
