"""The ``tensortune`` command line, driven the way a user (or a script) drives it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tensortune import cli
from tensortune.database import DB_ENV_VAR, TuningRecord, open_database

SPEC = "matmul:M=8,N=16,K=8"
TRIALS = 4
TUNE_KEYS = {"workload", "target", "trials", "best_seconds", "gflops", "config", "tuning_seconds"}


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``python -m tensortune.cli ARGS`` in a fresh process, as a script would call it."""
    return subprocess.run(
        [sys.executable, "-m", "tensortune.cli", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **(env or {})},
    )


@pytest.fixture(scope="module")
def tuned(tmp_path_factory) -> tuple[Path, dict]:
    """One real tuning run (random search, 4 trials) into the *default* database, which the
    environment points at a temporary file; returns (db path, the --json result)."""
    db = tmp_path_factory.mktemp("cli") / "tuning.db"
    proc = run_cli(
        "tune", SPEC, "--trials", str(TRIALS), "--strategy", "random", "--seed", "3", "--json",
        env={DB_ENV_VAR: str(db)},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    last = proc.stdout.strip().splitlines()[-1]
    return db, json.loads(last)


@pytest.fixture
def use_db(monkeypatch, tuned) -> Path:
    """Point the default database at the tuned one, as for a user with $TENSORTUNE_DB set."""
    monkeypatch.setenv(DB_ENV_VAR, str(tuned[0]))
    return tuned[0]


def test_tune_json_last_line_is_the_result(tuned):
    db, result = tuned
    assert set(result) >= TUNE_KEYS
    assert result["workload"] == SPEC
    assert result["trials"] == TRIALS
    assert result["best_seconds"] > 0 and result["gflops"] > 0
    assert result["gflops"] == pytest.approx(2 * 8 * 16 * 8 / result["best_seconds"] / 1e9)
    assert isinstance(result["config"], dict) and result["config"]
    assert result["tuning_seconds"] > 0
    assert db.exists(), "--db defaults to the default database ($TENSORTUNE_DB)"


def test_tune_rerun_resumes_and_prints_a_summary(use_db, capsys):
    # The budget is already spent, so nothing is measured: only the summary is printed.
    code = cli.main(["tune", SPEC, "--trials", str(TRIALS), "--strategy", "random"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "resuming: 4 measurement(s)" in out
    assert SPEC in out and "GFLOP/s" in out
    assert "failures:  none" in out
    with open_database(use_db) as database:
        assert sum(r.strategy != "confirm" for r in database.records()) == TRIALS


def test_tune_summary_lists_failures_by_kind(tmp_path, capsys, monkeypatch):
    from tensortune.tuning import TuneResult

    def fake_tune(workload, **kwargs):
        return TuneResult(
            workload=workload.name, target=str(kwargs["target"]), best_config={"x": 1},
            best_seconds=1e-6, gflops=2.0, trials=5, errors=3, tuning_seconds=1.0,
            errors_by_kind={"crash": 1, "timeout": 2},
        )  # fmt: skip

    monkeypatch.setattr("tensortune.tuning.tune", fake_tune)
    code = cli.main(["tune", SPEC, "--trials", "5", "--db", str(tmp_path / "t.db")])
    out, _ = capsys.readouterr()
    assert code == 0
    assert "failures:  3 (crash 1, timeout 2)" in out


def test_best(use_db, tuned, capsys):
    assert cli.main(["best", "matmul:K=8, N=16, M=8"]) == 0  # any spelling of the workload
    out, _ = capsys.readouterr()
    assert SPEC in out and "GFLOP/s" in out
    assert cli.main(["best", SPEC, "--db", str(use_db), "--json"]) == 0
    best = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert best["config"] == tuned[1]["config"]
    assert best["seconds"] == pytest.approx(tuned[1]["best_seconds"])
    assert best["gflops"] == pytest.approx(tuned[1]["gflops"])


def test_best_when_nothing_was_tuned(use_db, capsys):
    assert cli.main(["best", "matmul:M=3,N=3,K=3"]) == 1
    err = capsys.readouterr().err
    assert "no successful measurement of matmul:M=3,N=3,K=3" in err
    assert cli.main(["best", "matmul:M=3,N=3,K=3", "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["config"] is None


def test_history_json_lines(use_db, capsys):
    assert cli.main(["history", "--json"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    trials = [line for line in lines if json.loads(line)["strategy"] == "random"]
    assert len(trials) == TRIALS  # the rest re-measure the winners
    assert all(json.loads(line)["strategy"] == "confirm" for line in lines if line not in trials)
    for line in lines:
        rec = json.loads(line)
        assert {"workload", "target", "config", "seconds", "error"} <= set(rec)
        assert rec["workload"] == SPEC
        assert (rec["seconds"] is None) == (rec["error"] is not None)
    assert cli.main(["history", "--json", "--workload", "matmul:M=1,N=1,K=1"]) == 0
    assert capsys.readouterr().out == ""


def test_history_table(use_db, capsys):
    assert cli.main(["history", "--workload", SPEC]) == 0
    out = capsys.readouterr().out
    with open_database(use_db) as database:
        measured = len(database.records())
    assert f"{measured} measurement(s)" in out and "GFLOP/s" in out and "ok" in out


@pytest.fixture
def mixed_db(tmp_path) -> Path:
    """Two workloads, two strategies, failures of several kinds (no measuring needed)."""
    db = tmp_path / "mixed.db"
    rows = [
        ("matmul:M=8,N=16,K=8", "random", "r1", 1, 2e-6, None),
        ("matmul:M=8,N=16,K=8", "random", "r1", 2, None, "crash"),
        ("matmul:M=8,N=16,K=8", "random", "r1", 3, 1e-6, None),
        ("matmul:M=8,N=16,K=8", "grid", "g1", 1, None, "compile"),
        ("matmul:M=8,N=16,K=8", "grid", "g1", 2, 3e-6, None),
        ("softmax:rows=4,cols=8", "annealing", "a1", 1, None, "timeout"),
    ]
    with open_database(db) as database:
        for workload, strategy, run_id, trial, seconds, error in rows:
            database.commit_record(
                TuningRecord(
                    workload=workload, target="avx2-2t", config={"t": trial}, seconds=seconds,
                    error=error, error_msg=error, strategy=strategy, trial=trial, run_id=run_id,
                )
            )  # fmt: skip
    return db


def test_history_json_reports_error_kinds(mixed_db, capsys):
    assert cli.main(["history", "--db", str(mixed_db), "--json"]) == 0
    recs = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["error"] for r in recs] == [None, "crash", None, "compile", None, "timeout"]
    assert [r["seconds"] for r in recs] == [2e-6, None, 1e-6, None, 3e-6, None]


def test_report_writes_html_with_curves(mixed_db, tmp_path, capsys):
    out = tmp_path / "report" / "report.html"
    assert cli.main(["report", "--db", str(mixed_db), "-o", str(out)]) == 0
    assert "wrote" in capsys.readouterr().out
    page = out.read_text()
    assert page.startswith("<!DOCTYPE html>")
    assert page.count("<img") == 2, "one chart per workload"
    assert 'src="data:image/png;base64,' in page
    assert "matmul:M=8,N=16,K=8" in page and "softmax:rows=4,cols=8" in page
    assert "<table>" in page and "best config" in page
    assert "crash: 1" in page and "compile: 1" in page


def test_report_from_a_real_tuning_run(use_db, tmp_path):
    out = tmp_path / "report.html"
    assert cli.main(["report", "-o", str(out)]) == 0
    assert "<img" in out.read_text()


def test_compile(use_db, capsys):
    assert cli.main(["compile", SPEC, "--emit-c"]) == 0
    source = capsys.readouterr().out
    assert "int matmul(" in source and "matmul_packed(void** args)" in source
    assert cli.main(["compile", SPEC]) == 0
    assert "tuned schedule" in capsys.readouterr().out


def test_compile_untuned_workload_uses_the_default_schedule(tmp_path, capsys):
    db = tmp_path / "absent.db"
    assert cli.main(["compile", "matmul:M=4,N=8,K=4", "--db", str(db)]) == 0
    assert "default schedule" in capsys.readouterr().out
    assert not db.exists(), "compile does not create a database just to find nothing in it"


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


def test_keyboard_interrupt_exits_130(monkeypatch, tmp_path, capsys):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr("tensortune.tuning.tune", interrupted)
    db = tmp_path / "t.db"
    assert cli.main(["tune", SPEC, "--strategy", "random", "--db", str(db)]) == 130
    assert f"interrupted; measurements so far are saved in {db}" in capsys.readouterr().err


def test_python_dash_m_tensortune():
    proc = subprocess.run(
        [sys.executable, "-m", "tensortune", "--version"], capture_output=True, text=True
    )
    assert proc.returncode == 0 and proc.stdout.startswith("tensortune ")


def test_a_server_password_is_never_printed() -> None:
    """psycopg2 may be missing or the server unreachable: either way one line, no password."""
    done = run_cli("history", "--db", "postgresql://tuner:s3cret@127.0.0.1:1/tuning")
    assert done.returncode == 2
    assert done.stderr.startswith("error:") and len(done.stderr.strip().splitlines()) == 1
    assert "s3cret" not in done.stderr + done.stdout and "tuner:***@" in done.stderr


def test_best_compile_and_report_use_one_rule(tmp_path, capsys):
    """A config timed once at a lucky moment (fastest single time) loses to the config whose
    median ratio to the reference is best, in every command alike."""
    from tensortune.space.registry import design_space
    from tensortune.workload import workload

    spec = "matmul:M=32,N=32,K=32"
    target = cli._target(None)
    ds = design_space(workload(spec), target)
    steady = ds.default
    knob = next(k for k in ds.space.knobs if len(k.choices) > 1)
    lucky = next(
        {**steady, knob.name: choice}
        for choice in knob.choices
        if ds.space.is_valid({**steady, knob.name: choice}) and choice != steady[knob.name]
    )
    db = tmp_path / "rule.db"
    rows = [(steady, 1.0, "random")] * 3 + [
        (lucky, 0.5, "random"),
        (lucky, 1.2, "confirm"),
        (lucky, 1.3, "confirm"),
    ]
    with open_database(db) as database:
        for trial, (config, ratio, strategy) in enumerate(rows):
            database.commit_record(
                TuningRecord(
                    workload=workload(spec).name,
                    target=str(target),
                    config=config,
                    seconds=ratio * 1e-3,
                    reference_seconds=1e-3,
                    ratio=ratio,
                    strategy=strategy,
                    trial=trial,
                )
            )
    assert cli.main(["best", spec, "--db", str(db), "--json"]) == 0
    best = json.loads(capsys.readouterr().out)
    assert best["config"] == steady and best["ratio_to_default"] == 1.0
    assert cli.main(["compile", spec, "--db", str(db)]) == 0
    assert "tuned schedule (1 ms," in capsys.readouterr().out  # not the lucky 500 us
    out = tmp_path / "report.html"
    assert cli.main(["report", "--db", str(db), "-o", str(out)]) == 0
    page = out.read_text()
    assert "<td class=num>1 ms</td>" in page and "500" not in page  # not the lucky 0.5 ms
    assert "<td class=num>4</td>" in page  # trials: the two confirm re-measurements are not
