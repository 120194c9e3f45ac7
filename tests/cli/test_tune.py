"""``tensortune tune``: the --json result, resuming, the summary, --model, interruption."""

from __future__ import annotations

import inspect
import json

import pytest

import tensortune as tt
from tensortune import cli
from tensortune.database import open_database

from .conftest import SPEC, TRIALS, run_cli

TUNE_KEYS = {"workload", "target", "trials", "best_seconds", "gflops", "config", "tuning_seconds"}


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


def _fake_tune(calls: list):
    from tensortune.tuning import TuneResult

    def fake_tune(workload, **kwargs):
        calls.append(kwargs)
        return TuneResult(
            workload=workload.name, target=str(kwargs["target"]), best_config={"x": 1},
            best_seconds=1e-6, gflops=2.0, trials=5, errors=3, tuning_seconds=1.0,
            errors_by_kind={"crash": 1, "timeout": 2},
        )  # fmt: skip

    return fake_tune


def test_tune_summary_lists_failures_by_kind(tmp_path, capsys, monkeypatch):
    calls: list = []
    monkeypatch.setattr("tensortune.tuning.tune", _fake_tune(calls))
    code = cli.main(["tune", SPEC, "--trials", "5", "--db", str(tmp_path / "t.db")])
    out, _ = capsys.readouterr()
    assert code == 0
    assert "failures:  3 (crash 1, timeout 2)" in out
    assert "model" not in calls[0], "no --model: tune() is called as before, without one"


def test_model_flag_is_passed_to_tune(tmp_path, capsys, monkeypatch):
    calls: list = []
    fake = _fake_tune(calls)

    def with_model(workload, model=None, **kwargs):
        return fake(workload, model=model, **kwargs)

    monkeypatch.setattr("tensortune.tuning.tune", with_model)
    args = ["tune", SPEC, "--model", "random", "--db", str(tmp_path / "t.db")]
    assert cli.main(args) == 0, capsys.readouterr().err
    assert calls[0]["model"] == "random"


def test_model_flag_refused_when_tune_takes_no_model(tmp_path, capsys, monkeypatch):
    def old_tune(workload, trials=64, strategy="model", db=None, target=None, timeout=10.0,
                 seed=0, max_seconds=None, early_stop=None, progress=None):  # fmt: skip
        raise AssertionError("never called")

    monkeypatch.setattr("tensortune.tuning.tune", old_tune)
    assert cli.main(["tune", SPEC, "--model", "lgbm", "--db", str(tmp_path / "t.db")]) == 2
    assert "--model" in capsys.readouterr().err


@pytest.mark.skipif(
    "model" not in inspect.signature(tt.tune).parameters,
    reason="tensortune.tune() does not take model= yet (the cost-model registry is not merged)",
)
def test_model_flag_end_to_end(tmp_path):
    """A real run guided by the 'random' cost model, then an unknown model name refused."""
    db = tmp_path / "model.db"
    proc = run_cli(
        "tune", SPEC, "--trials", "3", "--strategy", "model", "--model", "random", "--json",
        "--db", str(db),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1])["trials"] == 3
    bad = run_cli("tune", SPEC, "--trials", "1", "--model", "no-such-model", "--db", str(db))
    assert bad.returncode == 2 and bad.stderr.startswith("error:"), bad.stderr
    assert "no-such-model" in bad.stderr


def test_keyboard_interrupt_exits_130(monkeypatch, tmp_path, capsys):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr("tensortune.tuning.tune", interrupted)
    db = tmp_path / "t.db"
    assert cli.main(["tune", SPEC, "--strategy", "random", "--db", str(db)]) == 130
    assert f"interrupted; measurements so far are saved in {db}" in capsys.readouterr().err
