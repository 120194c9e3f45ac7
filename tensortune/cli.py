"""The ``tensortune`` command line: tune, inspect and use the tuning database.

    tensortune tune matmul:M=256,N=256,K=256 --trials 64 --strategy model
    tensortune best matmul:M=256,N=256,K=256
    tensortune history --json
    tensortune report -o report.html
    tensortune compile matmul:M=256,N=256,K=256 --emit-c

Every command takes ``--db`` (default: ``$TENSORTUNE_DB`` or the user cache directory), so
commands run one after another share their results. Only ``tune`` writes to it; the others open
it read-only, so they work on read-only media and never wait for a running tuner. A writer waits
at most ``$TENSORTUNE_DB_LOCK_TIMEOUT`` seconds (default 5) for another one's lock. Bad input (a
malformed spec, an unknown strategy, an unreadable database...) is reported as one
``error: ...`` line on stderr with exit status 2; set ``TENSORTUNE_DEBUG=1`` to get the
traceback instead.

Exit status: 0 success, 1 nothing found (``best`` with no successful record), 2 bad input,
130 interrupted.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import html
import io
import json
import math
import os
import sys
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from .errors import MissingDependency, StrategyError, TensorTuneError
from .version import __version__

EXIT_OK, EXIT_NOT_FOUND, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


class CLIError(TensorTuneError):
    """Bad command-line input found by the CLI itself (reported like any TensorTuneError)."""


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one ``error: ...`` line (exit 2), not usage + message."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"error: {message} (see '{self.prog} --help')\n")


# -- argument types (argparse turns their ArgumentTypeError into one error line) ---------------


def _non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def _positive_int(text: str) -> int:
    value = _non_negative_int(text)
    if value == 0:
        raise argparse.ArgumentTypeError("must be >= 1, got 0")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text}")
    return value


def build_parser() -> argparse.ArgumentParser:
    from .database import DB_ENV_VAR
    from .search.registry import STRATEGIES

    parser = _Parser(
        prog="tensortune",
        description="Compile and autotune tensor programs on this CPU.",
        epilog=f"Workload specs look like 'matmul:M=256,N=256,K=256' or "
        f"'conv2d:C=64,H=56,W=56,K=64,R=3,S=3,pad=1'. The database defaults to ${DB_ENV_VAR} "
        "or a file in the user cache directory.",
    )
    parser.add_argument("--version", action="version", version=f"tensortune {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def db_option(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--db",
            metavar="PATH",
            default=None,
            help="tuning database (SQLite file or SQLAlchemy URL); default: the shared one",
        )

    def threads_option(p: argparse.ArgumentParser, what: str) -> None:
        p.add_argument(
            "--threads",
            type=_positive_int,
            metavar="T",
            default=None,
            help=f"{what} (default: every CPU this process may use); part of the target",
        )

    p = sub.add_parser("tune", help="search for the fastest schedule of a workload")
    p.add_argument("spec", metavar="SPEC", help="workload spec, e.g. matmul:M=256,N=256,K=256")
    p.add_argument(
        "--trials",
        type=_non_negative_int,
        default=64,
        metavar="N",
        help="total measurements for this workload, counting earlier runs (default: 64)",
    )
    p.add_argument(
        "--strategy",
        default="model",
        metavar="NAME",
        help=f"search strategy: {', '.join(STRATEGIES)} (default: model)",
    )
    db_option(p)
    p.add_argument("--seed", type=int, default=0, metavar="S", help="random seed (default: 0)")
    p.add_argument(
        "--json", action="store_true", help="print the result as one JSON object (last line)"
    )
    p.add_argument(
        "--timeout",
        type=_positive_float,
        default=10.0,
        metavar="SEC",
        help="seconds one candidate may run before it counts as hung (default: 10)",
    )
    threads_option(p, "threads the kernels run on")
    p.add_argument(
        "--max-seconds",
        type=_positive_float,
        default=None,
        metavar="SEC",
        help="stop after this much tuning time",
    )
    p.add_argument(
        "--early-stop",
        type=_positive_int,
        default=None,
        metavar="N",
        help="stop after N trials in a row without a new best",
    )
    p.set_defaults(run=cmd_tune)

    p = sub.add_parser("best", help="show the best tuned configuration of a workload")
    p.add_argument("spec", metavar="SPEC", help="workload spec")
    db_option(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    threads_option(p, "the thread count it was tuned for")
    p.set_defaults(run=cmd_best)

    p = sub.add_parser("history", help="list every measurement in the database")
    db_option(p)
    p.add_argument("--json", action="store_true", help="JSON Lines, one record per line")
    p.add_argument("--workload", metavar="SPEC", default=None, help="only this workload")
    p.set_defaults(run=cmd_history)

    p = sub.add_parser("report", help="write an HTML report with tuning curves")
    db_option(p)
    p.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        default="report.html",
        help="where to write the report (default: report.html)",
    )
    p.set_defaults(run=cmd_report)

    p = sub.add_parser("compile", help="compile a workload with its best tuned schedule")
    p.add_argument("spec", metavar="SPEC", help="workload spec")
    db_option(p)
    p.add_argument("--emit-c", action="store_true", help="print the generated C source")
    threads_option(p, "threads the kernel runs on")
    p.set_defaults(run=cmd_compile)
    return parser


# -- shared helpers ------------------------------------------------------------------------------


def _db_location(db: str | None) -> str:
    """What --db resolves to, as the user should see it."""
    from .database import default_db_path

    return str(default_db_path() if db is None else db)


def _shown(location: str) -> str:
    """The location as printed: a server URL's password is masked."""
    from .database import printable_location

    return printable_location(location)


