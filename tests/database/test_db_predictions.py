"""Zero-shot predictions: kept apart from measurements, one per workload/target/version/space,
and the schema-3 files that predate them are migrated keeping every record."""

from __future__ import annotations

import io
import warnings
from pathlib import Path

import pytest

from tensortune.database import Database, Prediction
from tensortune.database.schema import SCHEMA_VERSION
from tensortune.errors import DatabaseError, RecordWarning

from .conftest import MakeRecord, execute


def prediction(**overrides: object) -> Prediction:
    fields: dict = {
        "workload": "matmul(64,64,64,float32)",
        "target": "cpu-x86_64-avx2",
        "config": {"tile_i": 8, "tile_j": 16},
        "source": "sample",
        "model": "pretrained LGBMCostModel",
        "candidates": 27,
        "choice_seconds": 0.8,
        "version": "0.1.0",
        "created_at": 1_700_000_000.5,
    }
    return Prediction(**(fields | overrides))


def test_a_prediction_is_never_a_measurement(db: Database, make_record: MakeRecord) -> None:
    p = prediction()
    db.record_prediction(p)
    assert db.prediction(p.workload, p.target) == p
    assert db.prediction(p.workload, p.target, version="9.9") is None
    assert db.prediction(p.workload, "other-target") is None
    assert db.records() == [] and db.workloads() == []
    assert db.best(p.workload, p.target) is None
    assert db.measured_keys(p.workload, p.target) == set()
    assert not db.has(p.workload, p.target, p.config_key)
    out = io.StringIO()
    assert db.export_jsonl(out) == 0 and out.getvalue() == ""
    db.commit_record(make_record(workload=p.workload, target=p.target, config=p.config))
    assert len(db.records()) == 1 and db.prediction(p.workload, p.target) == p


def test_a_new_choice_replaces_the_old_one(db_location: Path | str) -> None:
    with Database(db_location) as db:
        db.record_prediction(prediction(config={"tile_i": 4}))
        db.record_prediction(prediction(config={"tile_i": 2}))
        db.record_prediction(prediction(space="mine", config={"x": 1}))
        found = db.prediction("matmul(64,64,64,float32)", "cpu-x86_64-avx2", space="")
        assert found is not None and found.config == {"tile_i": 2}
    assert execute(db_location, "SELECT COUNT(*) FROM predictions")[0][0] == 2


def test_a_damaged_prediction_row_is_skipped_with_a_warning(db_location: Path | str) -> None:
    with Database(db_location) as db:
        db.record_prediction(prediction())
    execute(db_location, "UPDATE predictions SET candidates = 0")
    with Database(db_location) as db, pytest.warns(RecordWarning, match="candidates"):
        assert db.prediction("matmul(64,64,64,float32)", "cpu-x86_64-avx2") is None


@pytest.mark.parametrize(
    "bad",
    [{"workload": ""}, {"candidates": 0}, {"choice_seconds": -1.0}, {"config": {"k": "\x1b"}}],
)
def test_a_malformed_prediction_is_refused(bad: dict) -> None:
    with pytest.raises(DatabaseError):
        prediction(**bad)


def test_version_3_file_is_migrated_keeping_every_record(
    db_location: Path | str, make_record: MakeRecord
) -> None:
    kept = [make_record(config={"c": i}, trial=i) for i in range(3)]
    with Database(db_location) as db:
        for rec in kept:
            db.commit_record(rec)
    execute(  # what a version-3 database looked like: no predictions table
        db_location,
        "DROP TABLE predictions",
        "UPDATE meta SET value = '3' WHERE key = 'schema_version'",
    )
    with pytest.raises(DatabaseError, match=f"to upgrade it to version {SCHEMA_VERSION}"):
        Database(db_location, readonly=True)
    with Database(db_location) as db:
        assert db.records() == kept
        db.record_prediction(prediction())
    version = execute(db_location, "SELECT value FROM meta WHERE key = 'schema_version'")
    assert [tuple(row) for row in version] == [(str(SCHEMA_VERSION),)]
    with Database(db_location, readonly=True) as ro, warnings.catch_warnings():
        warnings.simplefilter("error")
        assert ro.records() == kept
        assert ro.prediction(kept[0].workload, kept[0].target) == prediction()
