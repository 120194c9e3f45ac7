"""Schedules as data: step records and their JSON, typed attach points, refusals that change
nothing, and random schedules that replay from JSON to the same trace and the same C."""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tensortune.te as te
from tensortune.errors import ScheduleError, TensorTuneError
from tensortune.pipeline import build_source
from tensortune.schedule import At, Inline, Root, Schedule, Step
from tensortune.schedule.trace import STEP_TYPES, PackStep, ReorderStep, SplitStep
from tensortune.target import Target

from .test_primitives import (
    CASES,
    ILLEGAL,
    chain,
    matmul,
    matmul_relu,
    scaled_matmul,
    softmax_rows,
)


def scheduled(case: str) -> tuple[object, Schedule]:
    program, schedule = CASES[case]
    out, _, _ = program()
    s = Schedule(out)
    schedule(s)
    return out, s


# -- step records ----------------------------------------------------------------------------------
@pytest.mark.parametrize("case", list(CASES))
def test_steps_round_trip_through_json(case):
    _, s = scheduled(case)
    assert [step.to_json() for step in s.steps] == s.trace
    for step in s.steps:
        data = json.loads(json.dumps(step.to_json()))
        assert Step.from_json(data) == step
        assert hash(Step.from_json(data)) == hash(step)  # frozen values: usable as keys


def test_a_step_is_frozen_and_normalised():
    C, _, _ = matmul()
    s = Schedule(C)
    s.reorder(C, ["j", "i"])  # the stage by Tensor, the loops as a list
    (step,) = s.steps
    assert step == ReorderStep("C", ("j", "i"))
    assert step.to_json() == {"primitive": "reorder", "args": {"stage": "C", "loops": ["j", "i"]}}
    with pytest.raises(dataclasses.FrozenInstanceError):
        step.stage = "D"  # type: ignore[misc]


def test_the_trace_is_a_fresh_json_list_each_time():
    """Callers may keep or change what ``trace`` returns; the schedule's steps are unaffected."""
    C, _, _ = matmul()
    s = Schedule(C)
    s.split("C", "i", 4)
    s.trace.append({"primitive": "split", "args": {}})
    s.trace[0]["args"]["factor"] = 99
    assert s.trace == [SplitStep("C", "i", 4).to_json()]


def test_from_trace_accepts_records_as_well_as_json():
    out, s = scheduled("rfactor_register")
    replayed = Schedule.from_trace(out, s.steps)
    assert replayed.steps == s.steps


def test_every_primitive_has_a_record_whose_fields_are_its_parameters():
    for name, record in STEP_TYPES.items():
        params = list(inspect.signature(getattr(Schedule, name)).parameters.values())[1:]
        fields = dataclasses.fields(record)
        assert [p.name for p in params] == [f.name for f in fields], name
        for p, f in zip(params, fields, strict=True):
            default = dataclasses.MISSING if p.default is p.empty else p.default
            assert default == f.default, (name, p.name)


@pytest.mark.parametrize("name", [*STEP_TYPES, "cache_read"])
def test_every_primitive_documents_its_rewrite_and_its_errors(name):
    doc = inspect.getdoc(getattr(Schedule, name))
    assert "→" in doc, f"{name}: no before → after loop nest"
    assert f"{name}(" in doc, f"{name}: the example does not show the call"
    assert "Raises:" in doc and "ScheduleError" in doc


def test_help_of_schedule_lists_the_primitives():
    doc = inspect.getdoc(Schedule)
    for name in [*STEP_TYPES, "cache_read", "from_trace"]:
        assert f"``{name}``" in doc or name in doc, name


def test_json_steps_are_checked_against_the_record_types():
    with pytest.raises(ScheduleError, match="pack: bad arguments: order must be"):
        Step.from_json({"primitive": "pack", "args": {"tensor": "B", "consumer": "C",
                                                      "order": ["1"]}})  # fmt: skip
    with pytest.raises(ScheduleError, match="split: bad arguments: unexpected 'size'"):
        Step.from_json({"primitive": "split", "args": {"stage": "C", "loop": "i", "size": 2}})
    with pytest.raises(ScheduleError, match="bad arguments: factor must be int, got True"):
        Step.from_json({"primitive": "split", "args": {"stage": "C", "loop": "i", "factor": True}})
    assert Step.from_json({"primitive": "pack", "args": {"tensor": "B", "consumer": "C"}}) == (
        PackStep("B", "C", None, 1, None)
    )


