"""Print the aarch64 check's summary line at the end of the session (visible without -s)."""

from __future__ import annotations

import pytest

from tests.backend.aarch64_kernels import SUMMARY_KEY


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    line = terminalreporter.config.stash.get(SUMMARY_KEY, None)
    if line:
        terminalreporter.write_line(line)
