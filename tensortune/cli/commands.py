"""The commands: each takes the parsed arguments and returns the exit status."""

from __future__ import annotations

import argparse
import inspect
import sys
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import MissingDependency, StrategyError
from .common import (
    EXIT_NOT_FOUND,
    EXIT_OK,
    CLIError,
    db_location,
    detect_target,
    found_by,
    found_by_phrase,
    open_existing,
    print_json,
    shown,
)
from .format import (
    PREDICTED,
    TuneProgress,
    console,
    esc,
    fmt_config,
    fmt_gflops,
    fmt_seconds,
    history_table,
    print_tune_summary,
)

if TYPE_CHECKING:
    from ..database import Prediction
    from ..schedule import Schedule
    from ..target import Target
    from ..tuning.result import TuneResult
    from ..workload import Workload


def cmd_tune(args: argparse.Namespace) -> int:
    """Search for the workload's fastest schedule, recording every measurement."""
    from .. import tuning
    from ..database import open_database
    from ..search.registry import STRATEGIES
    from ..tuning.loop import CONFIRM
    from ..workload import workload

    wl = workload(args.spec)  # SpecError before anything starts
    if args.strategy not in STRATEGIES:
        raise StrategyError(
            f"unknown strategy '{args.strategy}': choose one of {', '.join(STRATEGIES)}"
        )
    tune = tuning.tune  # looked up now, so a test's monkeypatch of tensortune.tuning.tune holds
    kwargs = {
        "trials": args.trials,
        "strategy": args.strategy,
        "timeout": args.timeout,
        "seed": args.seed,
        "max_seconds": args.max_seconds,
        "early_stop": args.early_stop,
    }
    if args.model is not None:
        if not _takes(tune, "model"):
            raise CLIError("--model: this version's tune() cannot be given a cost model")
        kwargs["model"] = args.model
    if args.fleet is not None:
        if not _takes(tune, "fleet"):
            raise CLIError("--fleet: this version's tune() cannot measure on a fleet")
        kwargs["fleet"] = args.fleet
    target = detect_target(args.threads)
    location = db_location(args.db)
    with open_database(location) as database:  # an unreadable database fails here, cleanly
        already = sum(r.strategy != CONFIRM for r in database.records(wl.name, str(target)))

    # Progress: on stderr with --json (stdout is for the result), else on stdout; only on a TTY.
    progress_out = console(stderr=args.json)
    summary = console()
    if not args.json and already:
        summary.print(
            f"resuming: {already} measurement(s) of {esc(wl.name)} on {esc(target)} "
            f"already in {esc(shown(location))}"
        )
    kwargs |= {"db": location, "target": target}
    if progress_out.is_terminal:
        with TuneProgress(progress_out, wl.name, args.trials, already) as bar:
            result = tune(wl, progress=bar.update, **kwargs)
    else:
        result = tune(wl, **kwargs)

    if args.json:
        print_json(
            {
                "workload": result.workload,
                "target": result.target,
                "trials": result.trials,
                "best_seconds": result.best_seconds,
                "gflops": result.gflops,
                "config": result.best_config,
                "tuning_seconds": result.tuning_seconds,
                "errors": result.errors,
                "errors_by_kind": result.errors_by_kind,
                "db": shown(location),
                "trials_per_minute": result.trials_per_minute,
                "nodes": [asdict(node) for node in result.nodes],
            }
        )
        return EXIT_OK
    print_tune_summary(summary, result, shown(location), args.strategy)
    _print_throughput(summary, result)
    return EXIT_OK


def _print_throughput(out: Any, result: TuneResult) -> None:
    """The run's end-to-end rate and, on a fleet, one line of accounts per node."""
    if result.trials_per_minute is not None:
        out.print(f"  rate:      {result.trials_per_minute:.1f} trials/min end to end")
    for node in result.nodes:
        idle = "" if node.idle_share is None else f", idle {node.idle_share:.0%}"
        why = "" if node.state == "ok" else f" [yellow]{esc(node.state)}: {esc(node.reason)}[/]"
        out.print(
            f"  node {esc(node.host)} {esc(node.node)}: built {node.built}, "
            f"measured {node.measured}{idle}{why}",
            soft_wrap=True,
        )


