"""The generated C: readable names, OpenMP, vector types, register tiles, and a few kernels whose
numerics once went wrong (tails of register tiles, negative floor division in vectors)."""

from __future__ import annotations

import re

import numpy as np
import pytest

import tensortune.te as te
from tensortune.codegen import generate_c
from tensortune.lower import lower
from tensortune.pipeline import compile
from tensortune.schedule import Schedule

RNG = np.random.default_rng(11)


def matmul(M: int, N: int, K: int, a_name: str = "A", b_name: str = "B", c_name: str = "C"):
    A = te.placeholder((M, K), name=a_name)
    B = te.placeholder((K, N), name=b_name)
    k = te.reduce_axis(K, "k")
    return te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name=c_name)


def c_source(s: Schedule, name: str = "kernel", threads: int = 2) -> str:
    return generate_c(lower(s, name, threads))


def body_of(src: str, name: str) -> str:
    """The text of C function ``name``."""
    start = src.index(f"int {name}(")
    return src[start : src.index("\n}\n", start) + 3]


def register_tiled(M=16, N=32, K=8, tile=(4, 8), along="j", parallel=True) -> Schedule:
    """A register-tiled matmul whose accumulator vectors run along tile axis ``along``."""
    s = Schedule(matmul(M, N, K))
    s.cache_write("C", "register")
    io, jo, ii, ji = s.tile("C", "i", "j", *tile)
    (unrolled, vector), (tile_unrolled, tile_vector) = (ii, ji), ("i", "j")
    if along == "i":
        (unrolled, vector), (tile_unrolled, tile_vector) = (ji, ii), ("j", "i")
        s.reorder("C", [io, jo, ji, ii])
    s.compute_at("C_register", "C", jo)
    s.reorder("C_register", ["k", tile_unrolled, tile_vector])
    s.unroll("C_register", tile_unrolled)
    s.vectorize("C_register", tile_vector)
    s.unroll("C", unrolled)
    s.vectorize("C", vector)
    if parallel:
        s.parallel("C", io)
    return s


def run_fenced(kern, inputs, shape, dtype=np.float32):
    """Run with the output at the start of a larger buffer; the bytes past it must stay as
    they were."""
    nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
    raw = np.full(nbytes + 256, 0xAB, dtype=np.uint8)
    out = raw[:nbytes].view(dtype).reshape(shape)
    out[...] = np.nan if np.issubdtype(dtype, np.floating) else 0  # unwritten floats stay NaN
    kern(*inputs, out=out)
    assert (raw[nbytes:] == 0xAB).all(), "the kernel wrote past the end of its output"
    return out


# -- readability ---------------------------------------------------------------------------------
def test_function_and_parameters_are_named_after_the_kernel_and_tensors():
    s = Schedule(matmul(8, 8, 8))
    src = c_source(s, "my_matmul")
    params = "const float* restrict A, const float* restrict B, float* restrict C"
    assert f"int my_matmul({params})" in src
    assert "int my_matmul_packed(void** args)" in src
    assert "return my_matmul((const float*)args[0], (const float*)args[1], (float*)args[2]);" in src


def test_loop_variables_are_named_after_the_loops():
    s = Schedule(matmul(8, 8, 8))
    s.split("C", "i", 4)
    src = body_of(c_source(s), "kernel")
    for loop in ("i_o", "i_i", "j", "k"):
        assert f"for (int {loop} = 0; {loop} < " in src


def test_parallel_loop_gets_an_omp_pragma():
    s = Schedule(matmul(32, 8, 8))
    io, _ = s.split("C", "i", 4)
    s.parallel("C", io)
    src = c_source(s, threads=2)
    assert re.search(
        r"#pragma omp parallel for num_threads\(2\) schedule\(static\)\n"
        r"\s*for \(int i_o = 0; i_o < 8;",
        src,
    )
    assert "#pragma omp" not in c_source(s, threads=1)  # one thread: a plain loop