def _is_path(location: str) -> bool:
    return "://" not in location


def _open_existing(db: str | None):
    """Open a database that must already exist, read-only: querying never creates or locks
    anything, so it works on read-only media and while a tuner writes."""
    from .database import open_database

    location = _db_location(db)
    if _is_path(location) and not Path(location).expanduser().exists():
        hint = "run 'tensortune tune' first" if db is None else "check the path"
        raise CLIError(f"no tuning database at '{location}' ({hint})")
    return open_database(location, readonly=True)


def _target(threads: int | None):
    from .target import Target

    return Target.detect(num_threads=threads)


def _gflops(flops: float, seconds: float | None) -> float | None:
    return flops / seconds / 1e9 if seconds else None


def _fmt_seconds(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


def _fmt_gflops(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _fmt_config(config: dict[str, Any] | None, sep: str = ", ") -> str:
    if not config:
        return "-"
    return sep.join(f"{k}={v}" for k, v in sorted(config.items()))


def _esc(text: object) -> str:
    """Text from a record or the user, safe to print with rich (``[/x]`` is not markup)."""
    from rich.markup import escape

    return escape(str(text))


def _flops_of(name: str, cache: dict[str, float | None]) -> float | None:
    """FLOPs of a canonical workload name (None if this version cannot parse it)."""
    if name not in cache:
        from .workload import workload

        try:
            cache[name] = workload(name).flops
        except (TensorTuneError, ValueError):
            cache[name] = None
    return cache[name]


def _print_json(obj: Any) -> None:
    print(json.dumps(obj, allow_nan=False))


def _console(stderr: bool = False, width: int = 160):
    """A rich console; when not writing to a terminal, lines are not wrapped at 80 columns."""
    from rich.console import Console

    console = Console(stderr=stderr, highlight=False, soft_wrap=True)
    if not console.is_terminal:
        console.width = width
    return console


# -- tune ----------------------------------------------------------------------------------------


def cmd_tune(args: argparse.Namespace) -> int:
    from .database import open_database
    from .search.registry import STRATEGIES
    from .tuning import tune
    from .tuning.loop import CONFIRM
    from .workload import workload

    wl = workload(args.spec)  # SpecError before anything starts
    if args.strategy not in STRATEGIES:
        raise StrategyError(
            f"unknown strategy '{args.strategy}': choose one of {', '.join(STRATEGIES)}"
        )
    target = _target(args.threads)
    location = _db_location(args.db)
    with open_database(location) as database:  # an unreadable database fails here, cleanly
        already = sum(r.strategy != CONFIRM for r in database.records(wl.name, str(target)))

    # Progress: on stderr with --json (stdout is for the result), else on stdout; only on a TTY.
    console = _console(stderr=args.json)
    summary = _console()
    live = console.is_terminal
    if not args.json and already:
        summary.print(
            f"resuming: {already} measurement(s) of {_esc(wl.name)} on {_esc(target)} "
            f"already in {_esc(_shown(location))}"
        )

    kwargs = {
        "trials": args.trials,
        "strategy": args.strategy,
        "db": location,
        "target": target,
        "timeout": args.timeout,
        "seed": args.seed,
        "max_seconds": args.max_seconds,
        "early_stop": args.early_stop,
    }
    if live:
        with _TuneProgress(console, wl.name, args.trials, already) as bar:
            result = tune(wl, progress=bar.update, **kwargs)
    else:
        result = tune(wl, **kwargs)

    if args.json:
        _print_json(
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
                "db": _shown(location),
            }
        )
        return EXIT_OK
    _print_tune_summary(summary, result, _shown(location), args.strategy)
    return EXIT_OK


class _TuneProgress:
    """A rich progress bar fed by tune()'s ``progress`` callback."""

    def __init__(self, console, workload: str, total: int, already: int):
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            SpinnerColumn,
            TextColumn,
            TimeElapsedColumn,
        )

        self.progress = Progress(
            SpinnerColumn(),
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("trials"),
            TextColumn("best [green]{task.fields[best]}[/] GFLOP/s"),
            TextColumn("errors [red]{task.fields[errors]}[/]"),
            TimeElapsedColumn(),
            console=console,
            transient=False,
        )
        self.task = self.progress.add_task(
            _esc(workload), total=max(total, already), completed=already, best="-", errors=0
        )

    def __enter__(self) -> _TuneProgress:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def update(self, state) -> None:
        self.progress.update(
            self.task,
            completed=state.trials_done,
            total=max(state.trials_total, state.trials_done),
            best=_fmt_gflops(state.best_gflops),
            errors=state.errors,
        )


