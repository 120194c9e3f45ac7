"""The argument parser: every command, its options, defaults and what it prints (``--help``)."""

from __future__ import annotations

import argparse
from typing import NoReturn

from ..version import __version__
from .common import EXIT_USAGE
from .options import (
    EXIT_STATUS,
    command,
    db_option,
    max_seconds_option,
    non_negative_int,
    positive_float,
    positive_int,
    seed_option,
    spec_argument,
    threads_option,
)


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one ``error: ...`` line (exit 2), not usage + message."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"error: {message} (see '{self.prog} --help')\n")


def _cost_models() -> str:
    """The registered cost models' names, for --help (plug-ins registered on import included)."""
    try:
        from ..cost_model.registry import COST_MODELS
    except ImportError:  # a tensortune without the registry: name the usual ones
        return "e.g. lgbm, random"
    return ", ".join(COST_MODELS)


def build_parser() -> argparse.ArgumentParser:
    """The ``tensortune`` parser; each subcommand sets ``run`` to its command function."""
    from ..search.registry import STRATEGIES
    from .commands import cmd_best, cmd_compile, cmd_history, cmd_report, cmd_tune
    from .dataset_commands import add_dataset_commands
    from .model_commands import add_model_commands

    parser = _Parser(
        prog="tensortune",
        description="Compile and autotune tensor programs on this CPU.",
        epilog="Workload specs look like 'matmul:M=256,N=256,K=256' or "
        "'conv2d:C=64,H=56,W=56,K=64,R=3,S=3,pad=1'. The database defaults to $TENSORTUNE_DB "
        "or tuning.db in the user cache directory; compiled kernels are cached in "
        "$TENSORTUNE_CACHE_DIR or the user cache directory. " + EXIT_STATUS + ".",
    )
    parser.add_argument("--version", action="version", version=f"tensortune {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p = command(
        sub,
        "tune",
        "search for the fastest schedule of a workload",
        "Measures candidate schedules on this machine and commits each measurement to the\n"
        "database at once: a killed run loses nothing, and rerunning the same command resumes\n"
        "(--trials counts earlier runs' measurements). Prints a summary (best time, GFLOP/s,\n"
        "config, ratio to the template default, failures by kind), or with --json one JSON\n"
        "object as the last line of stdout. A broken environment (no C compiler, unwritable\n"
        "cache) stops the run with one error line.",
    )
    spec_argument(p)
    p.add_argument(
        "--trials",
        type=non_negative_int,
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
    p.add_argument(
        "--model",
        default=None,
        metavar="NAME",
        help=f"cost model guiding the search, by its registered name: {_cost_models()} "
        "(default: the strategy's own)",
    )
    db_option(p)
    seed_option(p)
    p.add_argument(
        "--json", action="store_true", help="print the result as one JSON object (last line)"
    )
    p.add_argument(
        "--timeout",
        type=positive_float,
        default=10.0,
        metavar="SEC",
        help="seconds one candidate may run before it counts as hung (default: 10)",
    )
    threads_option(p, "threads the kernels run on")
    max_seconds_option(p, "tuning time")
    p.add_argument(
        "--early-stop",
        type=positive_int,
        default=None,
        metavar="N",
        help="stop after N trials in a row without a new best (default: never)",
    )
    p.add_argument(
        "--fleet",
        default=None,
        metavar="ADDR",
        help="build and time candidates on the nodes of a Ray cluster: 'auto' (this machine's "
        "cluster, or a new local one), ray://HOST:PORT or HOST:PORT (needs "
        'pip install "tensortune[fleet]"; default: on this machine)',
    )
    p.set_defaults(run=cmd_tune)

    p = command(
        sub,
        "best",
        "show the best tuned configuration of a workload",
        "Ranks configs the way 'compile' does (median ratio to the template default) and\n"
        "prints the winner's time, GFLOP/s, config and the strategy that found it; with --json\n"
        "one JSON object. Exit status 1 (and a reason on stderr) when nothing succeeded on\n"
        "this target. Opens the database read-only.",
    )
    spec_argument(p)
    db_option(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    threads_option(p, "the thread count it was tuned for")
    p.set_defaults(run=cmd_best)

    p = command(
        sub,
        "history",
        "list every measurement in the database",
        "A table of measurements (trial, strategy, config, time, GFLOP/s, status), or with\n"
        "--json JSON Lines with the keys workload, target, config, seconds, error, strategy,\n"
        "trial, run_id and created_at. Opens the database read-only.",
    )
    db_option(p)
    p.add_argument("--json", action="store_true", help="JSON Lines, one record per line")
    p.add_argument("--workload", metavar="SPEC", default=None, help="only this workload")
    p.set_defaults(run=cmd_history)

    p = command(
        sub,
        "report",
        "write an HTML report with tuning curves",
        "One self-contained HTML page: per workload and target, the best-so-far curve of\n"
        "each strategy run, the winning config and the strategy that found it, where the\n"
        "winner sits against this machine's roofline (peak FLOP/s and memory bandwidth,\n"
        "measured once and cached in the kernel cache directory) and against the fastest\n"
        "installed peer (NumPy, PyTorch, ONNX Runtime), timed now. Needs matplotlib.",
    )
    db_option(p)
    p.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        default="report.html",
        help="where to write the report (default: report.html)",
    )
    p.add_argument(
        "--no-peers",
        dest="peers",
        action="store_false",
        help="do not time NumPy/PyTorch/ONNX Runtime for comparison (faster)",
    )
    p.add_argument(
        "--no-roofline",
        dest="roofline",
        action="store_false",
        help="do not measure or show this machine's roofline",
    )
    p.set_defaults(run=cmd_report)

    p = command(
        sub,
        "compile",
        "compile a workload with its best tuned schedule",
        "Builds the kernel from the best valid record for this target (with none, the config\n"
        "the pretrained cost model ranks first, recorded as a prediction, or the design\n"
        "space's default) and prints the path of the shared library; --emit-c\n"
        "prints the generated C instead, --emit-ir the final loop-nest IR it is printed from.\n"
        "Does not create a database that does not exist.",
    )
    spec_argument(p)
    db_option(p)
    emit = p.add_mutually_exclusive_group()
    emit.add_argument("--emit-c", action="store_true", help="print the generated C source")
    emit.add_argument(
        "--emit-ir", action="store_true", help="print the final IR that codegen turns into C"
    )
    threads_option(p, "threads the kernel runs on")
    p.set_defaults(run=cmd_compile)
    add_model_commands(sub)
    add_dataset_commands(sub)
    return parser
