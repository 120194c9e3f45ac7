"""``tensortune dataset collect|export|train|card``: build the cost model's training data.

    tensortune dataset collect --max-seconds 1200 --trials-per-workload 16
    tensortune dataset export -o data/dataset/amd-epyc-avx512.jsonl.gz
    tensortune dataset train data/dataset
    tensortune dataset card data/dataset -o data/dataset/CARD.md

``collect`` measures into a tuning database (its own by default: ``dataset.db`` in the user
cache directory), so it resumes where it stopped and runs in chunks; the other commands read
exported ``.jsonl.gz`` files (a directory stands for every such file in it).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from .common import EXIT_OK, open_existing, shown
from .options import (
    command,
    db_option,
    max_seconds_option,
    positive_int,
    seed_option,
)


def _dataset_db(db: str | None) -> str:
    """--db, else the dataset's own database (``dataset_db_path``)."""
    from ..dataset import dataset_db_path

    return str(dataset_db_path()) if db is None else db


_DB_HELP = (
    "the dataset's tuning database, a SQLite file or a SQLAlchemy URL (default: dataset.db in "
    "the user cache directory)"
)


def _inputs(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "inputs", nargs="+", metavar="PATH", help="exported .jsonl.gz files or directories of them"
    )


def add_dataset_commands(sub: argparse._SubParsersAction) -> None:
    """The ``dataset`` command and its four subcommands on ``sub``."""
    top = command(
        sub,
        "dataset",
        "collect, export and train on the cost model's dataset",
        "collect: measure sampled schedules of the dataset's workloads into a tuning database\n"
        "(resumable, in chunks); export: write its records as gzip JSON Lines; train: fit the\n"
        "shipped cost-model prior on exported files; card: write the dataset's markdown card.",
    )
    steps = top.add_subparsers(dest="dataset_command", metavar="STEP", required=True)

    p = command(
        steps,
        "collect",
        "measure sampled schedules of the dataset's workloads",
        "Tunes each workload (layers of the training networks and random shapes of every op\n"
        "class; --held-out: the held-out networks' layers, for evaluation only) with random\n"
        "then model-guided search up to --trials-per-workload measurements, counting what the\n"
        "database already holds: a rerun continues. Prints one line per workload.",
    )
    db_option(p, _DB_HELP)
    p.add_argument(
        "--trials-per-workload",
        type=positive_int,
        default=16,
        metavar="N",
        help="measured configs per workload, earlier runs included (default: 16)",
    )
    p.add_argument(
        "--workloads",
        type=positive_int,
        default=None,
        metavar="N",
        help="stop after N workloads that needed measuring (default: all)",
    )
    max_seconds_option(p, "time")
    p.add_argument(
        "--held-out",
        action="store_true",
        help="collect the held-out families' layers (evaluation data, never trained on)",
    )
    p.add_argument(
        "--only",
        default="",
        metavar="TEXT",
        help="collect only the workloads whose spec contains TEXT, e.g. ',C=3,' for first convs "
        "(default: all)",
    )
    p.add_argument(
        "--op-class",
        default="",
        metavar="CLASS",
        help="collect only workloads of this op class, e.g. dense or depthwise_conv2d "
        "(default: all)",
    )
    p.add_argument(
        "--target",
        default="",
        metavar="SPEC",
        help="target spec, e.g. 'avx2 threads=1' (default: this machine, every usable CPU)",
    )
    seed_option(p)
    p.set_defaults(run=cmd_collect)

    p = command(
        steps,
        "export",
        "write the dataset database's records as gzip JSON Lines",
        "One JSON object per measurement: workload, op class, target, CPU model and kind,\n"
        "config, seconds, the paired reference's seconds and ratio, error kind and version.\n"
        "Features are not stored (training recomputes them). Prints the count written.",
    )
    db_option(p, _DB_HELP)
    p.add_argument("-o", "--output", required=True, metavar="FILE", help="the .jsonl.gz to write")
    p.add_argument(
        "--training-only",
        action="store_true",
        help="leave out the held-out families' workloads (to add a tuning database of any "
        "workloads to the training data)",
    )
    p.set_defaults(run=cmd_export)

    p = command(
        steps,
        "train",
        "fit the pretrained cost model on exported dataset files",
        "Recomputes the transferable features of every record (held-out families excluded),\n"
        "fits the registered model and saves it as the package's pretrained prior (or -o).",
    )
    _inputs(p)
    p.add_argument(
        "--model",
        default="lgbm-rank",
        metavar="NAME",
        help="registered cost model to fit (default: lgbm-rank)",
    )
    p.add_argument(
        "-o",
        "--output",
        default=None,
        metavar="FILE",
        help="where to save (default: the package's pretrained model file)",
    )
    p.add_argument(
        "--restricted",
        default=None,
        metavar="TARGET",
        help="train on this target's records only ('avx2', 'threads=1'); the held-out check "
        "then tests the model on every other target's",
    )
    p.set_defaults(run=cmd_train)

    p = command(
        steps,
        "card",
        "write the dataset's markdown card",
        "What was measured, on which CPUs, how many records per op class, the held-out\n"
        "families. Prints the path written.",
    )
    _inputs(p)
    p.add_argument("-o", "--output", required=True, metavar="FILE", help="the .md to write")
    p.add_argument(
        "--note",
        action="append",
        default=[],
        metavar="TEXT",
        help="a line for the card's notes (repeatable), e.g. how loaded the host was",
    )
    p.set_defaults(run=cmd_card)


