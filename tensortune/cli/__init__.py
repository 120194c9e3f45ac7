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

Modules: ``parser`` (arguments and --help, built from ``options``), ``commands`` (what each
command does), ``format`` (terminal output), ``report`` (the HTML page), ``roofline`` and
``peers`` (what the report compares winners with).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import warnings
from collections.abc import Sequence

from ..errors import TensorTuneError
from .common import EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, CLIError, db_location, shown
from .parser import build_parser


def _one_line(exc: BaseException | Warning | str) -> str:
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
    """Run the CLI on ``argv`` (default: ``sys.argv[1:]``) and return the exit status:
    0 success, 1 nothing found, 2 bad input (one ``error:`` line on stderr), 130 interrupted."""
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
        where = shown(db_location(getattr(args, "db", None)))
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


__all__ = ["CLIError", "build_parser", "main"]
