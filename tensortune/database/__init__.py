"""The tuning database: every measurement tensortune makes, kept across runs.

``open_database(None)`` opens the shared default database, so tuning results accumulate
and later runs start from what earlier ones learned.
"""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

from .prediction import Prediction
from .record import ERROR_KINDS, TuningRecord
from .sql import Database, printable_location

#: Environment variable naming the default database (a path or a SQLAlchemy URL).
DB_ENV_VAR = "TENSORTUNE_DB"


def default_db_path() -> str | Path:
    """$TENSORTUNE_DB (path or URL, returned as given) else ``<user cache>/tensortune/tuning.db``.

    A URL stays a str because Path would mangle its ``//``.
    """
    env = os.environ.get(DB_ENV_VAR, "").strip()
    if env:
        return env if "://" in env else Path(env).expanduser()
    return Path(platformdirs.user_cache_dir("tensortune")) / "tuning.db"


def open_database(
    db: str | os.PathLike[str] | Database | None = None, *, readonly: bool = False
) -> Database:
    """A Database from a path, a SQLAlchemy URL, an open Database (returned as is) or None
    (the default database, see ``default_db_path``).

    ``readonly=True`` is for commands that only query: no file or table is created, no write
    lock is taken, and read-only media work.
    """
    if isinstance(db, Database):
        return db
    return Database(default_db_path() if db is None else db, readonly=readonly)


__all__ = [
    "DB_ENV_VAR",
    "ERROR_KINDS",
    "Database",
    "Prediction",
    "TuningRecord",
    "default_db_path",
    "open_database",
    "printable_location",
]