def _takes(fn: object, keyword: str) -> bool:
    """Whether ``fn`` accepts ``keyword`` (a named parameter or ``**kwargs``)."""
    try:
        params = inspect.signature(fn).parameters  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return True
    return keyword in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


def cmd_best(args: argparse.Namespace) -> int:
    """Show the best valid configuration of a workload on this target (or, never measured
    there, the zero-shot config a compile chose, marked as a prediction)."""
    from ..tuning.apply import chosen_schedule
    from ..tuning.result import gflops
    from ..workload import workload

    wl = workload(args.spec)
    target = str(detect_target(args.threads))
    location = db_location(args.db)
    with open_existing(args.db) as database:
        chosen = chosen_schedule(wl, database, detect_target(args.threads), predict=False)
        best = chosen.record
        records = database.records(wl.name, target) if best is not None else []
        others = [] if best is not None else database.records(wl.name)
    if best is None and chosen.prediction is not None:
        return _show_prediction(chosen.prediction, args.json)
    if best is None:
        if args.json:
            print_json(
                {"workload": wl.name, "target": target, "config": None, "seconds": None,
                 "gflops": None}
            )  # fmt: skip
        message = f"no successful measurement of {wl.name} on target {target} in {shown(location)}"
        elsewhere = sorted({r.target for r in others} - {target})
        if elsewhere:
            message += f" (there are records for target(s) {', '.join(elsewhere)}: see --threads)"
        elif others:
            failed = sum(not r.ok for r in others)
            skipped = len(others) - failed
            message += f" ({failed} failed measurement(s)" + (
                f", {skipped} record(s) skipped as invalid)" if skipped else ")"
            )
        print(message, file=sys.stderr)
        return EXIT_NOT_FOUND
    speed = gflops(wl.flops, best.seconds)
    strategy = found_by(records, best.config_key)
    if args.json:
        print_json(
            {
                "workload": best.workload,
                "target": best.target,
                "config": best.config,
                "seconds": best.seconds,
                "gflops": speed,
                "ratio_to_default": best.ratio,
                "strategy": strategy,
                "run_id": best.run_id,
                "kind": "measured",
            }
        )
        return EXIT_OK
    out = console()
    out.print(f"[bold]{esc(best.workload)}[/] on {esc(best.target)}")
    out.print(f"  time:    {fmt_seconds(best.seconds)}")
    out.print(f"  GFLOP/s: {fmt_gflops(speed)}")
    if best.ratio is not None:
        out.print(f"  ratio:   {best.ratio:.3f} of the template default's time")
    out.print(f"  config:  {esc(fmt_config(best.config))}", soft_wrap=True)
    out.print(f"  found by {esc(found_by_phrase(strategy))} (run {esc(best.run_id or '?')})")
    return EXIT_OK


def _show_prediction(prediction: Prediction, as_json: bool) -> int:
    """``best`` for a workload only predicted: its config, marked as never measured."""
    if as_json:
        print_json(
            {
                "workload": prediction.workload,
                "target": prediction.target,
                "config": prediction.config,
                "seconds": None,
                "gflops": None,
                "kind": "predicted",
                "predicted_by": prediction.model,
                "source": prediction.source,
                "candidates": prediction.candidates,
            }
        )
        return EXIT_OK
    out = console()
    out.print(f"[bold]{esc(prediction.workload)}[/] on {esc(prediction.target)}")
    out.print(f"  time:    - ({PREDICTED}: run 'tensortune tune' to measure)")
    out.print(f"  config:  {esc(fmt_config(prediction.config))}", soft_wrap=True)
    out.print(
        f"  chosen by the {esc(prediction.model)} cost model from {prediction.candidates} "
        f"candidate(s) (this one: {esc(prediction.source)})"
    )
    return EXIT_OK