def test_nested_parallel_loops_get_one_pragma():
    X = te.placeholder((16, 32), name="X")
    Y = te.compute((16, 32), lambda i, j: X[i, j] * 2.0, name="Y")
    Z = te.compute((16, 32), lambda i, j: Y[i, j] + 1.0, name="Z")
    s = Schedule(Z)
    io, _ = s.split("Z", "i", 4)
    s.parallel("Z", io)
    s.compute_at("Y", "Z", io)
    s.parallel("Y", "i")  # already inside a parallel region
    assert c_source(s).count("#pragma omp") == 1


def test_vectorized_loop_uses_vector_types():
    s = Schedule(matmul(8, 32, 8))
    _, ji = s.split("C", "j", 16)
    s.reorder("C", ["i", "j_o", "k", ji])
    s.vectorize("C", ji)
    src = c_source(s)
    assert "typedef float f32x16 __attribute__((vector_size(64), aligned(64)));" in src
    body = body_of(src, "kernel")
    assert "tt_store_f32x16(&C[" in body and "tt_load_f32x16(&B[" in body
    assert "tt_bcast_f32x16(&A[" in body  # A[i, k] is the same in every lane
    assert "j_i" not in body.split("tt_store_f32x16", 1)[1].split(";")[0]  # no per-lane index


def test_register_tile_is_named_variables_on_a_divisible_shape():
    body = body_of(c_source(register_tiled()), "kernel")
    assert "/* C_register: float32[4, 8] held in registers */" in body
    for n in (0, 8, 16, 24):
        assert f"f32x8 C_register_v{n};" in body
        assert f"C_register_v{n} = tt_splat_f32x8(0.0f);" in body
    assert "float C_register[" not in body
    assert "tt_store_f32x8(&C[i_o * 128 + j_o * 8], C_register_v0);" in body


def test_register_tile_vectorized_along_its_outer_dimension_stays_in_registers(target):
    """Vectors along i (stride 4 in the 8x4 tile), as conv's channel tiles use them."""
    s = register_tiled(16, 12, 8, tile=(8, 4), along="i", parallel=False)
    body = body_of(c_source(s), "kernel")
    assert "held in registers" in body and "float C_register[" not in body
    for n in range(4):
        assert f"f32x8 C_register_v{n};" in body
    a, b = RNG.random((16, 8), dtype=np.float32), RNG.random((8, 12), dtype=np.float32)
    got = compile(s.outputs, s, target)(a, b)
    np.testing.assert_allclose(got, a @ b, rtol=1e-5)


def test_register_tile_with_non_constant_indices_falls_back_to_a_local_array():
    s = Schedule(matmul(16, 32, 8))
    s.cache_write("C", "register")
    _, jo, _, _ = s.tile("C", "i", "j", 4, 8)
    s.compute_at("C_register", "C", jo)  # C's i_i and j_i stay serial loops
    s.parallel("C_register", "i")
    body = body_of(c_source(s), "kernel")
    assert "register tile C_register kept in memory" in body
    assert "float C_register[32] __attribute__((aligned(64)));" in body
    assert "C_register_v" not in body
    assert body.endswith("\n  return 0;\n}\n")  # the failed attempt left the indentation alone


def test_failed_register_promotion_leaves_later_stages_alone():
    C = matmul(16, 32, 8)
    D = te.compute((16, 32), lambda i, j: te.max(C[i, j], 0.0), name="D")
    s = Schedule(D)
    s.cache_write("C", "register")
    s.compute_at("C_register", "C", "i")
    s.parallel("C_register", "j")  # inside the tile's body, which then cannot be promoted
    s.parallel("D", "i")
    src = body_of(c_source(s), "kernel")
    assert "register tile C_register kept in memory" in src
    assert src.count("#pragma omp parallel for") == 2