OLD_TRACE = (
    "["
    '{"primitive": "pack"'
    ', "args": {"tensor": "B", "consumer": "C", "axis": null, "factor": 1, "order": null}}, '
    '{"primitive": "pack"'
    ', "args": {"tensor": "A", "consumer": "P", "axis": 1, "factor": 4, "order": [1, 0, 2]}}, '
    '{"primitive": "rfactor", "args": {"stage": "C", "axis": "k", "factor": 4, "scope": "local"}}, '
    '{"primitive": "cache_write", "args": {"stage": "C", "scope": "register"}}, '
    '{"primitive": "tile"'
    ', "args": {"stage": "D", "x": "i", "y": "j", "x_factor": 4, "y_factor": 8}}, '
    '{"primitive": "fuse", "args": {"stage": "D", "outer": "i_o", "inner": "j_o"}}, '
    '{"primitive": "split", "args": {"stage": "D", "loop": "j_i", "factor": 4}}, '
    '{"primitive": "reorder"'
    ', "args": {"stage": "D", "loops": ["i_o_j_o", "i_i", "j_i_o", "j_i_i"]}}, '
    '{"primitive": "compute_at", "args": {"stage": "C", "consumer": "D", "loop": "i_o_j_o"}}, '
    '{"primitive": "compute_root", "args": {"stage": "C"}}, '
    '{"primitive": "compute_inline", "args": {"stage": "P"}}, '
    '{"primitive": "vectorize", "args": {"stage": "D", "loop": "j_i_i"}}, '
    '{"primitive": "unroll", "args": {"stage": "D", "loop": "j_i_o"}}, '
    '{"primitive": "parallel", "args": {"stage": "D", "loop": "i_o_j_o"}}, '
    '{"primitive": "annotate", "args": {"key": "extra_cflags", "value": ["-fno-unroll-loops"]}}, '
    '{"primitive": "annotate", "args": {"key": "opt_level", "value": "O2"}}'
    "]"
)
"""Every primitive, as the schedule module before the step records stored it in databases."""


def every_primitive_program():
    A = te.placeholder((12, 8), name="A")
    B = te.placeholder((8, 16), name="B")
    P = te.compute((12, 8), lambda i, k: A[i, k] * 2.0, name="P")
    k = te.reduce_axis(8, "k")
    C = te.compute((12, 16), lambda i, j: te.sum(P[i, k] * B[k, j], axis=k), name="C")
    return te.compute((12, 16), lambda i, j: te.max(C[i, j], 0.0), name="D")


def test_a_stored_trace_replays_to_the_same_json_byte_for_byte():
    """Databases keep traces as JSON: the records read and write exactly that form."""
    stored = json.loads(OLD_TRACE)
    assert sorted({step["primitive"] for step in stored}) == sorted(STEP_TYPES)
    replayed = Schedule.from_trace(every_primitive_program(), stored)
    assert json.dumps(replayed.trace) == OLD_TRACE
    assert [type(step).primitive for step in replayed.steps] == [s["primitive"] for s in stored]


# -- typed attach points ---------------------------------------------------------------------------
def test_attach_points_are_typed_and_still_compare_as_tuples():
    _, s = scheduled("chain_inline_and_at")
    kinds = {st.name: st.attach for st in s.stages}
    assert isinstance(kinds["F"], Root) and kinds["F"] == ("root",)
    assert any(isinstance(a, Inline) and a == ("inline",) for a in kinds.values())
    at = [a for a in kinds.values() if isinstance(a, At)]
    assert at and all(a == ("at", a.stage, a.loop) and a.kind == "at" for a in at)
    assert all(s[a.stage].loop(a.loop) is not None for a in at)


# -- a refused primitive changes nothing -----------------------------------------------------------
def relation(r) -> tuple:
    return tuple(getattr(v, "name", v) for v in vars(r).values())


def fingerprint(s: Schedule) -> tuple:
    """Everything a primitive may change, by name (variable ids differ between schedules)."""
    return (
        [
            (
                st.name,
                repr(st.body),
                [lp.name for lp in st.leaves],
                [lp.name for lp in st.roots],
                [relation(r) for r in st.relations],
                dict(st.annotations),
                st.attach,
                st.scope,
            )
            for st in s.stages
        ],
        dict(s.flags),
        s.trace,
    )


@pytest.mark.parametrize(
    ("program", "schedule"),
    [(p, sch) for p, sch, *_ in ILLEGAL],
    ids=[f"{p}-{reason}" for _, _, p, _, reason in ILLEGAL],
)
def test_a_refused_primitive_leaves_exactly_the_accepted_steps(program, schedule):
    """After a refusal the schedule is what its accepted steps build: a replay of its trace."""
    out, _, _ = program()
    s = Schedule(out)
    with pytest.raises(ScheduleError):
        schedule(s)
    assert fingerprint(s) == fingerprint(Schedule.from_trace(out, s.trace))


