"""``tensortune best`` and ``tensortune history``: read-only views of the database."""

from __future__ import annotations

import json

import pytest

from tensortune import cli
from tensortune.cli.common import DEFAULT_FINDER, found_by_phrase
from tensortune.database import TuningRecord, open_database

from .conftest import SPEC, TRIALS


def test_best(use_db, tuned, capsys):
    assert cli.main(["best", "matmul:K=8, N=16, M=8"]) == 0  # any spelling of the workload
    out, _ = capsys.readouterr()
    assert SPEC in out and "GFLOP/s" in out
    assert cli.main(["best", SPEC, "--db", str(use_db), "--json"]) == 0
    best = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert best["config"] == tuned[1]["config"]
    assert best["seconds"] == pytest.approx(tuned[1]["best_seconds"])
    assert best["gflops"] == pytest.approx(tuned[1]["gflops"])
    # a winner is credited to the search that found it, or to the template default (a finalist
    # of every run; which of the two wins a 4-trial run depends on the machine), never to the
    # re-measurement itself
    assert best["strategy"] in ("random", DEFAULT_FINDER)
    assert f"found by {found_by_phrase(best['strategy'])}" in out


def test_best_credits_the_first_measurement_not_the_confirmation(tmp_path, capsys):
    from tensortune.cli.common import detect_target
    from tensortune.space.registry import design_space
    from tensortune.workload import workload

    wl = workload("matmul:M=16,N=16,K=16")
    target = detect_target(None)
    config = design_space(wl, target).default
    db = tmp_path / "found.db"
    with open_database(db) as database:
        for trial, (strategy, ratio) in enumerate([("annealing", 0.9), ("confirm", 0.8)] * 2):
            database.commit_record(
                TuningRecord(
                    workload=wl.name, target=str(target), config=config, seconds=ratio * 1e-5,
                    reference_seconds=1e-5, ratio=ratio, strategy=strategy, trial=trial,
                )
            )  # fmt: skip
    assert cli.main(["best", wl.name, "--db", str(db), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["strategy"] == "annealing"


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


def test_history_json_reports_error_kinds(mixed_db, capsys):
    assert cli.main(["history", "--db", str(mixed_db), "--json"]) == 0
    recs = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["error"] for r in recs] == [None, "crash", None, "compile", None, "timeout"]
    assert [r["seconds"] for r in recs] == [2e-6, None, 1e-6, None, 3e-6, None]


def test_best_marks_a_prediction_and_prefers_any_measurement(tmp_path, capsys):
    from tensortune.cli.common import detect_target
    from tensortune.database import Prediction
    from tensortune.space.registry import design_space
    from tensortune.workload import workload

    wl = workload("matmul:M=16,N=16,K=16")
    target = detect_target(None)
    ds = design_space(wl, target)
    db = tmp_path / "predicted.db"
    with open_database(db) as database:
        database.record_prediction(
            Prediction(
                workload=wl.name, target=str(target), config=ds.default, source="default",
                model="pretrained LGBMCostModel", candidates=9, choice_seconds=0.5,
            )
        )  # fmt: skip
    assert cli.main(["best", wl.name, "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert "predicted (zero-shot), not measured" in out and "9 candidate(s)" in out
    with open_database(db) as database:
        database.commit_record(
            TuningRecord(
                workload=wl.name, target=str(target), config=ds.default, seconds=1e-5,
                strategy="random",
            )
        )  # fmt: skip
    assert cli.main(["best", wl.name, "--db", str(db), "--json"]) == 0
    best = json.loads(capsys.readouterr().out)
    assert best["kind"] == "measured" and best["seconds"] == 1e-5
