"""The tuning loop against hostile candidates, a killed tuner, and bad arguments.

(a) candidates that segfault, hang, compute garbage or do not compile are recorded with the
    right error kind while the good ones are measured and win;
(b) a tuner killed with SIGKILL keeps every committed record and a rerun resumes without
    re-measuring anything;
(c) bad arguments fail early with a clear error.
"""

from __future__ import annotations

import contextlib
import json
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import tensortune as tt
import tensortune.tuning.candidates as candidates
import tensortune.tuning.loop as tuner
from tensortune.database import open_database
from tensortune.errors import SpecError, StrategyError, TensorTuneError
from tensortune.space import Knob, SearchSpace
from tensortune.space.template import DesignSpace
from tensortune.tuning.loop import CONFIRM

SPEC = "matmul:M=8,N=16,K=8"
SPEC_16 = "matmul:M=16,N=16,K=16"
M, N, K = 8, 16, 8

# Hand-written kernels following the generated-kernel ABI: the kernel function (inputs, then
# the output) and the `<name>_packed(void** args)` entry point the timer and worker call.
_PACKED = """
int {name}_packed(void** args) {{
  return {name}((const float*)args[0], (const float*)args[1], (float*)args[2]);
}}
"""
_SIGNATURE = "int {name}(const float* restrict A, const float* restrict B, float* restrict C)"
BAD_SOURCES = {
    "crash": _SIGNATURE
    + """ {{
  volatile float* nowhere = (volatile float*)0;
  *nowhere = A[0];  /* SIGSEGV */
  return 0;
}}
"""
    + _PACKED,
    "hang": _SIGNATURE
    + """ {{
  volatile int spin = 1;
  while (spin) {{ }}
  return 0;
}}
"""
    + _PACKED,
    "wrong": _SIGNATURE
    + """ {{
  for (int i = 0; i < {m}; ++i)
    for (int j = 0; j < {n}; ++j) {{
      float acc = 0.0f;
      for (int k = 0; k < {k}; ++k) acc += A[i * {k} + k] * B[k * {n} + j];
      C[i * {n} + j] = acc + 1.0f;  /* off by one everywhere */
    }}
  return 0;
}}
"""
    + _PACKED,
    "syntax": _SIGNATURE
    + """ {{
  return 0   /* missing semicolon */
}}
"""
    + _PACKED,
}
EXPECTED_ERROR = {
    "good": None,
    "good_o2": None,
    "crash": "crash",
    "hang": "timeout",
    "wrong": "wrong_result",
    "syntax": "compile",
}


@pytest.fixture
def hostile_space(monkeypatch):
    """Make the tuner see a one-knob space whose bad choices compile to hand-written C."""
    real_design_space, real_build_source = tuner.design_space, candidates.build_source
    kind_of: dict[int, str] = {}
    alive: list = []  # keeps schedules alive so their id() stays unique

    def fake_design_space(wl, target):
        real = real_design_space(wl, target)

        def build(config):
            kind = config["kind"]
            opt = "O2" if kind == "good_o2" else "O3"
            sch = real.schedule({**real.default, "opt_level": opt})
            kind_of[id(sch)] = kind
            alive.append(sch)
            return sch

        space = SearchSpace([Knob("kind", tuple(EXPECTED_ERROR))])
        return DesignSpace(wl, target, space, build, {"kind": "good"})

    def fake_build_source(sch, name, target):
        source, func = real_build_source(sch, name, target)
        kind = kind_of.get(id(sch), "good")
        if kind in BAD_SOURCES:
            source = BAD_SOURCES[kind].format(name=func.name, m=M, n=N, k=K)
        return source, func

    monkeypatch.setattr(tuner, "design_space", fake_design_space)
    monkeypatch.setattr(candidates, "build_source", fake_build_source)


