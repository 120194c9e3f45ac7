"""The pieces every command's arguments are built from: subcommands with one --help layout,
the shared options (--db, --threads, SPEC) and argument types that fail with one error line."""

from __future__ import annotations

import argparse
import math

EXIT_STATUS = (
    "exit status: 0 success, 1 nothing found (best), 2 bad input (one 'error: ...' line on "
    "stderr; TENSORTUNE_DEBUG=1 shows the traceback), 130 interrupted"
)

_DB_HELP = (
    "tuning database: a SQLite file or a SQLAlchemy URL (default: $TENSORTUNE_DB, else "
    "tuning.db in the user cache directory, shared by every command)"
)


# -- argument types (argparse turns their ArgumentTypeError into one error line) ---------------


def non_negative_int(text: str) -> int:
    """An int >= 0."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def positive_int(text: str) -> int:
    """An int >= 1."""
    value = non_negative_int(text)
    if value == 0:
        raise argparse.ArgumentTypeError("must be >= 1, got 0")
    return value


def positive_float(text: str) -> float:
    """A finite number of seconds > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text}")
    return value


# -- subcommands and the options they share ----------------------------------------------------


def command(
    sub: argparse._SubParsersAction, name: str, summary: str, details: str
) -> argparse.ArgumentParser:
    """A subcommand whose --help gives the summary, what it prints and the exit status."""
    return sub.add_parser(
        name,
        help=summary,
        description=f"{summary[0].upper()}{summary[1:]}.\n\n{details}",
        epilog=EXIT_STATUS,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def db_option(p: argparse.ArgumentParser, help_text: str = _DB_HELP) -> None:
    """--db PATH (default None: the command's own default database)."""
    p.add_argument("--db", metavar="PATH", default=None, help=help_text)


def threads_option(p: argparse.ArgumentParser, what: str) -> None:
    """--threads T (default None: every CPU this process may use)."""
    p.add_argument(
        "--threads",
        type=positive_int,
        metavar="T",
        default=None,
        help=f"{what} (default: every CPU this process may use); part of the target",
    )


def seed_option(p: argparse.ArgumentParser) -> None:
    """--seed S (default 0), so a run can be repeated exactly."""
    p.add_argument("--seed", type=int, default=0, metavar="S", help="random seed (default: 0)")


def max_seconds_option(p: argparse.ArgumentParser, what: str) -> None:
    """--max-seconds SEC (default None: no limit)."""
    p.add_argument(
        "--max-seconds",
        type=positive_float,
        default=None,
        metavar="SEC",
        help=f"stop after this much {what} (default: no limit)",
    )


def spec_argument(p: argparse.ArgumentParser) -> None:
    """The positional workload SPEC."""
    p.add_argument(
        "spec", metavar="SPEC", help="workload spec, e.g. 'matmul:M=256,N=256,K=256' (any order)"
    )
