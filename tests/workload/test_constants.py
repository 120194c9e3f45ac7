"""Workload.with_constants: the constant inputs join the name (the database key) in input order;
a workload without them is exactly the spec's."""

import pytest

import tensortune as tt
from tensortune.errors import SpecError
from tensortune.workload import CONSTANTS_MARK

SPEC = "matmul:M=64,N=32,K=16,epilogue=bias+relu"


def test_a_spec_has_no_constants():
    wl = tt.workload(SPEC)
    assert wl.constants == ()
    assert wl.name == "matmul:M=64,N=32,K=16,epilogue=bias+relu"
    assert wl.with_constants(()) == wl and wl.with_constants(()).name == wl.name


def test_constants_join_the_name_in_input_order():
    wl = tt.workload(SPEC)
    inputs = [t.name for t in wl.inputs]
    packed = wl.with_constants(reversed(inputs[1:]))
    assert packed.constants == tuple(inputs[1:])
    assert packed.name == wl.name + CONSTANTS_MARK + ",".join(inputs[1:])
    assert packed != wl and hash(packed) != hash(wl)
    assert packed.inputs == wl.inputs and packed.flops == wl.flops and packed.op == wl.op
    assert packed.with_constants(inputs[1]).name == wl.name + CONSTANTS_MARK + inputs[1]
    assert packed.with_constants([]) == wl


def test_an_unknown_constant_is_refused():
    with pytest.raises(SpecError, match=r"constants \['Q'\] are not inputs"):
        tt.workload(SPEC).with_constants(["Q"])


def test_a_name_with_constants_parses_back_to_the_same_workload():
    wl = tt.workload("matmul:M=1,N=3072,K=768,epilogue=bias+gelu").with_constants(["bias", "B"])
    again = tt.workload(wl.name)
    assert again == wl and again.constants == ("B", "bias")
    with pytest.raises(SpecError, match=r"constants \['Q'\] are not inputs \(inputs: X, W\)"):
        tt.workload(f"dense:M=1,N=2,K=3{CONSTANTS_MARK}Q")