def test_hostile_candidates_are_recorded_by_kind(hostile_space, tmp_path):
    db = tmp_path / "hostile.db"
    states = []
    start = time.perf_counter()
    result = tt.tune(
        SPEC, trials=6, strategy="grid", db=db, timeout=2.0, seed=0, progress=states.append
    )
    assert time.perf_counter() - start < 60

    with open_database(db) as database:
        records = database.records()
    confirmations = [r for r in records if r.strategy == CONFIRM]
    records = [r for r in records if r.strategy != CONFIRM]
    by_kind = {r.config["kind"]: r for r in records}
    assert sorted(by_kind) == sorted(EXPECTED_ERROR), "every candidate is recorded once"
    for kind, expected in EXPECTED_ERROR.items():
        rec = by_kind[kind]
        assert rec.error == expected, f"{kind}: {rec.error} ({rec.error_msg})"
        if expected is None:
            assert rec.seconds is not None and rec.seconds > 0
        else:
            assert rec.seconds is None and rec.error_msg
    assert "SIGSEGV" in by_kind["crash"].error_msg
    assert "2 s" in by_kind["hang"].error_msg
    assert "expected" in by_kind["syntax"].error_msg  # the compiler's own diagnostic

    assert result.trials == 6
    assert result.errors == 4
    assert result.errors_by_kind == {"crash": 1, "timeout": 1, "wrong_result": 1, "compile": 1}
    assert result.best_config["kind"] in ("good", "good_o2")
    # the two that ran were each re-measured twice, timed beside the default ("good"); the
    # winner is the config with the lowest median ratio to it
    assert sorted(r.config["kind"] for r in confirmations) == ["good", "good", "good_o2", "good_o2"]
    medians = {
        kind: sorted(
            (r for r in [by_kind[kind], *confirmations] if r.config["kind"] == kind),
            key=lambda r: r.ratio,
        )[1]
        for kind in ("good", "good_o2")
    }
    winner = min(medians.values(), key=lambda r: r.ratio)
    assert (result.best_seconds, result.ratio_to_default) == (winner.seconds, winner.ratio)
    assert result.gflops == pytest.approx(2 * M * N * K / result.best_seconds / 1e9)
    assert states and states[-1].trials_done == 6 and states[-1].errors == 4

    # A rerun with the same budget measures nothing new (the winners are confirmed already)
    # and reports the same totals.
    again = tt.tune(SPEC, trials=6, strategy="grid", db=db, timeout=2.0, seed=0)
    assert (again.trials, again.errors) == (6, 4)
    assert again.errors_by_kind == result.errors_by_kind
    assert again.best_config == result.best_config
    with open_database(db) as database:
        assert len(database.records()) == 6 + 4


def _count_records(db: Path) -> int:
    """Records committed so far, read without going through (or locking like) tensortune.

    The connection is closed at once: a sqlite3 connection left to the garbage collector stays
    open (it is in a reference cycle), and an open one keeps this process's view of the WAL
    index, so a commit the killed tuner wrote but had not published stays unseen by the next
    read here and turns up later (recovered by the first connection to open the file anew)."""
    if not db.exists():
        return 0
    try:
        with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)) as conn:
            return conn.execute("SELECT COUNT(*) FROM records").fetchone()[0]
    except sqlite3.OperationalError:  # the table is not created yet
        return 0


@pytest.mark.slow
def test_sigkill_keeps_committed_records_and_rerun_resumes(tmp_path):
    db = tmp_path / "killed.db"
    trials = 40
    code = textwrap.dedent(
        f"""
        import tensortune as tt
        r = tt.tune({SPEC_16!r}, trials={trials}, strategy="random", db={str(db)!r}, seed=1)
        print(r.trials)
        """
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        deadline = time.monotonic() + 120
        while _count_records(db) < 3:
            assert proc.poll() is None, proc.communicate()[1].decode()[-2000:]
            assert time.monotonic() < deadline, "no records committed within 120 s"
            time.sleep(0.1)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == -signal.SIGKILL

    with open_database(db) as database:
        survived = database.records()
    assert 3 <= len(survived) < trials, "killed midway, with the committed records intact"
    assert len({r.run_id for r in survived}) == 1

    result = tt.tune(SPEC_16, trials=trials, strategy="random", db=db, seed=1)
    assert result.trials == trials

    with open_database(db) as database:
        after = [r for r in database.records() if r.strategy != CONFIRM]
    assert len(after) == trials
    keys = [r.config_key for r in after]
    assert len(set(keys)) == len(keys), "a rerun never re-measures a recorded config"
    # Every record committed before the kill is still there, unchanged.
    assert [r.to_json() for r in after[: len(survived)]] == [r.to_json() for r in survived]
    rerun_ids = {r.run_id for r in after[len(survived) :]}
    assert len(rerun_ids) == 1 and rerun_ids.isdisjoint({survived[0].run_id}), [
        (r.run_id, r.trial, r.strategy) for r in after
    ]
    assert [r.trial for r in after[len(survived) :]] == list(range(len(survived) + 1, trials + 1))


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"workload": SPEC, "trials": -1}, TensorTuneError, "trials must be a non-negative"),
        ({"workload": SPEC, "trials": 2.5}, TensorTuneError, "trials must be a non-negative"),
        ({"workload": SPEC, "strategy": "bogus"}, StrategyError, "unknown strategy 'bogus'"),
        ({"workload": "matmul:M=8,N=16"}, SpecError, "missing K"),
        ({"workload": "nonsense"}, SpecError, "unknown op"),
        ({"workload": SPEC, "timeout": 0}, TensorTuneError, "timeout must be positive"),
        ({"workload": SPEC, "max_seconds": 0}, TensorTuneError, "max_seconds must be > 0"),
        ({"workload": SPEC, "early_stop": 0}, TensorTuneError, "early_stop must be >= 1"),
        ({"workload": SPEC, "model": "random"}, StrategyError, "'random' uses no cost model"),
        (
            {"workload": SPEC, "strategy": "model", "model": "nope"},
            StrategyError,
            "unknown cost model 'nope': choose one of lgbm",
        ),
    ],
)
def test_bad_arguments_raise_clear_errors(tmp_path, kwargs, error, match):
    db = tmp_path / "never.db"
    with pytest.raises(error, match=match):
        tt.tune(**{"trials": 2, "strategy": "random", "db": db, **kwargs})
    assert not db.exists(), "a rejected tune does not touch the database"


