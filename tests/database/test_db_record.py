"""TuningRecord: validation, normalisation and the one-line JSON format."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tensortune.database import TuningRecord
from tensortune.errors import DatabaseError, TensorTuneError

from .conftest import MakeRecord, record

_printable = st.characters(codec="utf-8").filter(str.isprintable)  # configs are shown
_scalars = st.one_of(
    st.integers(-(2**53), 2**53), st.booleans(), st.text(_printable, max_size=8), st.none()
)
_configs = st.dictionaries(
    st.text(_printable, min_size=1, max_size=8),
    st.one_of(_scalars, st.lists(st.integers(0, 64), max_size=4)),
    max_size=6,
)


@settings(max_examples=60, deadline=None)
@given(
    config=_configs,
    seconds=st.floats(0, 10, allow_nan=False),
    spread=st.lists(st.floats(0, 10, allow_nan=False), max_size=5),
)
def test_json_round_trip(config: dict, seconds: float, spread: list[float]) -> None:
    rec = record(config=config, seconds=seconds, spread=spread)
    line = rec.to_json()
    assert "\n" not in line
    assert TuningRecord.from_json(line) == rec


def test_failed_record_round_trip(make_record: MakeRecord) -> None:
    rec = make_record(seconds=None, spread=[], error="timeout", error_msg="exceeded 10 s")
    assert not rec.ok
    assert TuningRecord.from_json(rec.to_json()) == rec


def test_config_key_is_canonical(make_record: MakeRecord) -> None:
    a = make_record(config={"b": (1, 2), "a": 3})
    b = make_record(config={"a": 3, "b": [1, 2]})
    assert a.config_key == b.config_key == '{"a":3,"b":[1,2]}'
    assert a == b  # tuples normalised to lists


def test_record_is_isolated_from_caller_mutation(make_record: MakeRecord) -> None:
    config = {"tile": [4, 4]}
    rec = make_record(config=config)
    config["tile"].append(4)
    assert rec.config == {"tile": [4, 4]}


def test_defaults_stamp_version_and_time() -> None:
    rec = TuningRecord(workload="w", target="t", config={}, seconds=0.0)
    from tensortune import __version__

    assert rec.version == __version__
    assert rec.created_at > 1_600_000_000
    assert rec.trace == [] and rec.spread == [] and rec.machine == {}


def test_space_is_serialised_only_when_set(make_record: MakeRecord) -> None:
    """A record of a built-in space serialises (and hashes, for import dedupe) as before."""
    built_in = make_record()
    assert "space" not in built_in.to_dict() and built_in.space == ""
    mine = make_record(space="my-gemm")
    assert json.loads(mine.to_json())["space"] == "my-gemm"
    assert TuningRecord.from_json(mine.to_json()) == mine
    assert TuningRecord.from_json(built_in.to_json()) == built_in


@pytest.mark.parametrize(
    "overrides",
    [
        {"seconds": None},  # success without a time
        {"seconds": float("nan")},
        {"seconds": -1.0},
        {"error": "compile"},  # failure that still has a time
        {"error": "segfault", "seconds": None},  # unknown kind
        {"config": {"f": object()}},  # not JSON
        {"config": [1, 2]},
        {"workload": ""},
        {"spread": [float("inf")]},
        {"spread": ["fast"]},
        {"trace": {"not": "a list"}},
        {"machine": "box"},
        {"space": "line\nbreak"},
        {"space": 3},
    ],
)
def test_invalid_records_rejected(overrides: dict) -> None:
    with pytest.raises(DatabaseError):
        record(**overrides)


@pytest.mark.parametrize(
    "line",
    [
        "not json",
        "[1, 2]",
        json.dumps({"workload": "w", "target": "t"}),  # missing config
        record().to_json()[:-1] + ',"surprise":1}',  # unknown field
    ],
)
def test_from_json_errors_are_tensortune_errors(line: str) -> None:
    with pytest.raises(TensorTuneError):
        TuningRecord.from_json(line)
