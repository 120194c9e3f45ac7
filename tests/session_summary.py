"""Lines a test leaves for the end of the session's terminal summary, shown without ``-s`` and
under pytest-xdist: a worker's lines travel to the controller with the worker's output, since the
controller runs no test and sees no worker's ``config.stash``."""

from __future__ import annotations

from typing import Any

import pytest

LINES_KEY = pytest.StashKey[list[str]]()
WORKER_OUTPUT_KEY = "tensortune_summary_lines"


def leave_line(config: pytest.Config, line: str) -> None:
    """Print `line` once at the end of the session, whichever process ran the test."""
    lines = config.stash.setdefault(LINES_KEY, [])
    if line not in lines:
        lines.append(line)


def pytest_sessionfinish(session: pytest.Session) -> None:
    worker_output = getattr(session.config, "workeroutput", None)
    if worker_output is not None:  # an xdist worker: hand the lines to the controller
        worker_output[WORKER_OUTPUT_KEY] = session.config.stash.get(LINES_KEY, [])


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    """xdist's controller, as each worker ends: keep the lines it left."""
    for line in getattr(node, "workeroutput", {}).get(WORKER_OUTPUT_KEY, []):
        leave_line(node.config, line)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    for line in terminalreporter.config.stash.get(LINES_KEY, []):
        terminalreporter.write_line(line)
