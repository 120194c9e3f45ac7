"""Kernel loading and argument checking, with hand-written C that follows the kernel ABI."""

import ctypes
import re

import numpy as np
import pytest

from tensortune.build.compiler import compile_library
from tensortune.build.kernel import ArgSpec, Kernel, pointer_array
from tensortune.errors import BuildError, KernelArgumentError, TensorTuneError
from tensortune.target import Target

ADD_SOURCE = """
void add(const float* restrict A, const float* restrict B, float* restrict C) {
    for (int i = 0; i < 64 * 32; ++i) C[i] = A[i] + B[i];
}
int add_packed(void** args) {
    add((const float*)args[0], (const float*)args[1], (float*)args[2]);
    return 0;
}
"""
ADD_ARGS = (
    ArgSpec("A", (64, 32), "float32"),
    ArgSpec("B", (64, 32), "float32"),
    ArgSpec("C", (64, 32), "float32", "output"),
)

# Two outputs of different dtypes: int32 in, float64 and bool out.
SPLIT_SOURCE = """
#include <stdbool.h>
#include <stdint.h>
void split(const int32_t* restrict X, double* restrict H, bool* restrict P) {
    for (int i = 0; i < 10; ++i) { H[i] = X[i] / 2.0; P[i] = X[i] > 0; }
}
int split_packed(void** args) {
    split((const int32_t*)args[0], (double*)args[1], (bool*)args[2]);
    return 0;
}
"""
SPLIT_ARGS = (
    ArgSpec("X", (10,), "int32"),
    ArgSpec("H", (10,), "float64", "output"),
    ArgSpec("P", (10,), "bool", "output"),
)


@pytest.fixture(scope="module")
def target() -> Target:
    return Target.from_string("generic threads=1")


@pytest.fixture(scope="module")
def add(target: Target) -> Kernel:
    return Kernel.compile(ADD_SOURCE, "add", ADD_ARGS, target)


@pytest.fixture
def ab() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return tuple(rng.standard_normal((64, 32), dtype=np.float32) for _ in range(2))


def test_call_allocates_and_returns_the_output(add: Kernel, ab):
    a, b = ab
    np.testing.assert_array_equal(add(a, b), a + b)


def test_out_argument_is_filled_in_place(add: Kernel, ab):
    a, b = ab
    out = np.zeros((64, 32), np.float32)
    assert add(a, b, out=out) is out
    np.testing.assert_array_equal(out, a + b)
    assert add(a, b, out=(out,)) is out


def test_attributes(add: Kernel, target: Target):
    assert add.name == "add"
    assert add.args == ADD_ARGS
    assert add.source == ADD_SOURCE
    assert add.target == target
    assert add.library_path.suffix == ".so"
    assert [a.name for a in add.inputs] == ["A", "B"]
    assert "add(A: (64, 32) float32" in repr(add)


def test_packed_address_is_callable_from_ctypes(add: Kernel, ab):
    a, b = ab
    c = np.empty_like(a)
    packed = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_void_p))(add.packed_address)
    assert packed(pointer_array([a, b, c])) == 0
    np.testing.assert_array_equal(c, a + b)


def test_multiple_outputs_and_dtypes(target: Target):
    kernel = Kernel.compile(SPLIT_SOURCE, "split", SPLIT_ARGS, target)
    x = np.arange(-5, 5, dtype=np.int32)
    half, positive = kernel(x)
    np.testing.assert_array_equal(half, x / 2.0)
    np.testing.assert_array_equal(positive, x > 0)
    outs = (np.empty(10, np.float64), np.empty(10, bool))
    assert kernel(x, out=outs) == outs
    with pytest.raises(KernelArgumentError, match="takes 2 output array"):
        kernel(x, out=outs[0])


def test_wrong_shape_names_argument_and_both_shapes(add: Kernel, ab):
    a, _ = ab
    expected = "argument 'B' of kernel 'add': expected shape (64, 32) float32, got (32, 64) float32"
    with pytest.raises(KernelArgumentError, match=re.escape(expected)):
        add(a, np.zeros((32, 64), np.float32))


def test_wrong_dtype(add: Kernel, ab):
    a, _ = ab
    with pytest.raises(KernelArgumentError, match=re.escape("got (64, 32) float64")):
        add(a, np.zeros((64, 32)))


def test_wrong_count(add: Kernel, ab):
    with pytest.raises(KernelArgumentError, match=r"takes 2 input array\(s\) \(A, B\), got 1"):
        add(ab[0])


def test_non_contiguous_input_suggests_the_fix(add: Kernel):
    strided = np.zeros((32, 64), np.float32).T
    with pytest.raises(KernelArgumentError, match=r"argument 'A'.*np\.ascontiguousarray"):
        add(strided, strided)


def test_not_an_array(add: Kernel, ab):
    with pytest.raises(KernelArgumentError, match=r"expected a numpy array.*got list"):
        add(ab[0], [[0.0] * 32] * 64)


def test_bad_out_arrays(add: Kernel, ab):
    a, b = ab
    with pytest.raises(KernelArgumentError, match=r"argument 'C'.*expected shape"):
        add(a, b, out=np.empty((64, 31), np.float32))
    read_only = np.empty((64, 32), np.float32)
    read_only.flags.writeable = False
    with pytest.raises(KernelArgumentError, match="read-only"):
        add(a, b, out=read_only)
    with pytest.raises(KernelArgumentError, match=r"overlaps argument 'A'.*restrict"):
        add(a, b, out=a)


def test_kernel_status_is_checked(target: Target):
    source = "int fail_packed(void** args) { return 7; }\n"
    kernel = Kernel(compile_library(source, target), "fail", ())
    with pytest.raises(TensorTuneError, match="returned error status 7"):
        kernel()


def test_missing_entry_point_and_library(target: Target, tmp_path):
    library = compile_library("int other(void) { return 0; }\n", target)
    with pytest.raises(BuildError, match="does not export `add_packed`"):
        Kernel(library, "add", ADD_ARGS)
    with pytest.raises(BuildError, match="cannot load kernel library"):
        Kernel(tmp_path / "missing.so", "add", ADD_ARGS)


def test_outputs_must_follow_inputs(add: Kernel):
    with pytest.raises(TensorTuneError, match="inputs must come before outputs"):
        Kernel(add.library_path, "add", (ADD_ARGS[2], ADD_ARGS[0], ADD_ARGS[1]))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"dtype": "float16"}, "unsupported dtype 'float16'"),
        ({"role": "inout"}, "role must be 'input' or 'output'"),
        ({"shape": (4, -1)}, "negative extent"),
    ],
)
def test_argspec_validation(kwargs: dict, message: str):
    fields = {"name": "A", "shape": (4,), "dtype": "float32", "role": "input", **kwargs}
    with pytest.raises(TensorTuneError, match=message):
        ArgSpec(**fields)


def test_argspec_normalises_shape():
    spec = ArgSpec("A", [np.int64(3), 4], "float32")
    assert spec.shape == (3, 4)
    assert all(type(extent) is int for extent in spec.shape)
    assert spec.describe() == "(3, 4) float32"
