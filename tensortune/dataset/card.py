"""The dataset card: a markdown page saying what the dataset holds and how it was taken."""

from __future__ import annotations

import datetime
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .records import FORMAT
from .workloads import HELD_OUT_FAMILIES, TRAINING_FAMILIES, held_out_workloads


def _table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]


def card_text(records: Sequence[dict[str, Any]], notes: Sequence[str] = ()) -> str:
    """The card of these records (counts are computed, never typed in)."""
    held = set(held_out_workloads())
    cpus = Counter((r["cpu_kind"], r["cpu"]) for r in records)
    targets = Counter((r["cpu_kind"], r["target"]) for r in records)
    classes = sorted({r["op_class"] for r in records})
    rows = []
    for cls in classes:
        mine = [r for r in records if r["op_class"] == cls]
        ok = sum(r.get("error") is None for r in mine)
        train = [r for r in mine if r["workload"] not in held]
        rows.append(
            (
                cls,
                len(mine),
                ok,
                len({r["workload"] for r in train}),
                len({r["workload"] for r in mine if r["workload"] in held}),
            )
        )
    versions = sorted({r.get("version", "?") for r in records})
    dates = sorted(r["created_at"] for r in records if "created_at" in r)
    span = (
        f"{datetime.datetime.fromtimestamp(dates[0], datetime.timezone.utc):%Y-%m-%d} to "
        f"{datetime.datetime.fromtimestamp(dates[-1], datetime.timezone.utc):%Y-%m-%d}"
        if dates
        else "unknown"
    )
    lines = [
        "# tensortune cost-model dataset",
        "",
        "Measured schedules of tensor-program workloads on CPUs: one JSON object per",
        f"measurement in gzip JSON Lines (format {FORMAT}, see `tensortune/dataset/records.py`).",
        "Each record holds the workload spec, op class, target (ISA, threads, caches), CPU model",
        "and kind, the config, its time, the paired reference's time and the ratio to it (what",
        "ranks configs: timed beside the template default, so host drift cancels), or the",
        "error kind of a failed candidate. Features are not stored: `tensortune dataset train`",
        "recomputes them, so a change to the features never invalidates the data.",
        "",
        f"- records: {len(records)} ({sum(r.get('error') is None for r in records)} succeeded)",
        f"- workloads: {len({r['workload'] for r in records})}",
        f"- measured: {span}, tensortune {', '.join(versions)}",
        "- how: `tensortune dataset collect`: random search and the model-guided search on",
        "  alternate workloads (unbiased samples, and fast programs well represented), each",
        "  ending with the tuner's re-timing of its best few configs (strategy `confirm`)",
        "",
        "## CPUs",
        "",
        *_table(
            ("kind", "model name", "records", "records per target"),
            [
                (
                    k,
                    n,
                    c,
                    ", ".join(f"{t}: {m}" for (kk, t), m in sorted(targets.items()) if kk == k),
                )
                for (k, n), c in sorted(cpus.items())
            ],
        ),
        "",
        "## Records per op class",
        "",
        *_table(
            ("op class", "records", "succeeded", "training workloads", "held-out workloads"),
            rows,
        ),
        "",
        "## Training and held-out families",
        "",
        f"Held out (never trained on, by workload key): {', '.join(HELD_OUT_FAMILIES)}.",
        f"Training: {', '.join(TRAINING_FAMILIES)}, plus seeded random shapes of every op class.",
        "Families come from `tensortune/workload/zoo.py`.",
    ]
    if notes:
        lines += ["", "## Notes", "", *(f"- {n}" for n in notes)]
    return "\n".join(lines) + "\n"


def write_card(
    records: Sequence[dict[str, Any]], path: str | Path, notes: Sequence[str] = ()
) -> None:
    """Write ``card_text`` to ``path``."""
    Path(path).write_text(card_text(records, notes))
