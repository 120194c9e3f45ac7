"""A line a test leaves for the session's summary is printed, in one process and under xdist."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PYTEST = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]

LEAVING_TESTS = """
from tests.session_summary import leave_line

def test_one(request):
    leave_line(request.config, "kernels checked: 7 of 7")

def test_two(request):
    leave_line(request.config, "kernels checked: 7 of 7")
"""


@pytest.mark.parametrize("processes", ["0", "2"])
def test_left_line_is_printed_once(tmp_path: Path, processes: str) -> None:
    (tmp_path / "test_leaving.py").write_text(LEAVING_TESTS)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = subprocess.run(
        [*PYTEST, "-p", "tests.session_summary", "-n", processes, "test_leaving.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.count("kernels checked: 7 of 7") == 1, run.stdout