def test_tune_result_is_json_serialisable(tmp_path):
    """Zero trials measures nothing but still answers (e.g. `--trials 0` to query)."""
    result = tt.tune(SPEC, trials=0, strategy="random", db=tmp_path / "t.db")
    data = json.loads(json.dumps(result.to_dict()))
    assert data["trials"] == 0 and data["best_config"] is None and data["errors_by_kind"] == {}
    assert data["stop_reason"] == "trial budget reached (0/0 trials)"


def test_tt_tune_stays_callable_after_the_tuning_modules_are_imported(tmp_path):
    """``tt.tune`` is a function whatever submodules were imported before."""
    import tensortune.tuning.loop  # noqa: F401 (the import is the point)

    assert callable(tt.tune)
    result = tt.tune(SPEC, trials=0, strategy="random", db=tmp_path / "t.db")
    assert result.workload == SPEC and result.trials == 0


def test_candidates_are_timed_beside_the_default_which_is_always_a_finalist(tmp_path, target):
    spec = "matmul:M=32,N=48,K=32"
    db = tmp_path / "paired.db"
    result = tt.tune(spec, trials=4, strategy="random", db=db, seed=3, target=target)
    default = tuner.design_space(tt.workload(spec), target).default
    with open_database(db) as database:
        records = [r for r in database.records() if r.ok]
        best = database.best(result.workload, result.target)
    assert records and all(r.ratio is not None and r.reference_seconds for r in records)
    finals = [r for r in records if r.strategy == CONFIRM]
    assert any(r.config == default for r in finals), "the default is re-timed as a finalist"
    assert sum(r.config == default for r in records) >= 3
    default_ratios = sorted(r.ratio for r in records if r.config == default)
    assert best is not None and best.ratio <= default_ratios[len(default_ratios) // 2]
    assert result.ratio_to_default == best.ratio
    assert result.best_seconds == best.seconds
    # the interval spans every re-measurement of the winner, not only the last one's
    remeasured = [r.ratio for r in finals if r.config == best.config]
    assert result.ratio_interval is not None and remeasured
    low, high = result.ratio_interval
    assert low <= min(remeasured) and max(remeasured) <= high


def test_leaders_are_re_measured_during_the_search_not_only_at_its_end(tmp_path, target):
    """A config's speed relative to the default moves with the host's state for tens of
    seconds; re-measurements taken after each batch spread a leader's over the run."""
    spec = "matmul:M=32,N=48,K=32"
    db = tmp_path / "rolling.db"
    result = tt.tune(spec, trials=12, strategy="random", db=db, seed=3, batch_size=4, target=target)
    with open_database(db) as database:
        records = database.records()
    during = [r for r in records if r.strategy == CONFIRM and r.trial < result.trials]
    assert during, "some re-measurement was taken before the last batch"
    trials = {r.config_key: r.trial for r in records if r.strategy != CONFIRM}
    # never the batch's own configs: a just-measured config waits for the next batch
    assert all(r.trial > trials[r.config_key] for r in during if r.config_key in trials)


def test_help_documents_every_argument_the_result_and_the_errors() -> None:
    import inspect

    doc = inspect.getdoc(tt.tune) or ""
    for name in inspect.signature(tt.tune).parameters:
        assert f"    {name}: " in doc, f"tune's docstring does not document '{name}'"
    for field in tt.tuning.TuneResult.__dataclass_fields__:
        assert f"``{field}``" in doc, f"tune's docstring does not name TuneResult.{field}"
    assert "Raises:" in doc and "StrategyError" in doc and "SpecError" in doc


def test_a_time_budget_shorter_than_one_measurement_starts_none(tmp_path, target):
    """The cap is kept, not merely checked: building and checking the reference shows what a
    measurement costs, and a budget that cannot hold one measures nothing (before, a 4 s share
    of a model's budget ran 52 s)."""
    result = tt.tune(
        SPEC, trials=8, strategy="random", db=tmp_path / "t.db", max_seconds=0.01, target=target
    )
    assert result.trials == 0
    assert result.stop_reason is not None and "time budget" in result.stop_reason
    with open_database(tmp_path / "t.db") as database:
        assert database.records() == [], "no final re-measurement past the budget either"
