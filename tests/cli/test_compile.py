"""``tensortune compile``: the kernel from the database, its C (--emit-c) and IR (--emit-ir)."""

from __future__ import annotations

import json
import re

import pytest

from tensortune import cli
from tensortune.database import TuningRecord, open_database

from .conftest import SPEC, run_cli


def test_compile(use_db, capsys):
    assert cli.main(["compile", SPEC, "--emit-c"]) == 0
    source = capsys.readouterr().out
    assert "int matmul(" in source and "matmul_packed(void** args)" in source
    assert cli.main(["compile", SPEC]) == 0
    assert "tuned schedule" in capsys.readouterr().out


@pytest.fixture
def no_prior(monkeypatch):
    """No pretrained cost model: an untuned workload compiles with the template default."""
    from tensortune.tuning import zero_shot

    monkeypatch.setattr(zero_shot, "pretrained_model", lambda: None)


@pytest.fixture
def random_prior(monkeypatch):
    """A stand-in pretrained model (random scores): what the CLI shows, not how good it is."""
    from tensortune.cost_model import get_cost_model
    from tensortune.tuning import zero_shot

    monkeypatch.setattr(zero_shot, "pretrained_model", lambda: get_cost_model("random"))


def test_compile_untuned_workload_uses_the_default_schedule(no_prior, tmp_path, capsys):
    db = tmp_path / "absent.db"
    assert cli.main(["compile", "matmul:M=4,N=8,K=4", "--db", str(db)]) == 0
    assert "default schedule" in capsys.readouterr().out
    assert not db.exists(), "compile does not create a database just to find nothing in it"


def test_emit_ir_prints_the_lowered_program_of_the_compiled_schedule(tmp_path):
    """The IR printed is the printer's output for the PrimFunc lower() gives the schedule that
    compile builds, under the kernel's name, and its loops are the loops of the C. The
    workload was never tuned: compile uses the zero-shot config recorded for it."""
    import numpy as np

    from tensortune.database import Prediction
    from tensortune.ir.printer import format_stmt
    from tensortune.lower import lower
    from tensortune.space.registry import design_space
    from tensortune.target import Target
    from tensortune.workload import workload

    spec, db = "matmul:M=64,N=64,K=64", str(tmp_path / "predicted.db")
    target = Target.detect(num_threads=2)
    ds = design_space(workload(spec), target)
    config = next(c for c in ds.space.sample(np.random.default_rng(1), 16) if c != ds.default)
    with open_database(db) as database:
        database.record_prediction(
            Prediction(
                workload=ds.workload.name, target=str(target), config=config, source="sample",
                model="pretrained LGBMCostModel", candidates=16, choice_seconds=0.5,
            )
        )  # fmt: skip
    proc = run_cli("compile", spec, "--emit-ir", "--threads", "2", "--db", db)
    assert proc.returncode == 0, proc.stderr
    expected = format_stmt(lower(ds.schedule(config), "matmul", 2))
    assert proc.stdout == expected + "\n"
    assert proc.stdout.startswith("def matmul(")
    c = run_cli("compile", spec, "--emit-c", "--threads", "2", "--db", db)
    assert c.returncode == 0, c.stderr
    loops = re.findall(r"^\s*for (\w+) in range", proc.stdout, re.MULTILINE)
    assert loops, proc.stdout
    for var in loops:
        assert re.search(rf"\b{var}\b", c.stdout), f"IR loop {var} is not in the C"


def test_emit_c_and_emit_ir_exclude_each_other(capsys):
    assert cli.main(["compile", SPEC, "--emit-c", "--emit-ir"]) == 2
    assert "not allowed with" in capsys.readouterr().err


def test_best_compile_and_report_use_one_rule(tmp_path, capsys):
    """A config timed once at a lucky moment (fastest single time) loses to the config whose
    median ratio to the reference is best, in every command alike."""
    from tensortune.cli.common import detect_target
    from tensortune.space.registry import design_space
    from tensortune.workload import workload

    spec = "matmul:M=32,N=32,K=32"
    target = detect_target(None)
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
                    workload=workload(spec).name, target=str(target), config=config,
                    seconds=ratio * 1e-3, reference_seconds=1e-3, ratio=ratio,
                    strategy=strategy, trial=trial,
                )
            )  # fmt: skip
    assert cli.main(["best", spec, "--db", str(db), "--json"]) == 0
    best = json.loads(capsys.readouterr().out)
    assert best["config"] == steady and best["ratio_to_default"] == 1.0
    assert cli.main(["compile", spec, "--db", str(db)]) == 0
    assert "tuned schedule (1 ms," in capsys.readouterr().out  # not the lucky 500 us
    out = tmp_path / "report.html"
    assert cli.main(["report", "--db", str(db), "-o", str(out), "--no-peers"]) == 0
    page = out.read_text()
    assert 'data-label="best time" class=num>1 ms</td>' in page  # not the lucky 0.5 ms
    assert "500 us" not in page
    assert 'data-label="trials" class=num>4</td>' in page  # the two confirm re-measurements


def test_compile_of_an_untuned_workload_is_a_recorded_zero_shot_choice(
    random_prior, tmp_path, capsys
):
    spec, db = "matmul:M=8,N=24,K=8", str(tmp_path / "zero.db")
    open_database(db).close()
    assert cli.main(["compile", spec, "--db", db]) == 0
    out = capsys.readouterr().out
    assert "zero-shot schedule (predicted (zero-shot), not measured; chosen by the" in out
    assert cli.main(["best", spec, "--db", db]) == 0
    out = capsys.readouterr().out
    assert "predicted (zero-shot), not measured" in out and "GFLOP/s" not in out
    assert cli.main(["best", spec, "--db", db, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["kind"] == "predicted" and shown["seconds"] is None and shown["config"]
    assert cli.main(["history", "--workload", spec, "--db", db]) == 0
    assert "no records" in capsys.readouterr().out, "a prediction is not a measurement"
