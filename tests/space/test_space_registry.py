"""Which design space a workload gets, and spaces registered by op name."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import tensortune as tt
from tensortune.errors import ConfigError, TensorTuneError
from tensortune.space import SPACES, DesignSpace, Knob, SearchSpace, design_space, register_space
from tensortune.space.registry import unregister_space
from tensortune.target import Target

SPEC = "softmax:rows=4,cols=16"


@pytest.fixture
def spaces() -> Iterator[dict]:
    """The registry, restored after the test (registration is process-wide)."""
    saved = dict(SPACES)
    yield SPACES
    SPACES.clear()
    SPACES.update(saved)


def one_knob_space(wl: tt.Workload, target: Target) -> DesignSpace:
    def build(config: dict) -> tt.Schedule:
        s = tt.Schedule(wl.outputs)
        s.annotate("opt_level", config["opt"])
        return s

    return DesignSpace(wl, target, SearchSpace([Knob("opt", ("O2", "O3"))]), build, {"opt": "O3"})


def test_built_in_spaces_have_the_empty_name(target: Target) -> None:
    ds = design_space(tt.workload(SPEC), target)
    assert ds.name == "" and ds.space.is_valid(ds.default)


def test_a_registered_space_replaces_the_template_and_carries_its_name(
    spaces: dict, target: Target
) -> None:
    register_space("softmax", one_knob_space)
    ds = design_space(tt.workload(SPEC), target)
    assert ds.name == "softmax" and ds.space.names == ("opt",)
    assert ds.schedule({"opt": "O2"}).trace[-1]["args"]
    register_space("softmax", one_knob_space, name="softmax-v2", replace=True)
    assert design_space(tt.workload(SPEC), target).name == "softmax-v2"
    unregister_space("softmax")
    assert design_space(tt.workload(SPEC), target).name == ""


def test_registration_errors_are_clear(spaces: dict, target: Target) -> None:
    register_space("softmax", one_knob_space)
    with pytest.raises(
        TensorTuneError, match=r"space for op 'softmax' is already registered \(pass replace=True"
    ):
        register_space("softmax", one_knob_space)
    with pytest.raises(TensorTuneError, match="space for op: the name must be a printable"):
        register_space("soft\nmax", one_knob_space)
    with pytest.raises(TensorTuneError, match="space: the name must be a printable"):
        register_space("relu", one_knob_space, name="")
    with pytest.raises(TensorTuneError, match="must be callable"):
        register_space("relu", "not a function")  # type: ignore[arg-type]

    register_space("softmax", lambda wl, target: "nope", replace=True)  # type: ignore[arg-type]
    with pytest.raises(TensorTuneError, match="returned a str, not a DesignSpace"):
        design_space(tt.workload(SPEC), target)

    def bad_default(wl: tt.Workload, target: Target) -> DesignSpace:
        return DesignSpace(wl, target, SearchSpace([Knob("opt", ("O2",))]), tt.Schedule, {})

    register_space("softmax", bad_default, replace=True)
    with pytest.raises(ConfigError, match="missing knob 'opt'"):
        design_space(tt.workload(SPEC), target)
