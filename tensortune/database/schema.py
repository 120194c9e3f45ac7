"""The tables of the tuning database, their migrations, and records <-> rows.

``SCHEMA_VERSION`` names the table layout; ``MIGRATIONS`` bring a file of an older layout up to
date when it is opened for writing, and files from a newer tensortune are refused.
"""

from __future__ import annotations

import hashlib
from typing import Any

from sqlalchemy import (
    Column,
    Connection,
    Float,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    insert,
    inspect,
    select,
    update,
)
from sqlalchemy.schema import CreateTable, ExecutableDDLElement

from ..errors import DatabaseError
from .connect import serialize
from .prediction import Prediction
from .record import JSON_FIELDS, TuningRecord, canonical_json, current_version, load_json

#: Bump when the table layout changes; `MIGRATIONS` brings older files up to date, and
#: files from a newer tensortune are refused.
SCHEMA_VERSION = 4

#: Keys of the server-wide locks (PostgreSQL advisory locks, see ``connect.serialize``) that
#: keep tuners starting at once from creating or migrating the tables twice, and imports of
#: the same records from adding them twice.
SCHEMA_LOCK = 0x7474_0001
IMPORT_LOCK = 0x7474_0002
#: ... and compiles choosing a workload's zero-shot config at once from colliding on its row.
PREDICTION_LOCK = 0x7474_0003

metadata = MetaData()

meta_table = Table(
    "meta",
    metadata,
    Column("key", String(64), primary_key=True),
    Column("value", Text, nullable=False),
)

records_table = Table(
    "records",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("workload", String, nullable=False),
    Column("target", String, nullable=False),
    Column("version", String, nullable=False),
    Column("config_key", String, nullable=False),
    Column("config", Text, nullable=False),
    Column("trace", Text, nullable=False),
    Column("seconds", Float, nullable=True),
    Column("spread", Text, nullable=False),
    Column("error", String(32), nullable=True),
    Column("error_msg", Text, nullable=True),
    Column("strategy", String, nullable=False),
    Column("trial", Integer, nullable=False),
    Column("tuning_seconds", Float, nullable=False),
    Column("created_at", Float, nullable=False),
    Column("run_id", String, nullable=False),
    Column("machine", Text, nullable=False),
    # sha256 of the record's canonical JSON: finds exact duplicates on import.
    Column("digest", String(64), nullable=False),
    Column("reference_seconds", Float, nullable=True),
    Column("ratio", Float, nullable=True),
    Column("space", String, nullable=False, server_default=""),
    Index("ix_records_config", "workload", "target", "config_key"),
    Index("ix_records_rank", "workload", "target", "seconds"),
    Index("ix_records_version", "version"),
    Index("ix_records_run", "run_id"),
    Index("ix_records_digest", "digest"),
)

# Which process is measuring which config, so concurrent tuners share work (see `claim`).
claims_table = Table(
    "claims",
    metadata,
    Column("workload", String, primary_key=True),
    Column("target", String, primary_key=True),
    Column("config_key", String, primary_key=True),
    Column("owner", String, nullable=False),
    Column("expires_at", Float, nullable=False),
)

# Zero-shot choices: configs the pretrained model picked without measuring them. A table of
# their own, so no query of measurements (ranking, trial counts, export) can ever see one.
predictions_table = Table(
    "predictions",
    metadata,
    Column("workload", String, primary_key=True),
    Column("target", String, primary_key=True),
    Column("version", String, primary_key=True),
    Column("space", String, primary_key=True),
    Column("config", Text, nullable=False),
    Column("source", Text, nullable=False),
    Column("model", Text, nullable=False),
    Column("candidates", Integer, nullable=False),
    Column("choice_seconds", Float, nullable=False),
    Column("created_at", Float, nullable=False),
)

