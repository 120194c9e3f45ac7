"""Issue 11, item 2: a broken machine is not a bad config.

No compiler, a compiler that builds nothing, an unwritable or full kernel cache, a worker that
cannot start: `tune` stops with one EnvironmentFailure (`error:` and exit 2 from the CLI),
records nothing against the configs, and a rerun in a working environment measures them.
"""

from __future__ import annotations

import dataclasses
import errno
import os
import subprocess
import sys
from pathlib import Path

import pytest

import tensortune as tt
from tensortune.build import compiler
from tensortune.build.compiler import CompileError, compile_library
from tensortune.database import open_database
from tensortune.errors import EnvironmentFailure
from tensortune.measure.runner import Runner, RunRequest
from tensortune.target import Target
from tensortune.tuning.loop import CONFIRM
from tests.measure import c_kernels

SPEC = "matmul:M=8,N=8,K=8"
TRIALS = 3


def records(db: Path) -> list:
    with open_database(db) as database:
        return database.records()


def assert_measured(db: Path) -> None:
    """Every trial was measured: no record blames a config for the broken environment."""
    measured = records(db)
    assert len({r.config_key for r in measured if r.strategy != CONFIRM}) == TRIALS
    assert "compile" not in {r.error for r in measured}


def assert_rerun_measures_everything(db: Path, target: Target) -> None:
    result = tt.tune(SPEC, trials=TRIALS, strategy="grid", db=db, target=target, timeout=60)
    assert result.trials == TRIALS
    assert_measured(db)


@pytest.fixture(scope="module")
def target() -> Target:
    """One thread: an OpenMP team on a loaded shared machine times tiny kernels very slowly."""
    return Target.detect(num_threads=1)


@pytest.fixture
def fresh_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cache = tmp_path / "kernels"
    monkeypatch.setenv("TENSORTUNE_CACHE_DIR", str(cache))
    return cache


def fake_cc(tmp_path: Path, message: str) -> str:
    """A compiler that answers --version and fails every build with `message`."""
    script = tmp_path / "fake-cc"
    script.write_text(
        '#!/bin/sh\nif [ "$1" = --version ]; then echo fake 1.0; exit 0; fi\n'
        f'echo "{message}" >&2\nexit 1\n'
    )
    script.chmod(0o755)
    return str(script)


@pytest.mark.parametrize(
    "broken_cc",
    ["/bin/false", "no space", "missing"],
    ids=["bin-false", "compiler-fails-trivial-program", "missing-compiler"],
)
def test_broken_compiler_stops_the_tune_and_records_nothing(
    broken_cc: str, target: Target, tmp_path: Path, fresh_cache: Path
):
    cc = {
        "no space": fake_cc(tmp_path, "as: cannot write a.o: No space left on device"),
        "missing": str(tmp_path / "no-such-cc"),
    }.get(broken_cc, broken_cc)
    db = tmp_path / "t.db"
    with pytest.raises(EnvironmentFailure, match="C compiler"):
        tt.tune(
            SPEC, trials=TRIALS, strategy="grid", db=db, target=dataclasses.replace(target, cc=cc)
        )
    assert records(db) == []
    assert_rerun_measures_everything(db, target)


def test_unwritable_cache_stops_the_tune(target: Target, tmp_path: Path, monkeypatch):
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    monkeypatch.setenv("TENSORTUNE_CACHE_DIR", str(blocker / "kernels"))
    db = tmp_path / "t.db"
    with pytest.raises(EnvironmentFailure, match="kernel cache"):
        tt.tune(SPEC, trials=TRIALS, strategy="grid", db=db, target=target)
    assert records(db) == []
    monkeypatch.setenv("TENSORTUNE_CACHE_DIR", str(tmp_path / "kernels"))
    assert_rerun_measures_everything(db, target)


def test_full_disk_stops_the_tune(target: Target, tmp_path: Path, fresh_cache: Path, monkeypatch):
    def no_space(path: Path, data: object) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

    monkeypatch.setattr(compiler, "_write_atomically", no_space)
    db = tmp_path / "t.db"
    with pytest.raises(EnvironmentFailure, match="No space left on device"):
        tt.tune(SPEC, trials=TRIALS, strategy="grid", db=db, target=target)
    assert records(db) == []
    monkeypatch.undo()
    monkeypatch.setenv("TENSORTUNE_CACHE_DIR", str(fresh_cache))
    assert_rerun_measures_everything(db, target)


def test_a_bad_program_is_still_a_compile_error(target: Target, fresh_cache: Path):
    with pytest.raises(CompileError):
        compile_library("int broken(void) { return }\n", target)


def test_a_worker_that_cannot_start_is_an_environment_failure(target: Target):
    a, b = c_kernels.inputs()
    library = compile_library(c_kernels.GOOD, target)
    request = RunRequest(library, "vadd", c_kernels.ARGS, (a, b), a + b)
    with (
        Runner(target=target, startup_timeout=1e-6) as runner,
        pytest.raises(EnvironmentFailure, match="worker"),
    ):
        runner.run([request])


def test_cli_reports_one_error_line_with_exit_2(tmp_path: Path, fresh_cache: Path):
    db = tmp_path / "cli.db"
    command = [sys.executable, "-m", "tensortune", "tune", SPEC, "--trials", str(TRIALS)]
    command += ["--strategy", "grid", "--db", str(db), "--timeout", "60", "--threads", "1"]
    env = {**os.environ, "CC": "/bin/false"}
    env.pop("TENSORTUNE_DEBUG", None)
    proc = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "/bin/false" in lines[0]
    assert records(db) == []
    del env["CC"]
    proc = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert_measured(db)
