"""A missing optional package is one ``error:`` line naming the install command (issue 11, item 11).

``pip install tensortune`` without the ``tune`` extra lacks Optuna and matplotlib (LightGBM is a
core dependency, checked here as a broken install).
Each command is run in a fresh process in which those modules cannot be imported (a
``sitecustomize`` sets ``sys.modules[name] = None``, which makes ``import name`` fail exactly
as when the package is absent).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tensortune.database import Database, TuningRecord
from tensortune.errors import MissingDependency

SPEC = "matmul:M=8,N=16,K=8"
INSTALL = 'pip install "tensortune[tune]"'

_SITECUSTOMIZE = """\
import os, sys

for name in os.environ["TT_TEST_MISSING"].split(","):
    sys.modules[name] = None
"""


def _cli_without(missing: str, tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    """The CLI in a process where the modules ``missing`` (comma-separated) are not installed."""
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(_SITECUSTOMIZE)
    path = os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "PYTHONPATH": path, "TT_TEST_MISSING": missing}
    env.pop("TENSORTUNE_DEBUG", None)
    return subprocess.run(
        [sys.executable, "-m", "tensortune.cli", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )


def _assert_one_error_line(
    proc: subprocess.CompletedProcess, needs: str, install: str = INSTALL
) -> None:
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: ") and needs in lines[0] and install in lines[0]


@pytest.mark.parametrize(
    ("strategy", "missing", "needs", "install"),
    [
        # LightGBM is a core dependency: a broken install says to install it, not an extra
        ("model", "lightgbm", "LightGBM", "pip install lightgbm"),
        ("optuna-tpe", "optuna", "Optuna", INSTALL),
        ("optuna-cmaes", "optuna,cmaes", "Optuna", INSTALL),
    ],
)
def test_tune_without_the_tune_extra(
    tmp_path: Path, strategy: str, missing: str, needs: str, install: str
) -> None:
    args = ["tune", SPEC, "--trials", "2", "--strategy", strategy, "--db", str(tmp_path / "t.db")]
    proc = _cli_without(missing, tmp_path, *args)
    _assert_one_error_line(proc, needs, install)


def test_report_without_matplotlib(tmp_path: Path) -> None:
    db = tmp_path / "tuning.db"
    with Database(db) as database:
        database.commit_record(TuningRecord(workload=SPEC, target="t", config={}, seconds=1.0))
    out = tmp_path / "report.html"
    proc = _cli_without("matplotlib", tmp_path, "report", "--db", str(db), "-o", str(out))
    _assert_one_error_line(proc, "matplotlib")
    assert not out.exists()


def test_the_error_is_both_a_tensortune_error_and_an_import_error() -> None:
    """Library callers catching either family (TensorTuneError, ImportError) still catch it."""
    assert issubclass(MissingDependency, ImportError)
