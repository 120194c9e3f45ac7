"""Size limits (issue 11, item 5): a spec cannot ask for more memory than a machine has, and a
kernel whose indices pass INT32_MAX computes them in 64 bits instead of overflowing."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tensortune as tt
from tensortune import cli, te
from tensortune.ir import needs_64bit_indices
from tensortune.lower import lower
from tensortune.pipeline import build_source
from tensortune.space.registry import design_space
from tensortune.te.reference import NUMPY_DTYPES
from tensortune.workload import _OPS, MAX_BYTES_ENV_VAR, MAX_DIM, max_bytes, workload

HUGE = "matmul:M=1000000000,N=1000,K=1000"
# A holds 2^31 float32 elements (8 GiB): allowed (nothing is allocated to parse or lower it),
# and past what a C int can index
BIG = "matmul:M=2097152,N=16,K=1024"


# -- spec limits -----------------------------------------------------------------------------------
def test_a_tensor_too_large_for_memory_is_a_spec_error_naming_it():
    with pytest.raises(tt.SpecError) as err:
        workload(HUGE)
    message = str(err.value)
    assert "tensor A would hold 1.0e+12 float32 elements (3.6 TiB)" in message
    assert "the limit is 4.3e+09 elements (16.0 GiB of memory" in message
    assert MAX_BYTES_ENV_VAR in message and "use smaller dimensions" in message


def test_tensors_too_large_together_are_a_spec_error_listing_each():
    with pytest.raises(tt.SpecError, match=r"together \(A 16.0 GiB, B 16.0 GiB, matmul 16.0 GiB\)"):
        workload("matmul:M=65536,N=65536,K=65536")


@pytest.mark.parametrize(
    "value",
    ["2147483648", "99999999999", "1" + "0" * 5000, "0" * 5000 + "3" * 11],
    ids=["2^31", "11 digits", "5001 digits", "leading zeros"],
)
def test_a_dimension_past_int32_is_a_spec_error(value):
    with pytest.raises(tt.SpecError, match=f"M must be at most {MAX_DIM}") as err:
        workload(f"matmul:M={value},N=1,K=1")
    assert len(str(err.value)) < 400  # the spec is cut short, not echoed whole


def test_the_memory_limit_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv(MAX_BYTES_ENV_VAR, "1M")
    workload("matmul:M=256,N=256,K=256")  # 3 x 256 KiB
    with pytest.raises(tt.SpecError, match=r"its tensors would take 1.2 MiB together"):
        workload("matmul:M=256,N=512,K=256")
    monkeypatch.setenv(MAX_BYTES_ENV_VAR, "64G")
    workload("matmul:M=65536,N=65536,K=65536")
    monkeypatch.setenv(MAX_BYTES_ENV_VAR, "lots")
    with pytest.raises(tt.SpecError, match=f"{MAX_BYTES_ENV_VAR} must be a positive size"):
        workload("matmul:M=8,N=8,K=8")


def test_cli_reports_a_huge_spec_in_one_line_with_exit_2(tmp_path, capsys):
    status = cli.main(["tune", HUGE, "--trials", "1", "--db", str(tmp_path / "t.db")])
    err = capsys.readouterr().err
    assert status == 2
    assert err.count("\n") == 1 and err.startswith("error: workload 'matmul:M=1000000000")
    assert "tensor A would hold" in err


# -- 64-bit indices --------------------------------------------------------------------------------
def _default_c(spec: str) -> str:
    """The kernel function (not the helpers ahead of it) the default config generates."""
    target = tt.Target.cross("avx512", num_threads=2)
    space = design_space(workload(spec), target)
    source = build_source(space.schedule(space.default), "kernel", target)[0]
    return source[source.index("int kernel(") :]


def _loop_types(source: str) -> set[str]:
    return set(re.findall(r"for \((\w+) \w+ = 0;", source))


def test_a_tensor_of_2_31_elements_gets_64_bit_indices():
    assert _loop_types(_default_c(BIG)) == {"int64_t"}


def test_small_kernels_keep_int_indices():
    assert _loop_types(_default_c("matmul:M=64,N=64,K=64")) == {"int"}
    assert _loop_types(_default_c("conv2d:C=16,H=28,W=28,K=16,R=3,S=3,pad=1")) == {"int"}


# index -> the element of X it reads; i * 1.5e9 passes INT32_MAX on the way (the second one
# may be negative, so it is a floor division helper, not C's /)
SPREAD_READS = [
    (lambda i: (i * 1_500_000_000) // 1_000_000_000, [0, 1, 3, 4]),
    (lambda i: (i * 1_500_000_000 - 1) // 1_000_000_000 + 1, [0, 2, 3, 5]),
]


def _reader(index) -> te.Tensor:
    x = te.placeholder((8,), "float32", "X")
    return te.compute((4,), lambda i: x[index(i)], name="Y")


def test_an_index_value_past_int32_gets_64_bit_indices():
    assert needs_64bit_indices(lower(tt.Schedule([_reader(SPREAD_READS[0][0])])))
    assert not needs_64bit_indices(lower(tt.Schedule([_reader(lambda i: (i * 15) // 10)])))


@pytest.mark.parametrize(("index", "expected"), SPREAD_READS, ids=["division", "floor-helper"])
def test_a_kernel_whose_index_passes_int32_computes_it_exactly(index, expected):
    out = tt.compile(_reader(index))(np.arange(8, dtype=np.float32))
    np.testing.assert_array_equal(out, np.array(expected, dtype=np.float32))


# -- fuzzing ---------------------------------------------------------------------------------------
_KEYS = sorted({k.name for op in _OPS.values() for k in op.keys})
_WEIRD = [
    "",
    " ",
    "-1",
    "0",
    "-0",
    "+3",
    "1e3",
    "0x10",
    "3.0",
    "\uff11\uff12",
    "\u0663",
    "7 7",
    "9" * 400,
    "9" * 5000,
    "0" * 5000 + "7",
    "∞",
]
_values = st.one_of(
    st.integers(-(10**30), 10**30).map(str),
    st.sampled_from(_WEIRD),
    st.text(max_size=12),
    st.sampled_from(["bias+relu", "RELU", "NHWC", "nchw"]),
)
_items = st.tuples(
    st.one_of(st.sampled_from(_KEYS), st.text(max_size=8)),
    st.sampled_from(["=", "==", ":", "", " = "]),
    _values,
).map("".join)
_specs = st.one_of(
    st.text(max_size=40),
    st.tuples(
        st.one_of(st.sampled_from(sorted(_OPS)), st.text(max_size=10)),
        st.sampled_from([":", "::", "", " : ", ";"]),
        st.lists(_items, max_size=14),
        st.sampled_from([",", ", ", ";", ",,", "\n", ""]),
    ).map(lambda p: p[0] + p[1] + p[3].join(p[2])),
)


def _parses_or_is_one_clear_error(spec: str) -> None:
    """A spec gives a workload whose tensors fit the memory limit, or one short SpecError line."""
    try:
        wl = workload(spec)
    except tt.SpecError as err:
        message = str(err)
        assert message and "\n" not in message and len(message) < 1000
        return
    assert workload(wl.name) == wl
    tensors = (*wl.inputs, *wl.outputs)
    nbytes = sum(math.prod(t.shape) * np.dtype(NUMPY_DTYPES[t.dtype]).itemsize for t in tensors)
    assert nbytes <= max_bytes()


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_specs)
def test_any_spec_string_parses_or_is_one_clear_spec_error(spec):
    _parses_or_is_one_clear_error(spec)


_dims = st.integers(1, 2**33)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["matmul", "batch_matmul", "softmax", "layernorm"]), _dims, _dims, _dims)
def test_dimensions_around_the_limits_parse_or_are_one_clear_spec_error(op, a, b, c):
    keys = [k.name for k in _OPS[op].keys if k.required]
    spec = f"{op}:" + ",".join(f"{k}={v}" for k, v in zip(keys, (a, b, c, a), strict=False))
    _parses_or_is_one_clear_error(spec)