def test_odd_tensor_names_are_sanitised(target):
    A = te.placeholder((4, 16), name="my-input.1")
    B = te.placeholder((16,), name="float")  # a C keyword
    C = te.compute((4, 16), lambda i, j: A[i, j] * B[j] + 1.0, name="out put")
    assert (A.name, B.name, C.name) == ("my_input_1", "float_", "out_put")
    s = Schedule(C)
    s.vectorize("out_put", "j")
    kern = compile(C, s, target)
    assert "const float* restrict my_input_1, const float* restrict float_" in kern.source
    assert [arg.name for arg in kern.args] == ["my_input_1", "float_", "out_put"]
    a, b = RNG.standard_normal((4, 16), dtype=np.float32), RNG.standard_normal(16, dtype=np.float32)
    np.testing.assert_allclose(kern(a, b), a * b + 1, rtol=1e-5, atol=1e-6)  # FMA contraction


@pytest.mark.parametrize(
    ("given", "sanitised"),
    [("2x", "t_2x"), ("int", "int_"), ("free", "free_"), ("tt_alloc", "t_tt_alloc"),
     ("f32x8", "t_f32x8"), ("a b", "a_b"), ("expf", "expf_"), ("x", "x")],
)  # fmt: skip
def test_sanitise(given, sanitised):
    assert te.placeholder((2,), name=given).name == sanitised


def test_names_used_by_the_generated_code_still_compile(target):
    X = te.placeholder((8,), name="free")
    Y = te.compute((8,), lambda i: te.exp(X[i]), name="expf")
    Z = te.compute((8,), lambda i: Y[i] + 1.0, name="tt_alloc")  # Y becomes a heap temporary
    kern = compile(Z, Schedule(Z), target)
    x = RNG.standard_normal(8, dtype=np.float32)
    np.testing.assert_allclose(kern(x), np.exp(x) + 1, rtol=1e-5)


# -- kernels that once went wrong ----------------------------------------------------------------
def test_register_tile_on_a_tiny_non_divisible_shape_stays_in_bounds(target):
    """3x3x3 under a 4x8 register tile: the copy-out must not store whole vectors."""
    C = matmul(3, 3, 3)
    s = Schedule(C)
    s.cache_write("C", "register")
    _, jo, _, ji = s.tile("C", "i", "j", 4, 8)
    s.compute_at("C_register", "C", jo)
    ko, ki = s.split("C_register", "k", 16)
    s.reorder("C_register", [ko, ki, "i", "j"])
    s.unroll("C_register", "i")
    s.vectorize("C_register", "j")
    s.vectorize("C", ji)
    kern = compile(C, s, target)
    assert "tt_store_f32x8(&C[" not in kern.source
    a = RNG.standard_normal((3, 3), dtype=np.float32)
    b = RNG.standard_normal((3, 3), dtype=np.float32)
    np.testing.assert_allclose(run_fenced(kern, (a, b), (3, 3)), a @ b, rtol=1e-5, atol=1e-6)


def test_register_tile_at_an_unrolled_loop_is_declared_once_per_copy(target):
    C = matmul(8, 16, 16)
    s = Schedule(C)
    s.cache_write("C", "register")
    _, jo, ii, ji = s.tile("C", "i", "j", 4, 8)
    s.compute_at("C_register", "C", jo)
    s.reorder("C_register", ["k", "i", "j"])
    s.unroll("C_register", "i")
    s.vectorize("C_register", "j")
    s.unroll("C", jo)  # two copies of the tile in the same C scope
    s.unroll("C", ii)
    s.vectorize("C", ji)
    kern = compile(C, s, target)
    assert kern.source.count("f32x8 C_register_v0;") == 2
    a = RNG.standard_normal((8, 16), dtype=np.float32)
    b = RNG.standard_normal((16, 16), dtype=np.float32)
    np.testing.assert_allclose(run_fenced(kern, (a, b), (8, 16)), a @ b, rtol=1e-4, atol=1e-5)


def test_readme_schedule(target):
    s = register_tiled(64, 64, 32)
    s.pack("B", "C_register", 1, 8, (1, 0, 2))
    kern = compile(s.outputs, s, target)
    a = RNG.standard_normal((64, 32), dtype=np.float32)
    b = RNG.standard_normal((32, 64), dtype=np.float32)
    np.testing.assert_allclose(run_fenced(kern, (a, b), (64, 64)), a @ b, rtol=1e-4, atol=1e-4)