def cmd_collect(args: argparse.Namespace) -> int:
    from ..database import open_database
    from ..dataset import (
        OP_CLASSES,
        collect,
        collection_order,
        held_out_workloads,
        op_class,
        training_workloads,
    )
    from ..errors import TensorTuneError
    from ..target import Target

    if args.op_class and args.op_class not in OP_CLASSES:
        raise TensorTuneError(
            f"--op-class {args.op_class!r} is not an op class of the dataset: "
            f"give one of {', '.join(OP_CLASSES)}"
        )
    target = Target.from_string(args.target)
    specs = collection_order(held_out_workloads() if args.held_out else training_workloads())
    specs = [s for s in specs if args.only in s and args.op_class in ("", op_class(s))]
    if not specs:
        raise TensorTuneError(
            f"--only {args.only!r}{f' --op-class {args.op_class}' if args.op_class else ''} "
            f"matches none of the dataset's "
            f"{'held-out' if args.held_out else 'training'} workloads: give part of a spec, "
            f"e.g. 'conv2d:' or ',C=3,'"
        )
    location = _dataset_db(args.db)

    def progress(step: Any) -> None:
        print(
            f"[{step.index}/{step.total}] {step.workload}: {step.before} -> {step.after} "
            f"configs ({step.seconds:.0f} s)",
            flush=True,
        )

    with open_database(location) as db:
        steps = collect(
            db,
            specs,
            target,
            trials=args.trials_per_workload,
            max_seconds=args.max_seconds,
            max_workloads=args.workloads,
            seed=args.seed,
            progress=progress,
        )
    added = sum(s.after - s.before for s in steps)
    print(f"measured {added} configs of {len(steps)} workloads on {target} into {shown(location)}")
    return EXIT_OK


def cmd_export(args: argparse.Namespace) -> int:
    from ..dataset import export_dataset

    with open_existing(_dataset_db(args.db)) as db:
        result = export_dataset(db, args.output, training_only=args.training_only)
    if not result.written:
        from ..dataset import DatasetError

        Path(args.output).unlink(missing_ok=True)
        what = "only records of held-out workloads" if result.held_out else "no records"
        raise DatasetError(f"the database {shown(_dataset_db(args.db))} holds {what} to export")
    notes = []
    if result.skipped:
        notes.append(f"{result.skipped} records of unknown workloads or targets skipped")
    if result.held_out:
        notes.append(f"{result.held_out} records of held-out workloads left out")
    print(f"wrote {result.written} records to {args.output}" + "".join(f" ({n})" for n in notes))
    return EXIT_OK


def cmd_train(args: argparse.Namespace) -> int:
    from ..dataset import read_records, train_pretrained

    path, meta = train_pretrained(
        read_records(args.inputs), args.model, args.output, args.restricted
    )
    held = meta["held_out"]
    print(
        f"trained {args.model} on {meta['records']} records of {meta['workloads']} workloads "
        f"({', '.join(meta['cpu_kinds'])}; {', '.join(meta['targets'])}); held-out pairwise "
        f"{_figure(held.get('pairwise_accuracy'))}, top-5 {_figure(held.get('top5_score'))} "
        f"over {held.get('workloads', 0)} workloads; saved to {path}"
    )
    return EXIT_OK


def _figure(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def cmd_card(args: argparse.Namespace) -> int:
    from ..dataset import read_records, write_card

    write_card(read_records(args.inputs), args.output, notes=args.note)
    print(f"wrote {args.output}")
    return EXIT_OK


__all__ = ["add_dataset_commands"]
