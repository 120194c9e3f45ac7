"""Turn a tuning database into dataset records (see ``records`` for the format).

A tuning record names its target by key (``avx512-2t``) and its machine by host name; the
CPU's model name and caches come from the record's machine info when it has them, else from
this host (``Target.detect``, its best ISA), and its family and model numbers from this host's
``/proc/cpuinfo``: export on the machine that collected. Records of workloads this version
cannot parse, or of targets it cannot name, are skipped and counted.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..database import Database, TuningRecord
from ..errors import TensorTuneError
from ..target import ISAS, Target, cpu_family_model
from ..workload import workload
from .records import FORMAT, cpu_kind, target_fields, write_records
from .workloads import held_out_workloads, op_class

_TARGET_KEY = re.compile(r"^(?P<isa>[a-z0-9_]+)-(?P<threads>\d+)t$")


@dataclass(frozen=True)
class ExportResult:
    written: int
    skipped: int
    held_out: int = 0  # records of held-out workloads left out (``training_only``)


def dataset_record(
    rec: TuningRecord, host: Target, family_model: tuple[int, int] | None = None
) -> dict[str, Any] | None:
    """The dataset form of one tuning record measured on a CPU of ``family_model`` (None: not
    known), or None when it cannot be placed (unknown workload or target key)."""
    match = _TARGET_KEY.match(rec.target)
    if match is None or match["isa"] not in ISAS:
        return None
    try:
        wl = workload(rec.workload)
    except (TensorTuneError, ValueError):
        return None
    machine = rec.machine
    fields = target_fields(host)
    caches = machine.get("caches")
    cpu, best_isa = machine.get("cpu"), machine.get("isa")
    cpu = cpu if isinstance(cpu, str) else host.name
    best_isa = best_isa if isinstance(best_isa, str) else host.isa
    return {
        "format": FORMAT,
        "workload": wl.name,
        "op_class": op_class(wl),
        "space": rec.space,
        "target": rec.target,
        "isa": match["isa"],
        "threads": int(match["threads"]),
        "caches": caches if isinstance(caches, dict) else fields["caches"],
        "cpu": cpu,
        "cpu_family": family_model[0] if family_model else None,
        "cpu_model": family_model[1] if family_model else None,
        "cpu_kind": cpu_kind(cpu, best_isa, family_model),
        "config": rec.config,
        "seconds": rec.seconds,
        "reference_seconds": rec.reference_seconds,
        "ratio": rec.ratio,
        "error": rec.error,
        "strategy": rec.strategy,
        "version": rec.version,
        "created_at": rec.created_at,
    }


def export_dataset(
    db: Database, path: str | Path, host: Target | None = None, training_only: bool = False
) -> ExportResult:
    """Write every record of ``db`` to ``path`` (gzip JSON Lines), in the database's order.

    ``training_only`` leaves out the held-out families' workloads, so a tuning database of any
    workloads (a benchmark's, a user's) can join the training data without growing the
    evaluation's test set with records of another kind (a tuner's, not collection's)."""
    host = host or Target.detect()
    family_model = cpu_family_model()
    held = set(held_out_workloads()) if training_only else set()
    skipped = left_out = 0

    def rows() -> Iterator[dict[str, Any]]:
        nonlocal skipped, left_out
        for rec in db.records():
            row = dataset_record(rec, host, family_model)
            if row is None:
                skipped += 1
            elif row["workload"] in held:
                left_out += 1
            else:
                yield row

    written = write_records(path, rows())
    return ExportResult(written, skipped, left_out)
