"""The examples run as a user runs them: a fresh interpreter, the installed package."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def run_example(name: str, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / name), *args],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


@pytest.mark.slow
def test_custom_strategy_and_model() -> None:
    out = run_example("custom_strategy_and_model.py", "2").splitlines()
    assert [line.split(":")[0] for line in out] == ["hill-climb", "model + ridge"]
    assert all("2 trials" in line and "config {" in line for line in out), out