def test_vectorized_integer_floor_division_and_modulo_of_negatives(target):
    X = te.placeholder((4, 32), dtype="int32", name="X")
    Y = te.compute((4, 32), lambda i, j: X[i, j] // 3 * 100 + X[i, j] % 7 + (j - 5) // 4, name="Y")
    s = Schedule(Y)
    _, ji = s.split("Y", "j", 8)
    s.vectorize("Y", ji)
    kern = compile(Y, s, target)
    assert "tt_floordiv_i32x8" in kern.source and "tt_mod_i32x8" in kern.source
    x = RNG.integers(-50, 50, (4, 32)).astype(np.int32)
    j = np.arange(32)
    got = run_fenced(kern, (x,), (4, 32), np.int32)
    np.testing.assert_array_equal(got, x // 3 * 100 + x % 7 + (j - 5) // 4)


def test_vectorized_float64(target):
    X = te.placeholder((3, 16), dtype="float64", name="X")
    Y = te.compute(
        (3, 16), lambda i, j: te.select(X[i, j] > 0.0, X[i, j] * 2.0, -X[i, j]), name="Y"
    )
    s = Schedule(Y)
    s.vectorize("Y", "j")
    kern = compile(Y, s, target)
    assert "f64x16" in kern.source
    x = RNG.standard_normal((3, 16))
    np.testing.assert_allclose(kern(x), np.where(x > 0, x * 2, -x))


def test_vectorized_max_reduction_with_a_tail(target):
    X = te.placeholder((5, 37), name="X")
    k = te.reduce_axis(37, "k")
    R = te.compute((5,), lambda i: te.max_reduce(X[i, k], axis=k), name="R")
    s = Schedule(R)
    _, ki = s.split("R", "k", 16)
    s.vectorize("R", ki)
    kern = compile(R, s, target)
    assert "tt_hmax_f32x16" in kern.source
    x = RNG.standard_normal((5, 37), dtype=np.float32)
    np.testing.assert_array_equal(run_fenced(kern, (x,), (5,)), x.max(1))


# -- booleans: one byte in memory, a 0/-1 mask in vector lanes -------------------------------------
def test_boolean_arguments_are_one_byte(target):
    X = te.placeholder((4, 16), dtype="bool", name="X")
    Y = te.placeholder((4, 16), name="Y")
    Z = te.compute((4, 16), lambda i, j: te.select(X[i, j], Y[i, j], -1.0), name="Z")
    P = te.compute((4, 16), lambda i, j: Y[i, j] > 0.0, name="P")
    kern = compile(Z, Schedule(Z), target)
    assert "const _Bool* restrict X" in kern.source
    x, y = RNG.random((4, 16)) > 0.5, RNG.standard_normal((4, 16), dtype=np.float32)
    np.testing.assert_array_equal(kern(x, y), np.where(x, y, -1))
    positive = compile(P, Schedule(P), target)
    assert np.array_equal(run_fenced(positive, (y,), (4, 16), np.bool_), y > 0)


def test_vectorized_boolean_inputs_and_logic(target):
    X = te.placeholder((4, 16), dtype="bool", name="X")
    Y = te.placeholder((4, 16), name="Y")
    Z = te.compute(
        (4, 16),
        lambda i, j: (
            te.select(~X[i, j] | (j < 3), Y[i, j], 0.0)
            + te.cast(X[i, j], "float32") * 10.0
            + te.cast(X[i, 0], "float32") * 100.0
        ),  # the same element in every lane
        name="Z",
    )
    s = Schedule(Z)
    s.vectorize("Z", "j")
    kern = compile(Z, s, target)
    assert "f32x16" in kern.source
    x, y = RNG.random((4, 16)) > 0.5, RNG.standard_normal((4, 16), dtype=np.float32)
    j = np.arange(16)
    expected = np.where(~x | (j < 3), y, 0) + x * 10.0 + x[:, :1] * 100.0
    np.testing.assert_allclose(kern(x, y), expected, rtol=1e-6)


def test_vector_select_between_doubles_on_a_float_comparison(target):
    X = te.placeholder((4, 16), name="X")
    D = te.placeholder((4, 16), dtype="float64", name="D")
    Z = te.compute(
        (4, 16),
        lambda i, j: te.select((X[i, j] > 0.0) & (D[i, j] < 0.5), D[i, j], 2.0),
        name="Z",
    )
    s = Schedule(Z)
    s.vectorize("Z", "j")
    kern = compile(Z, s, target)
    x, d = RNG.standard_normal((4, 16), dtype=np.float32), RNG.standard_normal((4, 16))
    np.testing.assert_array_equal(kern(x, d), np.where((x > 0) & (d < 0.5), d, 2.0))


def test_boolean_max_and_min_reductions_are_any_and_all(target):
    X = te.placeholder((4, 8), dtype="bool", name="X")
    k1, k2 = te.reduce_axis(8, "k1"), te.reduce_axis(8, "k2")
    anyx = te.compute((4,), lambda i: te.max_reduce(X[i, k1], axis=k1), name="anyx")
    allx = te.compute((4,), lambda i: te.min_reduce(X[i, k2], axis=k2), name="allx")
    kern = compile([anyx, allx], Schedule([anyx, allx]), target)
    x = np.zeros((4, 8), dtype=bool)
    x[1, 3] = True
    x[2, :] = True
    got_any, got_all = kern(x)
    np.testing.assert_array_equal(got_any, x.any(1))
    np.testing.assert_array_equal(got_all, x.all(1))


def test_unswitched_fast_path_of_a_ragged_register_tile_is_reachable():
    """A loop around a ragged tile is unswitched once on its tail test: one ``if`` / ``else``,
    the interior copy with no test inside, the edge copy with none of the tests its branch
    already decided, and no negated or repeated condition (an unreachable copy)."""
    src = c_source(register_tiled(M=10, N=32, K=8, parallel=False))
    src = src[src.index("\nint ") :]  # the kernel, not the preamble's helpers
    conditions = re.findall(r"^\s*if \((.*)\) \{$", src, flags=re.MULTILINE)
    assert len(conditions) == 1, conditions
    assert src.count("} else {") == 1
    assert not any("!" in c for c in conditions)
    assert len(re.findall(r"for \(int k\w* = 0", src)) == 2  # interior and edge micro-kernel


STRIDE_TWO_AT_A_GUARD_PAGE = """
import ctypes, mmap
import numpy as np
import tensortune.te as te
from tensortune.pipeline import compile
from tensortune.schedule import Schedule

n, lanes = 32, 16
A = te.placeholder((2 * n - 1,), name="A")
B = te.compute((n,), lambda i: A[2 * i] * 2.0, name="B")
s = Schedule(B)
_, inner = s.split("B", "i", lanes)
s.vectorize("B", inner)
kernel = compile(B, s)
assert "tt_load2_" in kernel.source, kernel.source
page = mmap.PAGESIZE
memory = mmap.mmap(-1, 2 * page)
start = ctypes.addressof(ctypes.c_char.from_buffer(memory))
assert ctypes.CDLL(None).mprotect(ctypes.c_void_p(start + page), page, 0) == 0
a = np.frombuffer(memory, np.float32, 2 * n - 1, page - (2 * n - 1) * 4)  # ends at the guard
a[:] = np.arange(2 * n - 1, dtype=np.float32)
assert np.array_equal(kernel(a), 2 * a[::2])
print("ok")
"""


def test_stride_two_reads_are_two_loads_and_never_read_past_the_last_lane():
    """A stride-2 vector read (stride-2 windows) is two contiguous loads and a shuffle; with the
    input ending at a PROT_NONE page, a load past the last lane's element would segfault."""
    import subprocess
    import sys

    run = subprocess.run(
        [sys.executable, "-c", STRIDE_TWO_AT_A_GUARD_PAGE], capture_output=True, text=True
    )
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stderr[-2000:]
