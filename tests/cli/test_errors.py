"""Bad input is one ``error:`` line and exit status 2, never a traceback or a password."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tensortune import cli

from .conftest import SPEC, run_cli


def _garbage(tmp_path: Path) -> str:
    path = tmp_path / "garbage.db"
    path.write_bytes(os.urandom(4096))
    return str(path)


BAD_INPUT = {
    "malformed spec": lambda tmp: ["tune", "matmul:M=8,N=16", "--db", str(tmp / "t.db")],
    "unknown op": lambda tmp: ["best", "matmool:M=8", "--db", str(tmp / "t.db")],
    "unknown strategy": lambda tmp: ["tune", SPEC, "--strategy", "bogus", "--db", f"{tmp}/t.db"],
    "negative trials": lambda tmp: ["tune", SPEC, "--trials", "-4", "--db", str(tmp / "t.db")],
    "non-numeric timeout": lambda tmp: ["tune", SPEC, "--timeout", "soon"],
    "garbage db (tune)": lambda tmp: ["tune", SPEC, "--strategy", "random", "--db", _garbage(tmp)],
    "garbage db (history)": lambda tmp: ["history", "--db", _garbage(tmp)],
    "garbage db (best)": lambda tmp: ["best", SPEC, "--db", _garbage(tmp)],
    "missing db file": lambda tmp: ["history", "--db", str(tmp / "typo.db")],
    "unknown command": lambda tmp: ["frobnicate"],
}


@pytest.mark.parametrize("case", list(BAD_INPUT))
def test_bad_input_is_one_error_line_and_exit_2(case, tmp_path, capsys):
    code = cli.main(BAD_INPUT[case](tmp_path))
    out, err = capsys.readouterr()
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert out == ""


def test_bad_input_in_a_real_process_has_no_traceback(tmp_path):
    for args in (["tune", "matmul:M=8", "--db", str(tmp_path / "t.db")],
                 ["history", "--db", _garbage(tmp_path)]):  # fmt: skip
        proc = run_cli(*args)
        assert proc.returncode == 2
        assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("error: "), proc.stderr


@pytest.mark.parametrize("module", ["tensortune", "tensortune.cli"])
def test_python_dash_m(module):
    proc = subprocess.run(
        [sys.executable, "-m", module, "--version"], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0 and proc.stdout.startswith("tensortune ")


def test_console_script_entry_point_names_main():
    """pyproject's ``tensortune = "tensortune.cli:main"`` still resolves to the CLI."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
    entry = tomllib.loads(pyproject.read_text())["project"]["scripts"]["tensortune"]
    module, _, name = entry.partition(":")
    assert getattr(__import__(module, fromlist=[name]), name) is cli.main


def test_a_server_password_is_never_printed() -> None:
    """psycopg2 may be missing or the server unreachable: either way one line, no password."""
    done = run_cli("history", "--db", "postgresql://tuner:s3cret@127.0.0.1:1/tuning")
    assert done.returncode == 2
    assert done.stderr.startswith("error:") and len(done.stderr.strip().splitlines()) == 1
    assert "s3cret" not in done.stderr + done.stdout and "tuner:***@" in done.stderr
