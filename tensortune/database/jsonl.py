"""JSON Lines files of tuning records: how databases are backed up, merged and shared."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO

from ..errors import DatabaseError
from .record import MAX_RECORD_CHARS, TuningRecord

#: A filesystem path or an already-open text file.
PathOrFile = str | os.PathLike[str] | IO[str]


@contextlib.contextmanager
def _open_text(target: PathOrFile, mode: str) -> Iterator[IO[str]]:
    """Open a path (creating parent dirs for writing); pass a file object through unclosed."""
    if not isinstance(target, (str, os.PathLike)):
        yield target
        return
    path = Path(target).expanduser()
    try:
        if "w" in mode:
            path.parent.mkdir(parents=True, exist_ok=True)
        f = path.open(mode, encoding="utf-8")
    except OSError as e:
        raise DatabaseError(f"cannot open JSONL file '{path}': {e.strerror or e}") from e
    with f:
        yield f


def write_jsonl(records: Iterable[TuningRecord], dest: PathOrFile) -> int:
    """Write the records, one JSON object per line in their order; returns the count."""
    count = 0
    with _open_text(dest, "w") as f:
        for rec in records:
            f.write(rec.to_json() + "\n")
            count += 1
    return count


def read_jsonl(src: PathOrFile) -> list[TuningRecord]:
    """Every record of a JSONL file (blank lines skipped), all parsed before any is returned,
    so a bad line, named by file and line number, yields nothing."""
    name = os.fspath(src) if isinstance(src, (str, os.PathLike)) else getattr(src, "name", "")
    recs = []
    with _open_text(src, "r") as f:
        # read at most one character past the limit: a huge line is refused (by from_json)
        # without being held in memory whole
        lines = iter(lambda: f.readline(MAX_RECORD_CHARS + 1), "")
        for lineno, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                recs.append(TuningRecord.from_json(line))
            except DatabaseError as e:
                raise DatabaseError(f"{name or '<stream>'}:{lineno}: {e}") from e
    return recs