def _print_tune_summary(console, result, location: str, strategy: str) -> None:
    console.print(
        f"[bold]{_esc(result.workload)}[/] on {_esc(result.target)} ({_esc(strategy)} search)"
    )
    console.print(f"  trials:    {result.trials} (tuning time {result.tuning_seconds:.1f} s)")
    if result.best_seconds is None:
        console.print("  best:      [red]no candidate ran successfully[/]")
    else:
        console.print(
            f"  best:      {_fmt_seconds(result.best_seconds)}, "
            f"{_fmt_gflops(result.gflops)} GFLOP/s"
        )
        console.print(f"  config:    {_esc(_fmt_config(result.best_config))}", soft_wrap=True)
    if result.ratio_to_default is not None:
        interval = result.ratio_interval
        within = f" (final: {interval[0]:.3f} to {interval[1]:.3f})" if interval else ""
        console.print(
            f"  vs default: {result.ratio_to_default:.3f} of the template default's time, "
            f"timed side by side{within}"
        )
    console.print(f"  host:      {result.disturbed_rounds} disturbed timing round(s) re-timed")
    if result.errors:
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(result.errors_by_kind.items()))
        console.print(f"  failures:  {result.errors}" + (f" ({kinds})" if kinds else ""))
    else:
        console.print("  failures:  none")
    console.print(f"  database:  {_esc(location)}", soft_wrap=True)


# -- best ----------------------------------------------------------------------------------------


