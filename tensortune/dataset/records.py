"""The exported dataset's record format: one JSON object per measurement, gzip JSON Lines.

A record holds what was measured (workload spec, design space, config), where (the target's
ISA, threads and caches, and the CPU's model name, family and model numbers, null in records
exported before they were kept, and kind) and the outcome (seconds, the paired reference's
seconds and the ratio to it, or the error kind), plus the tensortune version that measured it.
Features are never stored: training recomputes them from (workload, target, config), so a change
to the features never invalidates collected data.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from ..errors import TensorTuneError
from ..target import Target

#: Bumped when a field changes meaning; readers refuse formats they do not know.
FORMAT = 1

#: Fields every record has (the others: reference_seconds, ratio, error are null when absent).
REQUIRED = (
    "workload",
    "op_class",
    "target",
    "isa",
    "threads",
    "caches",
    "cpu",
    "cpu_kind",
    "config",
)


class DatasetError(TensorTuneError):
    """A dataset file is missing, unreadable or holds a malformed record, or is empty."""


def cpu_kind(model_name: str, best_isa: str, family_model: tuple[int, int] | None = None) -> str:
    """A short, stable slug of a CPU: its model name, the best ISA it runs and, when known, its
    family and model numbers ("AMD EPYC", "avx2", (25, 1) -> "amd-epyc-avx2-f25m1"). Virtual
    machines often report only the vendor's brand, and the ISA alone does not tell a Zen 4 from
    a Zen 5; the numbers do. Records exported before they were read keep the kind without them.
    The unit cross-CPU evaluation groups by."""
    name = re.sub(r"\((?:R|TM|tm|r)\)|\b(?:CPU|Processor|\d+-Core)\b|@.*$", " ", model_name)
    slug = re.sub(r"[^a-z0-9]+", "-", f"{name} {best_isa}".lower()).strip("-") or "unknown"
    return slug if family_model is None else f"{slug}-f{family_model[0]}m{family_model[1]}"


def target_fields(target: Target) -> dict[str, Any]:
    """What a record keeps of the target: everything the features read, no compiler path."""
    return {
        "isa": target.isa,
        "threads": target.num_threads,
        "caches": {"l1d": target.l1d_bytes, "l2": target.l2_bytes, "l3": target.l3_bytes},
    }


def target_of(record: dict[str, Any]) -> Target:
    """The Target a record was measured on, rebuilt for feature computation on any host
    (``Target.cross``: an ISA this CPU lacks is fine, nothing is run)."""
    caches = record["caches"]
    target = Target.cross(record["isa"], num_threads=int(record["threads"]))
    return dataclasses.replace(
        target,
        name=record["cpu"],
        l1d_bytes=int(caches["l1d"]),
        l2_bytes=int(caches["l2"]),
        l3_bytes=int(caches["l3"]),
    )


def on_target(spec: str) -> Callable[[dict[str, Any]], bool]:
    """Whether a record was taken on the restricted target ``spec``: an ISA (``"avx2"``) or a
    thread count (``"threads=1"``). What a model trained on one target's records only, to be
    tested on the others, selects by."""
    if spec.startswith("threads="):
        count = spec.split("=", 1)[1]
        if not count.isdigit() or int(count) < 1:
            raise DatasetError(f"restricted target {spec!r}: threads=N wants a positive count")
        threads = int(count)
        return lambda r: int(r["threads"]) == threads
    if not re.fullmatch(r"[a-z][a-z0-9_]*", spec):
        raise DatasetError(
            f"restricted target {spec!r}: give an ISA (e.g. 'avx2') or a thread count "
            "(e.g. 'threads=1')"
        )
    return lambda r: r["isa"] == spec


def write_records(path: str | Path, records: Iterable[dict[str, Any]]) -> int:
    """Write records as gzip JSON Lines (deterministic: no timestamp in the gzip header)."""
    count = 0
    try:
        with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as gz:
            for rec in records:
                gz.write((json.dumps(rec, sort_keys=True, allow_nan=False) + "\n").encode())
                count += 1
    except OSError as e:
        raise DatasetError(f"cannot write the dataset file '{path}': {e.strerror or e}") from None
    return count


def dataset_files(paths: Sequence[str | Path]) -> list[Path]:
    """The ``*.jsonl.gz`` files named, a directory standing for every such file in it."""
    files: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            files.extend(sorted(p.glob("*.jsonl.gz")))
        elif p.is_file():
            files.append(p)
        else:
            raise DatasetError(f"no dataset file or directory at '{p}'")
    return files


def _iter_file(path: Path) -> Iterator[dict[str, Any]]:
    try:
        with gzip.open(path, "rt", encoding="utf-8") as f:
            for lineno, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    rec = json.loads(line)
                except ValueError as e:
                    raise DatasetError(f"{path}:{lineno}: not a JSON object: {e}") from None
                missing = [k for k in REQUIRED if not isinstance(rec, dict) or k not in rec]
                if missing:
                    raise DatasetError(f"{path}:{lineno}: record lacks {', '.join(missing)}")
                if rec.get("format", FORMAT) != FORMAT:
                    raise DatasetError(
                        f"{path}:{lineno}: dataset format {rec.get('format')!r}; this version "
                        f"reads format {FORMAT} (upgrade tensortune)"
                    )
                yield rec
    except (OSError, EOFError, UnicodeDecodeError) as e:
        raise DatasetError(f"cannot read dataset file '{path}': {e} (expected .jsonl.gz)") from None


def read_records(paths: Sequence[str | Path]) -> list[dict[str, Any]]:
    """Every record of the named files (directories: their ``*.jsonl.gz``); an empty result is
    an error, since nothing downstream can use it."""
    files = dataset_files(paths)
    records = [rec for path in files for rec in _iter_file(path)]
    if not records:
        shown = ", ".join(str(p) for p in paths)
        raise DatasetError(
            f"no dataset records in {shown} (run 'tensortune dataset collect' then 'export')"
        )
    return records