def cmd_history(args: argparse.Namespace) -> int:
    """List measurements, as a table or as JSON Lines."""
    from ..workload import workload

    name = workload(args.workload).name if args.workload else None
    location = db_location(args.db)
    with open_existing(args.db) as database:
        records = database.records(name)
    if args.json:
        for rec in records:
            print_json(
                {
                    "workload": rec.workload,
                    "target": rec.target,
                    "config": rec.config,
                    "seconds": rec.seconds,
                    "error": rec.error,
                    "strategy": rec.strategy,
                    "trial": rec.trial,
                    "run_id": rec.run_id,
                    "created_at": rec.created_at,
                }
            )
        return EXIT_OK
    if not records:
        which = f" for {name}" if name else ""
        print(f"no records{which} in {shown(location)}")
        return EXIT_OK
    console().print(history_table(records, location))
    return EXIT_OK


def cmd_report(args: argparse.Namespace) -> int:
    """Write the HTML report (curves, winners, roofline and peers) to ``--output``."""
    try:
        from matplotlib.figure import Figure  # noqa: F401 (checked before any work)
    except ImportError:
        raise MissingDependency(
            'the report needs matplotlib: pip install "tensortune[tune]"'
        ) from None
    from .report import render_report

    location = db_location(args.db)
    with open_existing(args.db) as database:
        records = database.records()
    page = render_report(records, shown(location), peers=args.peers, roofline=args.roofline)
    out = Path(args.output).expanduser()
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(page, encoding="utf-8")
    except OSError as exc:
        raise CLIError(f"cannot write report '{out}': {exc.strerror or exc}") from None
    groups = len({(r.workload, r.target) for r in records})
    print(f"wrote {out} ({len(records)} record(s), {groups} workload/target pair(s))")
    return EXIT_OK


def cmd_compile(args: argparse.Namespace) -> int:
    """Build the workload with its best tuned schedule (else a zero-shot one, else the
    default); print C or IR."""
    from ..tuning.apply import chosen_schedule
    from ..tuning.result import gflops
    from ..workload import workload

    wl = workload(args.spec)
    target = detect_target(args.threads)
    # A database that does not exist yet is not created: a zero-shot choice is then not kept.
    chosen = chosen_schedule(wl, db_location(args.db), target)
    if args.emit_ir:
        _write(final_ir(wl, chosen.schedule, target))
        return EXIT_OK
    from ..pipeline import compile as compile_with

    kernel = compile_with(wl, chosen.schedule, target)
    if args.emit_c:
        _write(kernel.source)
        return EXIT_OK
    best, prediction = chosen.record, chosen.prediction
    if best is not None:
        how = (
            f"tuned schedule ({fmt_seconds(best.seconds)}, "
            f"{fmt_gflops(gflops(wl.flops, best.seconds))} GFLOP/s when tuned)"
        )
    elif prediction is not None:
        how = (
            f"zero-shot schedule ({PREDICTED}; chosen by the {prediction.model} cost model "
            f"in {prediction.choice_seconds:.2f} s)"
        )
    else:
        how = "default schedule (not tuned on this target yet)"
    print(f"compiled {wl.name} for {target} with the {how}: {kernel.library_path}")
    return EXIT_OK


def final_ir(wl: Workload, schedule: Schedule, target: Target) -> str:
    """The lowered PrimFunc of ``schedule`` as ``tensortune.ir.printer`` shows it: the program
    codegen prints, under the kernel name ``compile`` gives it."""
    from ..ir.printer import format_stmt
    from ..lower import lower
    from ..pipeline import as_outputs, kernel_name

    name = kernel_name(wl, as_outputs(wl))
    return format_stmt(lower(schedule, name, target.num_threads))


def _write(text: str) -> None:
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