def cmd_best(args: argparse.Namespace) -> int:
    from .tuning.apply import tuned_schedule
    from .workload import workload

    wl = workload(args.spec)
    target = str(_target(args.threads))
    location = _db_location(args.db)
    with _open_existing(args.db) as database:
        best, _ = tuned_schedule(wl, database, _target(args.threads))
        others = [] if best is not None else database.records(wl.name)
    if best is None:
        if args.json:
            _print_json(
                {
                    "workload": wl.name,
                    "target": target,
                    "config": None,
                    "seconds": None,
                    "gflops": None,
                }
            )
        message = f"no successful measurement of {wl.name} on target {target} in {_shown(location)}"
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
    gflops = _gflops(wl.flops, best.seconds)
    if args.json:
        _print_json(
            {
                "workload": best.workload,
                "target": best.target,
                "config": best.config,
                "seconds": best.seconds,
                "gflops": gflops,
                "ratio_to_default": best.ratio,
                "strategy": best.strategy,
                "run_id": best.run_id,
            }
        )
        return EXIT_OK
    console = _console()
    console.print(f"[bold]{_esc(best.workload)}[/] on {_esc(best.target)}")
    console.print(f"  time:    {_fmt_seconds(best.seconds)}")
    console.print(f"  GFLOP/s: {_fmt_gflops(gflops)}")
    if best.ratio is not None:
        console.print(f"  ratio:   {best.ratio:.3f} of the template default's time")
    console.print(f"  config:  {_esc(_fmt_config(best.config))}", soft_wrap=True)
    console.print(
        f"  found by {_esc(best.strategy or '?')} search (run {_esc(best.run_id or '?')})"
    )
    return EXIT_OK


# -- history -------------------------------------------------------------------------------------


