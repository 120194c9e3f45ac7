"""One rule for "best": paired records rank by their ratio to the reference, and a version-1
database (times only) is migrated in place and ranks on the same scale; on every backend."""

from __future__ import annotations

from pathlib import Path

from tensortune.database import Database
from tensortune.database.sql import SCHEMA_VERSION

from .conftest import MakeRecord, execute


def test_ratio_ranks_where_absolute_times_drifted(
    db_location: Path | str, make_record: MakeRecord
) -> None:
    with Database(db_location) as db:
        # "a" was timed while the host ran fast: a smaller time, but slower than its reference
        db.commit_record(
            make_record(config={"c": "a"}, seconds=1.0e-3, reference_seconds=0.9e-3, ratio=1.11)
        )
        db.commit_record(
            make_record(config={"c": "b"}, seconds=1.6e-3, reference_seconds=2.0e-3, ratio=0.8)
        )
        best = db.best("matmul(64,64,64,float32)", "cpu-x86_64-avx2")
    assert best is not None and best.config == {"c": "b"}
    assert best.ratio == 0.8 and best.reference_seconds == 2.0e-3


def test_a_config_ranks_by_its_median_ratio(
    db_location: Path | str, make_record: MakeRecord
) -> None:
    with Database(db_location) as db:
        for ratio in (0.7, 1.05, 1.1):  # one lucky draw, then two re-measurements
            db.commit_record(
                make_record(config={"c": "lucky"}, reference_seconds=1e-3, ratio=ratio)
            )
        db.commit_record(make_record(config={"c": "default"}, reference_seconds=1e-3, ratio=1.0))
        top = db.top_k("matmul(64,64,64,float32)", "cpu-x86_64-avx2", 2)
    assert [r.config for r in top] == [{"c": "default"}, {"c": "lucky"}]
    assert top[1].ratio == 1.05


def test_a_record_whose_reference_stalled_ranks_by_its_own_time(
    db_location: Path | str, make_record: MakeRecord
) -> None:
    """A 0.6 ms config beside a default stalled to 23 ms measured a ratio of 0.03 and won its
    tune; a reference 3x the usual one is a stalled host, so its record ranks by its seconds.
    A record with a ratio but no reference time (another database's) ranks the same way."""
    with Database(db_location) as db:
        for config in ("default", "a", "b"):
            db.commit_record(
                make_record(config={"c": config}, seconds=0.5e-3, reference_seconds=0.5e-3, ratio=1)
            )
        db.commit_record(
            make_record(config={"c": "fast"}, seconds=0.45e-3, reference_seconds=0.5e-3, ratio=0.9)
        )
        db.commit_record(
            make_record(
                config={"c": "stalled"}, seconds=0.6e-3, reference_seconds=23e-3, ratio=0.03
            )
        )
        db.commit_record(make_record(config={"c": "half"}, seconds=0.7e-3, ratio=0.01))
        top = db.top_k("matmul(64,64,64,float32)", "cpu-x86_64-avx2", 6)
    order = [r.config["c"] for r in top]
    assert order[0] == "fast"
    assert order[-2:] == ["stalled", "half"]


def test_records_timed_alone_rank_on_the_reference_scale(
    db_location: Path | str, make_record: MakeRecord
) -> None:
    with Database(db_location) as db:
        db.commit_record(
            make_record(config={"c": "paired"}, seconds=1e-3, reference_seconds=2e-3, ratio=0.5)
        )
        db.commit_record(make_record(config={"c": "alone"}, seconds=0.8e-3))  # 0.4 of 2 ms
        best = db.best("matmul(64,64,64,float32)", "cpu-x86_64-avx2")
    assert best is not None and best.config == {"c": "alone"}


def test_version_1_file_is_migrated_in_place(
    db_location: Path | str, make_record: MakeRecord
) -> None:
    with Database(db_location) as db:
        db.commit_record(make_record())
    execute(  # what a version-1 database looked like
        db_location,
        "ALTER TABLE records DROP COLUMN space",
        "ALTER TABLE records DROP COLUMN ratio",
        "ALTER TABLE records DROP COLUMN reference_seconds",
        "DROP TABLE claims",
        "UPDATE meta SET value = '1' WHERE key = 'schema_version'",
    )
    with Database(db_location) as db:
        (old,) = db.records()
        db.commit_record(make_record(config={"c": 2}, reference_seconds=1e-3, ratio=0.9))
        assert old.ratio is None and old.seconds == make_record().seconds
        assert len(db.records()) == 2
        assert db.claim(old.workload, old.target, old.config_key, owner="a", ttl=60)
    version = execute(db_location, "SELECT value FROM meta WHERE key = 'schema_version'")
    assert [tuple(row) for row in version] == [(str(SCHEMA_VERSION),)]


def test_version_2_records_are_of_the_built_in_space(
    db_location: Path | str, make_record: MakeRecord
) -> None:
    with Database(db_location) as db:
        db.commit_record(make_record())
    execute(  # what a version-2 database looked like: no space column
        db_location,
        "ALTER TABLE records DROP COLUMN space",
        "UPDATE meta SET value = '2' WHERE key = 'schema_version'",
    )
    with Database(db_location) as db:
        db.commit_record(make_record(config={"c": 2}, space="mine", seconds=1e-4))
        (old,) = db.records(space="")
        assert old.space == "" and old == make_record()
        assert [r.config for r in db.records(space="mine")] == [{"c": 2}]
        wl, target = old.workload, old.target
        assert db.best(wl, target).config == {"c": 2}  # type: ignore[union-attr]
        assert db.best(wl, target, space="").config == old.config  # type: ignore[union-attr]
        assert db.measured_keys(wl, target, space="mine") == {'{"c":2}'}
        assert not db.has(wl, target, '{"c":2}', space="")