def test_a_refused_tile_or_reorder_changes_nothing():
    C, _, _ = scaled_matmul()
    s = Schedule(C)
    s.compute_at("P", "C", "j")
    before = fingerprint(s)
    with pytest.raises(ScheduleError, match="positive int"):
        s.tile("C", "i", "k", 2, 0)  # the first split would succeed, the second not
    with pytest.raises(ScheduleError, match="break the dependence"):
        s.tile("C", "i", "k", 2, 4)  # both splits would succeed, the reorder moves k_o over j
    with pytest.raises(ScheduleError, match="break the dependence"):
        s.reorder("C", ["k", "i", "j"])
    with pytest.raises(ScheduleError, match="computed at this loop"):
        s.split("C", "j", 2)
    assert fingerprint(s) == before


def test_a_refused_compute_at_leaves_the_attach_point():
    D, _, _ = softmax_rows()
    s = Schedule(D)
    with pytest.raises(ScheduleError, match="read by"):
        s.compute_at("E", "Y", "i")
    assert s["E"].attach == Root() and s.trace == []
    s.compute_at("S", "Y", "i")
    s.compute_at("E", "Y", "i")
    before = fingerprint(s)
    with pytest.raises(ScheduleError, match="read by"):
        s.compute_root("S")
    with pytest.raises(ScheduleError, match="read by"):
        s.compute_at("E", "S", "i")  # Y reads E too, and Y is not inside S
    assert fingerprint(s) == before


# -- random schedules replay from JSON to the same C -----------------------------------------------
PROGRAMS = {"matmul": matmul, "matmul_relu": matmul_relu, "scaled_matmul": scaled_matmul,
            "chain": chain, "softmax": softmax_rows}  # fmt: skip
PRIMS = sorted(STEP_TYPES)
FLAGS = [("opt_level", "O2"), ("fast_math", True), ("unroll_pragma", 4)]


@st.composite
def random_schedule(draw) -> tuple[object, Schedule]:
    """A program and a schedule built by up to 16 primitive calls drawn from its current
    stages and loops; refused calls are dropped (they leave the schedule as it was)."""
    out, _, _ = PROGRAMS[draw(st.sampled_from(sorted(PROGRAMS)))]()
    s = Schedule(out)
    for _ in range(draw(st.integers(0, 16))):
        prim = draw(st.sampled_from(PRIMS))
        stage = s.stages[draw(st.integers(0, len(s.stages) - 1))]
        loops = [lp.name for lp in stage.leaves] or ["none"]
        loop = draw(st.sampled_from(loops))
        other = s.stages[draw(st.integers(0, len(s.stages) - 1))]
        other_loop = draw(st.sampled_from([lp.name for lp in other.leaves] or ["none"]))
        factor = draw(st.sampled_from([1, 2, 3, 4, 8]))
        args = {
            "split": (stage.name, loop, factor),
            "fuse": (stage.name, loop, draw(st.sampled_from(loops))),
            "reorder": (stage.name, draw(st.permutations(loops))),
            "tile": (stage.name, loop, draw(st.sampled_from(loops)), factor, 4),
            "vectorize": (stage.name, loops[-1]),
            "unroll": (stage.name, loop),
            "parallel": (stage.name, loop),
            "compute_at": (stage.name, other.name, other_loop),
            "compute_root": (stage.name,),
            "compute_inline": (stage.name,),
            "cache_write": (stage.name, draw(st.sampled_from(["local", "register"]))),
            "rfactor": (stage.name, loop, factor),
            "pack": (draw(st.sampled_from([t.name for t in s.inputs])), stage.name, None, 1),
            "annotate": draw(st.sampled_from(FLAGS)),
        }[prim]
        with contextlib.suppress(ScheduleError):
            getattr(s, prim)(*args)
    return out, s


def source_or_error(s: Schedule, target: Target) -> str:
    try:
        return build_source(s, "kernel", target)[0]
    except TensorTuneError as exc:  # a schedule lowering refuses is refused the same way again
        return f"{type(exc).__name__}: {exc}"


@pytest.fixture(scope="module")
def avx2() -> Target:
    return Target.cross("avx2", num_threads=2)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(case=random_schedule())
def test_random_schedules_replay_from_json_to_the_same_trace_and_c(case, avx2):
    out, s = case
    stored = json.loads(json.dumps(s.trace))  # as a tuning database keeps it
    replayed = Schedule.from_trace(out, stored)
    assert replayed.trace == s.trace and replayed.steps == s.steps
    assert replayed.flags == s.flags
    assert fingerprint(replayed) == fingerprint(s)
    assert source_or_error(replayed, avx2) == source_or_error(s, avx2)