def cmd_history(args: argparse.Namespace) -> int:
    from .workload import workload

    name = workload(args.workload).name if args.workload else None
    location = _db_location(args.db)
    with _open_existing(args.db) as database:
        records = database.records(name)
    if args.json:
        for rec in records:
            _print_json(
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
        print(f"no records{which} in {_shown(location)}")
        return EXIT_OK
    from rich.table import Table

    flops: dict[str, float | None] = {}
    names = {r.workload for r in records}
    targets = {r.target for r in records}
    title = f"{len(records)} measurement(s) in {_esc(_shown(location))}"
    if len(names) == 1:
        title = f"{title}\nworkload {_esc(next(iter(names)))}"
    if len(targets) == 1:
        title = f"{title}, target {_esc(next(iter(targets)))}"
    table = Table(title=title)
    columns = [("#", "right")]
    columns += [("workload", "left")] if len(names) > 1 else []
    columns += [("target", "left")] if len(targets) > 1 else []
    columns += [("strategy", "left"), ("config", "left"), ("time", "right")]
    columns += [("GFLOP/s", "right"), ("status", "left")]
    for column, justify in columns:
        table.add_column(column, justify=justify, min_width=24 if column == "config" else None)
    for rec in records:
        f = _flops_of(rec.workload, flops)
        row = [str(rec.trial)]
        row += [_esc(rec.workload)] if len(names) > 1 else []
        row += [_esc(rec.target)] if len(targets) > 1 else []
        row += [_esc(rec.strategy), _esc(_fmt_config(rec.config, " ")), _fmt_seconds(rec.seconds)]
        row += [_fmt_gflops(_gflops(f, rec.seconds) if f else None)]
        row += ["[green]ok[/]" if rec.ok else f"[red]{rec.error}[/]"]
        table.add_row(*row)
    _console().print(table)
    return EXIT_OK


# -- report --------------------------------------------------------------------------------------


def cmd_report(args: argparse.Namespace) -> int:
    try:
        from matplotlib.figure import Figure  # noqa: F401 (checked before any work)
    except ImportError:
        raise MissingDependency(
            'the report needs matplotlib: pip install "tensortune[tune]"'
        ) from None
    location = _db_location(args.db)
    with _open_existing(args.db) as database:
        records = database.records()
    page = render_report(records, _shown(location))
    out = Path(args.output).expanduser()
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(page, encoding="utf-8")
    except OSError as exc:
        raise CLIError(f"cannot write report '{out}': {exc.strerror or exc}") from None
    groups = len({(r.workload, r.target) for r in records})
    print(f"wrote {out} ({len(records)} record(s), {groups} workload/target pair(s))")
    return EXIT_OK


def render_report(records, location: str) -> str:
    """The HTML report page for ``records`` (TuningRecords, in insertion order)."""
    from .database.record import rank_configs
    from .tuning.loop import CONFIRM

    esc = html.escape
    flops: dict[str, float | None] = {}
    groups: dict[tuple[str, str], list] = {}
    for rec in records:
        groups.setdefault((rec.workload, rec.target), []).append(rec)

    sections, rows = [], []
    for (name, target), recs in sorted(groups.items()):
        f = _flops_of(name, flops)
        ok = [r for r in recs if r.ok]
        ranked = rank_configs(ok, order=lambda r: r.created_at)
        best = ranked[0][0] if ranked else None  # the rule `best` and `compile` use
        failures = len(recs) - len(ok)
        trials = sum(r.strategy != CONFIRM for r in recs)
        rows.append(
            "<tr>"
            f"<td><code>{esc(name)}</code></td><td>{esc(target)}</td>"
            f"<td class=num>{_fmt_gflops(_gflops(f, best.seconds) if best and f else None)}</td>"
            f"<td class=num>{esc(_fmt_seconds(best.seconds if best else None))}</td>"
            f"<td><code>{esc(_fmt_config(best.config if best else None))}</code></td>"
            f"<td>{esc(best.strategy if best else '-')}</td>"
            f"<td class=num>{trials}</td><td class=num>{failures}</td>"
            "</tr>"
        )
        png = _curve_png(name, target, recs, f)
        sections.append(
            f"<section><h2><code>{esc(name)}</code> on {esc(target)}</h2>"
            f'<img alt="best GFLOP/s so far vs trial for {esc(name)} on {esc(target)}" '
            f'src="data:image/png;base64,{png}">'
            f"<p>{len(recs)} measurement(s), {failures} failed"
            f"{_failure_breakdown(recs)}.</p></section>"
        )

    table = (
        "<table><thead><tr><th>workload</th><th>target</th><th>best GFLOP/s</th>"
        "<th>best time</th><th>best config</th><th>found by</th><th>trials</th>"
        "<th>failures</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>"
        if rows
        else "<p>The database holds no records yet: run <code>tensortune tune</code>.</p>"
    )
    generated = time.strftime("%Y-%m-%d %H:%M:%S")
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>tensortune tuning report</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #222; }}
table {{ border-collapse: collapse; margin: 1em 0; }}
th, td {{ border: 1px solid #ccc; padding: 4px 8px; text-align: left; vertical-align: top; }}
th {{ background: #f0f0f0; }}
td.num {{ text-align: right; font-variant-numeric: tabular-nums; }}
img {{ max-width: 100%; border: 1px solid #eee; }}
section {{ margin-top: 2em; }}
.meta {{ color: #666; }}
</style>
</head>
<body>
<h1>tensortune tuning report</h1>
<p class="meta">Database <code>{esc(location)}</code>: {len(records)} record(s).
Generated {esc(generated)} by tensortune {esc(__version__)}.</p>
<h2>Best configuration per workload</h2>
{table}
{"".join(sections)}
</body>
</html>
"""


def _failure_breakdown(recs) -> str:
    kinds: dict[str, int] = {}
    for r in recs:
        if r.error:
            kinds[r.error] = kinds.get(r.error, 0) + 1
    if not kinds:
        return ""
    return " (" + ", ".join(f"{k}: {n}" for k, n in sorted(kinds.items())) + ")"


def _no_math(text: str) -> str:
    """Record text for matplotlib, which would parse ``$...$`` in it as (possibly bad) math."""
    return text.replace("$", r"\$")


def _curve_png(name: str, target: str, recs, flops: float | None) -> str:
    """Best-so-far GFLOP/s vs trial, one line per (strategy, run_id), as base64 PNG."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from .tuning.loop import CONFIRM

    runs: dict[tuple[str, str], list] = {}
    for rec in recs:
        if rec.strategy != CONFIRM:  # re-measurements of the winners are not trials
            runs.setdefault((rec.strategy, rec.run_id), []).append(rec)

    fig = Figure(figsize=(8, 4.2), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    drawn = 0
    for (strategy, run_id), run in runs.items():
        xs, ys, best = [], [], math.nan  # NaN (not drawn) until the run's first success
        for i, rec in enumerate(run, 1):
            value = _gflops(flops, rec.seconds) if flops and rec.ok else None
            if value is not None and (math.isnan(best) or value > best):
                best = value
            xs.append(rec.trial if rec.trial > 0 else i)
            ys.append(best)
        label = _no_math(f"{strategy or 'unknown'} (run {run_id[:8] or '?'})")
        if all(math.isnan(y) for y in ys):
            label += ", no success"
        ax.plot(xs, ys, drawstyle="steps-post", marker="o", markersize=3, label=label)
        drawn += 1
    ax.set_title(_no_math(f"{name} on {target}"), fontsize=10)
    ax.set_xlabel("trial")
    ax.set_ylabel("best GFLOP/s so far" if flops else "best GFLOP/s so far (FLOPs unknown)")
    ax.grid(True, alpha=0.3)
    ax.set_ylim(bottom=0)
    if drawn:
        ax.legend(title="strategy (run)", fontsize=8, loc="best")
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    return base64.b64encode(buffer.getvalue()).decode("ascii")


# -- compile -------------------------------------------------------------------------------------


def cmd_compile(args: argparse.Namespace) -> int:
    from .database import open_database
    from .pipeline import compile as compile_with
    from .tuning.apply import tuned_schedule
    from .workload import workload

    wl = workload(args.spec)
    target = _target(args.threads)
    location = _db_location(args.db)
    missing = _is_path(location) and not Path(location).expanduser().exists()
    # A database that does not exist yet is not created just to find nothing in it.
    source_db = "sqlite://" if missing else location
    with open_database(source_db, readonly=not missing) as database:
        best, schedule = tuned_schedule(wl, database, target)
    kernel = compile_with(wl, schedule, target)
    if args.emit_c:
        sys.stdout.write(kernel.source if kernel.source.endswith("\n") else kernel.source + "\n")
        return EXIT_OK
    if best is not None:
        how = (
            f"tuned schedule ({_fmt_seconds(best.seconds)}, "
            f"{_fmt_gflops(_gflops(wl.flops, best.seconds))} GFLOP/s when tuned)"
        )
    else:
        how = "default schedule (not tuned on this target yet)"
    print(f"compiled {wl.name} for {target} with the {how}: {kernel.library_path}")
    return EXIT_OK


# -- entry point ---------------------------------------------------------------------------------


def _one_line(exc: BaseException | str) -> str:
    text = str(exc).strip()
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return type(exc).__name__
    more = " (more with TENSORTUNE_DEBUG=1)" if len(lines) > 1 else ""
    return lines[0] + more


def _show_warning(message: Warning | str, *_: object, **__: object) -> None:
    """A warning (e.g. a skipped database record) as one ``warning: ...`` line on stderr."""
    print(f"warning: {_one_line(message)}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit status (see the module docstring)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version, usage errors
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    with warnings.catch_warnings():
        warnings.showwarning = _show_warning
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    """Run the parsed command, turning tensortune's own errors into one ``error:`` line."""
    debug = bool(os.environ.get("TENSORTUNE_DEBUG"))
    try:
        return args.run(args)
    except KeyboardInterrupt:
        where = _shown(_db_location(getattr(args, "db", None)))
        print(f"\ninterrupted; measurements so far are saved in {where}", file=sys.stderr)
        return EXIT_INTERRUPTED
    except (TensorTuneError, ValueError) as exc:
        if debug:
            raise
        print(f"error: {_one_line(exc)}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:  # e.g. `tensortune history --json | head`
        with contextlib.suppress(OSError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK


if __name__ == "__main__":
    raise SystemExit(main())