#: What takes a file from schema version N to N + 1: SQL text, or a DDL element compiled for
#: the file's dialect (a new table is created from its definition above, not a second copy).
MIGRATIONS: dict[int, tuple[str | ExecutableDDLElement, ...]] = {
    1: (  # paired timing: the reference's time and the ratio to it
        "ALTER TABLE records ADD COLUMN reference_seconds FLOAT",
        "ALTER TABLE records ADD COLUMN ratio FLOAT",
    ),
    2: (  # records name the design space their config is a point of ('' = built-in)
        "ALTER TABLE records ADD COLUMN space VARCHAR NOT NULL DEFAULT ''",
    ),
    3: (CreateTable(predictions_table, if_not_exists=True),),  # zero-shot predictions
}

_ROW_ONLY = ("id", "config_key", "digest")


def to_row(rec: TuningRecord) -> dict[str, Any]:
    row = rec.to_dict()
    for name in JSON_FIELDS:
        row[name] = canonical_json(row[name])
    row["config_key"] = rec.config_key
    row["digest"] = hashlib.sha256(rec.to_json().encode()).hexdigest()
    row["space"] = rec.space  # left out of to_dict (and the digest) while it is ""
    return row


def from_row(row: Any) -> TuningRecord:
    data = {k: v for k, v in row._mapping.items() if k not in _ROW_ONLY}
    for name in JSON_FIELDS:
        data[name] = load_json(data[name], name)
    rec = TuningRecord.from_dict(data)
    if rec.config_key != row.config_key:
        raise DatabaseError("its config_key column does not match its config")
    return rec


def prediction_to_row(prediction: Prediction) -> dict[str, Any]:
    row = {column.name: getattr(prediction, column.name) for column in predictions_table.c}
    row["config"] = canonical_json(prediction.config)
    return row


def prediction_from_row(row: Any) -> Prediction:
    data = dict(row._mapping)
    data["config"] = load_json(data["config"], "config")
    return Prediction(**data)


def prepare_schema(conn: Connection, readonly: bool) -> str | None:
    """Create the tables in an empty database (unless read-only); return why an existing
    one is unusable."""
    if not readonly:  # several tuners opening a fresh server database at once create it once
        serialize(conn, SCHEMA_LOCK)
    tables = set(inspect(conn).get_table_names())
    unusable = "move it away or pass another path"
    if meta_table.name not in tables:
        if records_table.name in tables:
            return (
                "it has a 'records' table but no 'meta' table "
                f"(not a tensortune database; {unusable})"
            )
        if readonly:
            return "it holds no tensortune tables (empty, or not a tensortune database)"
        metadata.create_all(conn)
        conn.execute(
            insert(meta_table),
            [
                {"key": "schema_version", "value": str(SCHEMA_VERSION)},
                {"key": "created_by", "value": f"tensortune {current_version()}"},
            ],
        )
        return None
    found = conn.execute(
        select(meta_table.c.value).where(meta_table.c.key == "schema_version")
    ).scalar()
    if found is None:
        return f"its 'meta' table has no schema_version (not a tensortune database; {unusable})"
    if not found.isdigit() or not 1 <= int(found) <= SCHEMA_VERSION:
        return (
            f"schema version {found} is not supported "
            f"(this tensortune {current_version()} reads schema versions 1 to "
            f"{SCHEMA_VERSION})"
        )
    if int(found) < SCHEMA_VERSION and readonly:
        return (
            f"it has schema version {found}: open it once for writing (any `tensortune "
            f"tune`) to upgrade it to version {SCHEMA_VERSION}"
        )
    for version in range(int(found), SCHEMA_VERSION):
        for statement in MIGRATIONS[version]:
            if isinstance(statement, str):
                conn.exec_driver_sql(statement)
            else:
                conn.execute(statement)
    if int(found) != SCHEMA_VERSION:
        conn.execute(
            update(meta_table)
            .where(meta_table.c.key == "schema_version")
            .values(value=str(SCHEMA_VERSION))
        )
    if readonly:
        return None if records_table.name in tables else "it has no 'records' table"
    metadata.create_all(conn)  # adds tables newer than the file (claims), else a no-op
    return None
