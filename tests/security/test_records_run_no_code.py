"""A tuning record is data: it never runs code, and one bad record never breaks compile or tune
(issue 11, items 1 and 3).

The records are written as an attacker would write them, as JSON Lines imported into a fresh
database: one whose trace passes ``-wrapper`` to gcc (which then runs a shell command), one whose
flag closes the comment at the top of the generated C and defines a constructor that runs a
command when the library is loaded. Stale and foreign records (another version, unknown knobs,
a trace that does not replay) make ``compile`` fall back to the next valid record, with a warning
naming the skipped one, and ``tune`` ignore them.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import re
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import tensortune as tt
from tensortune.codegen import generate_c
from tensortune.database import Database, TuningRecord
from tensortune.errors import DatabaseError, ScheduleError
from tensortune.lower import lower
from tensortune.schedule import Schedule
from tensortune.space.registry import design_space
from tensortune.space.template import DesignSpace
from tensortune.target import Target

SPEC = "matmul:M=8,N=16,K=8"
SKIPPED = "skipped tuning record"
PACKAGE = Path(tt.__file__).parent
BOGUS_SECONDS = 1e-9  # a forged record claims to be the fastest, so it is tried first


# -- records as an attacker writes them ------------------------------------------------------------
def line(target: Target, config: dict, trace: list, seconds: float, **fields) -> str:
    """One JSON Lines record, written by hand (no tensortune code involved)."""
    record = {"workload": SPEC, "target": str(target), "config": config, "trace": trace}
    record |= {"seconds": seconds, "spread": [seconds], "version": tt.__version__, **fields}
    return json.dumps(record)


def with_flags(trace: list, flags: list[str]) -> list:
    """``trace`` plus the step ``annotate("extra_cflags", flags)``."""
    return [*trace, {"primitive": "annotate", "args": {"key": "extra_cflags", "value": flags}}]


def wrapper_flags(pwned: Path) -> list[str]:
    """gcc runs every tool through the ``-wrapper`` command: here a shell that touches a file."""
    return ["-wrapper", f'/bin/sh,-c,touch {pwned}; exec "$0" "$@"']


def comment_escape_flags(pwned: Path) -> list[str]:
    """A harmless gcc flag whose text ends the header comment and defines a constructor."""
    code = (
        "__attribute__((constructor)) static void tt_pwned(void) "
        f'{{ extern int system(const char*); system("touch {pwned}"); }}'
    )
    return [f"-frandom-seed=*/ {code} /*"]


PAYLOADS = {"wrapper": wrapper_flags, "comment_escape": comment_escape_flags}


def import_db(tmp_path: Path, lines: list[str]) -> Path:
    """A fresh SQLite database holding the records of a JSON Lines file."""
    jsonl, db = tmp_path / "shared.jsonl", tmp_path / "tuning.db"
    jsonl.write_text("".join(f"{x}\n" for x in lines))
    with Database(db) as database:
        assert database.import_jsonl(jsonl) == len(lines)
    return db


def code_outside_comments(source: str) -> str:
    """What the C compiler sees as code: lines spliced, then every comment removed."""
    spliced = source.replace("??/", "\\").replace("\\\n", "")
    return re.sub(r"/\*.*?\*/|//[^\n]*", " ", spliced, flags=re.S)


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "tensortune.cli", *args],
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture
def ds(target: Target) -> DesignSpace:
    return design_space(tt.workload(SPEC), target)


@pytest.fixture
def other_config(ds: DesignSpace) -> dict:
    """A valid config that is not the default, so its schedule tells which one was compiled."""
    return next(c for c in ds.space.enumerate() if c != ds.default)


def source_of(ds: DesignSpace, config: dict, target: Target) -> str:
    return tt.compile(ds.workload, schedule=ds.schedule(config), target=target).source


def skipped(caught: list[warnings.WarningMessage]) -> list[str]:
    """The messages of the warnings that name a skipped record."""
    return [str(w.message) for w in caught if SKIPPED in str(w.message)]


def check_kernel(kernel: tt.Kernel) -> None:
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((8, 8), np.float32), rng.standard_normal((8, 16), np.float32)
    np.testing.assert_allclose(kernel(a, b), a @ b, rtol=1e-5, atol=1e-5)


# -- item 1: a record runs no code -----------------------------------------------------------------
@pytest.fixture(params=sorted(PAYLOADS))
def hostile_db(request, tmp_path, target, ds, other_config) -> tuple[Path, Path, str]:
    """(database, the file the payload would create, its marker): the hostile record is the
    fastest, with a valid config and the trace that config builds plus the payload's flags;
    a slower honest record follows."""
    pwned = tmp_path / "pwned"
    flags = PAYLOADS[request.param](pwned)
    hostile = with_flags(ds.schedule(ds.default).trace, flags)
    honest = ds.schedule(other_config).trace
    lines = [
        line(target, ds.default, hostile, BOGUS_SECONDS, run_id="attacker"),
        line(target, other_config, honest, 1e-3, run_id="honest"),
    ]
    return import_db(tmp_path, lines), pwned, str(pwned)


def test_tt_compile_runs_no_code_from_a_record(hostile_db, target, ds, other_config):
    db, pwned, marker = hostile_db
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        kernel = tt.compile(SPEC, db=db, target=target)
        check_kernel(kernel)  # the library is loaded: a constructor would have run by now
    assert not pwned.exists(), "the record's payload ran"
    assert marker not in code_outside_comments(kernel.source)
    assert [m for m in skipped(caught) if "'attacker'" in m], "one warning names the record"
    assert kernel.source == source_of(ds, other_config, target), "the next best record wins"


def test_cli_compile_runs_no_code_from_a_record(hostile_db, target, ds, other_config):
    if str(target) != str(Target.detect(num_threads=2)):
        pytest.skip("the CLI compiles for the host's ISA; the records are for the test target")
    db, pwned, marker = hostile_db
    proc = run_cli("compile", SPEC, "--db", str(db), "--threads", "2", "--emit-c")
    assert not pwned.exists(), "the record's payload ran"
    assert marker not in code_outside_comments(proc.stdout)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    assert SKIPPED in proc.stderr and "'attacker'" in proc.stderr
    assert proc.stdout.strip() == source_of(ds, other_config, target).strip()


def test_compile_falls_back_to_the_default_when_no_record_validates(
    tmp_path, target, ds, other_config, monkeypatch
):
    # no zero-shot choice either (it would pick by model, not by record)
    monkeypatch.setattr("tensortune.tuning.zero_shot.pretrained_model", lambda: None)
    pwned = tmp_path / "pwned"
    lines = [
        line(target, config, with_flags(ds.schedule(config).trace, make(pwned)), 1e-6, run_id=name)
        for config, (name, make) in zip([ds.default, other_config], PAYLOADS.items(), strict=True)
    ]
    db = import_db(tmp_path, lines)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        kernel = tt.compile(SPEC, db=db, target=target)
        check_kernel(kernel)
    assert not pwned.exists(), "a record's payload ran"
    assert kernel.source == source_of(ds, ds.default, target)
    names = sorted(m.split("(run ")[1].split(",")[0] for m in skipped(caught))
    assert names == ["'comment_escape'", "'wrapper'"], "one warning per skipped record"


@pytest.mark.parametrize("make", PAYLOADS.values(), ids=PAYLOADS.keys())
def test_annotate_takes_only_allowlisted_flags(tmp_path, make):
    s = Schedule(tt.workload(SPEC).outputs)
    with pytest.raises(ScheduleError, match="allowed flags"):
        s.annotate("extra_cflags", make(tmp_path / "pwned"))
    assert s.flags == {} and s.trace == []
    with pytest.raises(ScheduleError, match="allowed flags"):  # nor replayed from a trace
        Schedule.from_trace(s.outputs, with_flags([], make(tmp_path / "pwned")))


def test_schedule_flags_emit_only_allowlisted_flags(tmp_path, target):
    """``Schedule.flags`` is a plain dict: the pipeline checks it again before calling gcc."""
    s = Schedule(tt.workload(SPEC).outputs)
    s.flags["extra_cflags"] = wrapper_flags(tmp_path / "pwned")
    with pytest.raises(ScheduleError, match="allowed flags"):
        tt.compile(SPEC, schedule=s, target=target)
    assert not (tmp_path / "pwned").exists()


HOSTILE_COMMENTS = [
    "*/ int injected = 1; /*",
    "*\\\n/ int injected = 1; /*",  # a backslash-newline splices '*' and '/'
    "*??/\n/ int injected = 1; /*",  # the same with a trigraph backslash
    "a\u2028*/ int injected = 1;",  # a line break str.splitlines knows, C does not
    "\x1b[2J*/ int injected = 1;",
]


@pytest.mark.parametrize("text", HOSTILE_COMMENTS)
def test_generated_c_comments_cannot_be_escaped(text, target):
    s = Schedule(tt.workload(SPEC).outputs)
    source = generate_c(lower(s, "matmul", target.num_threads), f"schedule:\n  {text}")
    assert "injected" not in code_outside_comments(source)
    assert all(c == "\n" or " " <= c <= "~" for c in source.split("#include", 1)[0])


# -- item 3: stale and foreign records -------------------------------------------------------------
def _unknown_knob(ds: DesignSpace) -> tuple[dict, list, dict]:
    return {**ds.default, "colour": "blue"}, [], {}


def _bad_value(ds: DesignSpace) -> tuple[dict, list, dict]:
    return {**ds.default, "opt_level": "O9"}, [], {}


def _trace_does_not_replay(ds: DesignSpace) -> tuple[dict, list, dict]:
    step = {"primitive": "split", "args": {"stage": "matmul", "loop": "nope", "factor": 2}}
    return ds.default, [step], {}


def _other_version(ds: DesignSpace) -> tuple[dict, list, dict]:
    return (*_trace_does_not_replay(ds)[:2], {"version": "0.0.1"})


STALE = {
    "unknown_knob": _unknown_knob,
    "bad_value": _bad_value,
    "trace_does_not_replay": _trace_does_not_replay,
    "other_version": _other_version,
}


@pytest.fixture(params=sorted(STALE))
def stale_db(request, tmp_path, target, ds, other_config) -> tuple[str, Path]:
    """(kind, database): the stale record first (claiming 1 ns), then an honest one."""
    config, trace, fields = STALE[request.param](ds)
    lines = [
        line(target, config, trace, BOGUS_SECONDS, run_id="stale", **fields),
        line(target, other_config, ds.schedule(other_config).trace, 1e-3, run_id="honest"),
    ]
    return request.param, import_db(tmp_path, lines)


def test_compile_skips_a_stale_record(stale_db, target, ds, other_config):
    kind, db = stale_db
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        kernel = tt.compile(SPEC, db=db, target=target)
    assert kernel.source == source_of(ds, other_config, target)
    # another version's records are not asked for at all; the others are named as skipped
    names = [m.split("(run ")[1].split(",")[0] for m in skipped(caught)]
    assert names == ([] if kind == "other_version" else ["'stale'"])


def test_tune_ignores_a_stale_record(stale_db, target, ds):
    """tune neither re-measures nor reports a stale record, and what it reports as the winner
    is what compile then builds."""
    kind, db = stale_db
    result = tt.tune(SPEC, trials=3, strategy="random", db=db, target=target, seed=1)
    assert ds.space.is_valid(result.best_config)
    assert result.best_seconds != BOGUS_SECONDS, "a stale record is not reported as the winner"
    with Database(db) as database:
        records = database.records()
    stale_config = STALE[kind](ds)[0]
    remeasured = [r for r in records if r.config == stale_config and r.run_id != "stale"]
    if stale_config == ds.default:  # the default is always a finalist: measured afresh,
        assert all(r.trace == ds.schedule(ds.default).trace for r in remeasured)  # truly
    else:
        assert remeasured == [], "a stale record is never re-measured"
    kernel = tt.compile(SPEC, db=db, target=target)
    assert kernel.source == source_of(ds, result.best_config, target)


# -- fuzz: random stored configs and traces --------------------------------------------------------
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=8,
)
PRIMITIVES = ["split", "fuse", "reorder", "tile", "vectorize", "unroll", "parallel", "annotate",
              "compute_at", "compute_root", "compute_inline", "cache_write", "rfactor", "pack",
              "cache_read", "from_trace", "trace_json", "stage", "nope"]  # fmt: skip
NAMES = st.sampled_from(["matmul", "matmul_register", "A", "B", "i", "j", "k", "i_o", "j_i",
                         "local", "register", "opt_level", "extra_cflags", "O3"])  # fmt: skip
ARG = st.one_of(NAMES, NAMES, st.integers(-2, 20), st.lists(NAMES | st.integers(0, 3)), JSON)


def parameters(primitive: str) -> list[str]:
    """The argument names a step of ``primitive`` takes (for a name that is none: one bogus)."""
    fn = getattr(Schedule, primitive, None)
    return [*inspect.signature(fn).parameters][1:] if callable(fn) else ["bogus"]


STEP = st.sampled_from(PRIMITIVES).flatmap(
    lambda p: st.fixed_dictionaries(
        {"primitive": st.just(p)},
        optional={"args": st.fixed_dictionaries(dict.fromkeys(parameters(p), ARG)) | JSON},
    )
)
TRACE = st.lists(STEP, max_size=6) | st.lists(STEP | JSON, max_size=3)
FUZZ = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@st.composite
def configs(draw, ds: DesignSpace) -> dict:
    """A config near the space: the default with knobs changed, removed or added at random."""
    config = dict(ds.default)
    for name in draw(st.lists(st.sampled_from([*ds.space.names, "colour"]), max_size=3)):
        if draw(st.booleans()):
            config[name] = draw(JSON)
        else:
            config.pop(name, None)
    return config


@FUZZ
@given(data=st.data())
def test_fuzzed_records_give_only_warnings(data, ds, target):
    """Whatever config and trace a record holds, compile succeeds (falling back as needed),
    warning only with tensortune's own messages."""
    with Database("sqlite://") as database:
        for run in range(data.draw(st.integers(1, 3))):
            config, trace = data.draw(configs(ds)), data.draw(TRACE)
            try:
                rec = TuningRecord(workload=SPEC, target=str(target), config=config, trace=trace,
                                   seconds=1e-9 * (run + 1), run_id=f"fuzz{run}")  # fmt: skip
            except DatabaseError:
                continue  # refused on the way in: the database validates its own fields
            database.commit_record(rec)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            tt.compile(SPEC, db=database, target=target)
    ours = [w for w in caught if Path(w.filename).is_relative_to(PACKAGE)]
    assert len(skipped(ours)) == len(ours), [str(w.message) for w in ours]


@FUZZ
@given(trace=TRACE)
@example(trace=[{"primitive": "reorder", "args": {"stage": "matmul", "loops": 0}}])
@example(trace=[{"primitive": "pack", "args": {"tensor": "B", "consumer": "matmul", "axis": "1"}}])
def test_fuzzed_traces_replay_or_raise_a_schedule_error(trace):
    """``Schedule.from_trace`` on any JSON: a schedule or a ScheduleError, never another type."""
    with contextlib.suppress(ScheduleError):
        Schedule.from_trace(tt.workload(SPEC).outputs, trace)
