"""The storage-independent tuning-database interface that search strategies program against."""

from __future__ import annotations

import contextlib
import os
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from pathlib import Path
from types import TracebackType
from typing import IO, TypeVar

from ..errors import DatabaseError
from .prediction import Prediction
from .record import MAX_RECORD_CHARS, TuningRecord

#: A filesystem path or an already-open text file.
PathOrFile = str | os.PathLike[str] | IO[str]

_D = TypeVar("_D", bound="Database")


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


class Database(ABC):
    """Every measurement tensortune makes, keyed by (workload, target, config).

    Search strategies use it to skip configs already measured (``has``/``measured_keys``)
    and to start from the best known ones (``top_k``/``best``). Queries are always scoped by
    target, so a result measured on one machine never answers for another. ``version`` (the
    tensortune version that measured) and ``space`` (the design space's name, "" for a
    built-in template) are stored on every record and can optionally narrow any query: ratios
    of different spaces are to different defaults and must not be ranked together.
    """

    @abstractmethod
    def commit_record(self, rec: TuningRecord) -> None:
        """Store one record durably: once this returns, a crash cannot lose it."""

    @abstractmethod
    def has(
        self,
        workload: str,
        target: str,
        config_key: str,
        *,
        version: str | None = None,
        space: str | None = None,
    ) -> bool:
        """Whether this config was already measured (successfully or not)."""

    @abstractmethod
    def measured_keys(
        self, workload: str, target: str, *, version: str | None = None, space: str | None = None
    ) -> set[str]:
        """config_keys of every measured config (bulk form of ``has``)."""

    @abstractmethod
    def records(
        self,
        workload: str | None = None,
        target: str | None = None,
        run_id: str | None = None,
        *,
        version: str | None = None,
        space: str | None = None,
    ) -> list[TuningRecord]:
        """Matching records in insertion order (None means "any")."""

    @abstractmethod
    def top_k(
        self,
        workload: str,
        target: str,
        k: int = 1,
        *,
        version: str | None = None,
        space: str | None = None,
    ) -> list[TuningRecord]:
        """The k fastest distinct successful configs, each by its median measurement.

        A config measured several times is represented by its median record (the faster of the
        middle two for an even count), so one lucky moment of a noisy machine does not rank it.
        Ordered by (seconds, config_key), so ties are broken deterministically.
        """

    def best(
        self, workload: str, target: str, *, version: str | None = None, space: str | None = None
    ) -> TuningRecord | None:
        """The median record of the fastest config (see `top_k`), or None if nothing succeeded."""
        top = self.top_k(workload, target, 1, version=version, space=space)
        return top[0] if top else None

    @abstractmethod
    def workloads(self, target: str | None = None) -> list[str]:
        """Sorted distinct workloads with at least one record (optionally on one target)."""

    @abstractmethod
    def import_records(self, records: Iterable[TuningRecord]) -> int:
        """Atomically add records, skipping exact duplicates; returns how many were added.

        Lets databases be merged (``dst.import_records(src.records())``) idempotently.
        """

    @abstractmethod
    def record_prediction(self, prediction: Prediction) -> None:
        """Keep a zero-shot choice, replacing the one of the same (workload, target, version,
        space): it is never a record, so no measurement query returns it."""

    @abstractmethod
    def prediction(
        self, workload: str, target: str, *, version: str | None = None, space: str | None = None
    ) -> Prediction | None:
        """The newest zero-shot choice for this workload on this target, or None."""

    @abstractmethod
    def claim(self, workload: str, target: str, config_key: str, *, owner: str, ttl: float) -> bool:
        """Atomically take the claim on measuring this config; True if ``owner`` now holds it.

        Concurrent tuners on one database claim a config before measuring it, so each config
        is measured once. A claim is free when nobody holds it or its holder's ``ttl``
        (seconds) has run out (a holder that died); its holder may renew it. Expiry uses
        wall-clock time, so processes on different machines need roughly synchronised clocks.
        """

    @abstractmethod
    def release(self, workload: str, target: str, config_key: str, *, owner: str) -> None:
        """Drop ``owner``'s claim on this config (no-op if someone else holds it now)."""

    @abstractmethod
    def close(self) -> None:
        """Release connections; later calls raise DatabaseError."""

    def export_jsonl(self, dest: PathOrFile) -> int:
        """Write every record, one JSON object per line in insertion order; returns the count."""
        recs = self.records()
        with _open_text(dest, "w") as f:
            for rec in recs:
                f.write(rec.to_json() + "\n")
        return len(recs)

    def import_jsonl(self, src: PathOrFile) -> int:
        """Add the records of a JSONL file (exact duplicates skipped); returns how many were added.

        The whole file is parsed before anything is written, so a bad line adds nothing.
        """
        name = os.fspath(src) if isinstance(src, (str, os.PathLike)) else getattr(src, "name", "")
        recs = []
        with _open_text(src, "r") as f:
            # read at most one character past the limit: a huge line is refused (by
            # from_json) without being held in memory whole
            lines = iter(lambda: f.readline(MAX_RECORD_CHARS + 1), "")
            for lineno, line in enumerate(lines, 1):
                if not line.strip():
                    continue
                try:
                    recs.append(TuningRecord.from_json(line))
                except DatabaseError as e:
                    raise DatabaseError(f"{name or '<stream>'}:{lineno}: {e}") from e
        return self.import_records(recs)

    def __enter__(self: _D) -> _D:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
