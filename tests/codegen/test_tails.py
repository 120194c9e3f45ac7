"""Masked vector tails: shapes with a tail in every vectorized dimension agree with NumPy on every
x86 level this CPU runs, print a masked operation (not a scalar loop), never touch memory past
the buffer (a guard page, AddressSanitizer), and keep the scalar tail where no mask exists."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tensortune.te as te
from tensortune.codegen import generate_c
from tensortune.ir.printer import format_stmt
from tensortune.lower import lower
from tensortune.pipeline import compile
from tensortune.schedule import Schedule
from tensortune.target import Target, supported_isas

from .test_properties import SETTINGS, conv2d_nchw, conv_reference, matmul, rand

ISAS = [
    pytest.param(
        isa,
        marks=pytest.mark.skipif(
            isa not in supported_isas(), reason=f"this CPU does not run {isa} code"
        ),
    )
    for isa in ("avx512", "avx2")
]
ODD = st.sampled_from([1, 3, 5, 7, 13, 17, 31, 37])  # never a multiple of 4, 8 or 16
LANES = st.sampled_from([4, 8, 16])


@pytest.fixture(params=ISAS, scope="module")
def isa_target(request) -> Target:
    """Each x86 level this host runs (its kernels are called here), two threads."""
    return Target.cross(request.param, num_threads=2)


def _check(kern, inputs, expected, reduction: int = 1) -> None:
    got = np.full(np.shape(expected), np.nan, dtype=kern.args[-1].dtype)
    kern(*inputs, out=got)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5 * (reduction + 10))


def _masked(kern) -> bool:
    return "vector tail: masked" in kern.source and "tt_maskstore_" in kern.source


# -- every vectorized dimension with a tail --------------------------------------------------------
@SETTINGS
@given(M=ODD, N=ODD, K=ODD, lanes=LANES, rows=st.sampled_from([1, 2, 4]), data=st.data())
def test_register_tile_with_ragged_width(isa_target, M, N, K, lanes, rows, data):
    """A register tile whose width does not divide the row: init, FMA and copy-out masked."""
    _A, _B, C = matmul(M, N, K)
    sch = Schedule(C)
    sch.cache_write("C", "register")
    _io, jo, _ii, ji = sch.tile("C", "i", "j", rows, lanes)
    sch.compute_at("C_register", "C", jo)
    sch.reorder("C_register", ["k", "i", "j"])
    sch.unroll("C_register", "i")
    sch.vectorize("C_register", "j")
    sch.vectorize("C", ji)
    if data.draw(st.booleans()):
        sch.pack("B", "C_register", 1, lanes, (1, 0, 2))
    rng = np.random.default_rng(M * 100 + N * 10 + K)
    a, b = rand(rng, (M, K)), rand(rng, (K, N))
    kern = compile(C, sch, isa_target)
    assert _masked(kern) or N == 1
    _check(kern, (a, b), a.astype(np.float64) @ b, reduction=K)


@SETTINGS
@given(M=ODD, N=ODD, lanes=st.tuples(LANES, LANES), dt=st.sampled_from(["float32", "float64"]))
def test_elementwise_stages_with_tails_of_different_widths(isa_target, M, N, lanes, dt):
    """Two stages vectorized along the ragged row by different widths, in float32 and float64
    (an 8-byte lane: ``maskload_pd``, ``__mmask8``)."""
    A = te.placeholder((M, N), dtype=dt, name="A")
    T = te.compute((M, N), lambda i, j: A[i, j] * 2.0, name="T")
    B = te.compute((M, N), lambda i, j: te.exp(T[i, j] * -0.5) + A[i, j], name="B")
    sch = Schedule(B)
    for stage, width in zip(("T", "B"), lanes, strict=True):
        _, inner = sch.split(stage, "j", width)
        sch.vectorize(stage, inner)
    a = np.random.default_rng(M + N).uniform(-1, 1, (M, N)).astype(dt)
    kern = compile(B, sch, isa_target)
    assert _masked(kern)
    _check(kern, (a,), np.exp(a.astype(np.float64) * -1.0) + a)


@SETTINGS
@given(M=ODD, N=ODD, lanes=LANES, op=st.sampled_from(["sum", "max", "min"]))
def test_reduction_along_a_vectorized_axis_sees_the_identity_in_masked_lanes(
    isa_target, M, N, lanes, op
):
    """Row reductions vectorized along the reduced axis: masked-off lanes must not count
    (inputs are all negative, so a 0 in a masked lane would win a max)."""
    A = te.placeholder((M, N), name="A")
    k = te.reduce_axis(N, "k")
    red = {"sum": te.sum, "max": te.max_reduce, "min": te.min_reduce}[op]
    R = te.compute((M,), lambda i: red(te.exp(A[i, k]) * -1.0, axis=k), name="R")
    sch = Schedule(R)
    _, kv = sch.split("R", "k", lanes)
    sch.vectorize("R", kv)
    a = np.random.default_rng(M * N).uniform(-1, 1, (M, N)).astype(np.float32)
    kern = compile(R, sch, isa_target)
    assert "vector tail: masked" in kern.source
    ref = getattr(np, op)(-np.exp(a.astype(np.float64)), axis=1)
    _check(kern, (a,), ref, reduction=N)


@SETTINGS
@given(
    c=st.sampled_from([1, 3]),
    hw=st.sampled_from([(5, 7), (13, 19), (17, 17), (7, 37)]),
    pad=st.sampled_from([0, 1, 2]),
    lanes=LANES,
    inline=st.booleans(),
)
def test_conv_vectorized_along_a_ragged_padded_width(isa_target, c, hw, pad, lanes, inline):
    """NCHW conv vectorized along the output width (odd): padding and tail in one mask."""
    shape = (1, c, *hw)
    _X, _W, O = conv2d_nchw(shape, 2, 3, 1, pad, 1)
    sch = Schedule(O)
    if inline:
        sch.compute_inline("pad")
    else:
        _, pv = sch.split("pad", sch["pad"].leaves[-1].name, lanes)
        sch.vectorize("pad", pv)
    _, wv = sch.split("conv", sch["conv"].leaves[3].name, lanes)
    sch.reorder("conv", [lp.name for lp in sch["conv"].leaves if lp.name != wv] + [wv])
    sch.vectorize("conv", wv)
    rng = np.random.default_rng(sum(shape) + pad)
    x, w = rand(rng, shape), rand(rng, (2, c, 3, 3))
    kern = compile(O, sch, isa_target)
    _check(kern, (x, w), conv_reference(x, w, 1, pad, 1), reduction=9 * c)


@pytest.mark.parametrize("lanes", [4, 8, 16, 32])
def test_int32_tail_and_float64_row_sum(isa_target, lanes):
    """4-byte integer lanes (``maskload_epi32``) and a float64 reduction with a masked tail."""
    A = te.placeholder((5, 37), dtype="int32", name="A")
    B = te.compute((5, 37), lambda i, j: A[i, j] * 3 + 1, name="B")
    sch = Schedule(B)
    _, inner = sch.split("B", "j", lanes)
    sch.vectorize("B", inner)
    kern = compile(B, sch, isa_target)
    assert _masked(kern)
    a = np.arange(5 * 37, dtype=np.int32).reshape(5, 37) - 90
    np.testing.assert_array_equal(kern(a), a * 3 + 1)
    X = te.placeholder((5, 37), dtype="float64", name="X")
    k = te.reduce_axis(37, "k")
    S = te.compute((5,), lambda i: te.sum(X[i, k] - 1.0, axis=k), name="S")
    sch = Schedule(S)
    _, kv = sch.split("S", "k", lanes)
    sch.vectorize("S", kv)
    kern = compile(S, sch, isa_target)
    x = np.random.default_rng(lanes).uniform(-1, 1, (5, 37))
    np.testing.assert_allclose(kern(x), (x - 1.0).sum(axis=1), rtol=1e-12)


# -- the decision is in the IR and the C ----------------------------------------------------------
def _row_add(n: int, lanes: int):
    A = te.placeholder((3, n), name="A")
    B = te.compute((3, n), lambda i, j: A[i, j] + A[i, j], name="B")
    sch = Schedule(B)
    _, inner = sch.split("B", "j", lanes)
    sch.vectorize("B", inner)
    return B, sch


def test_ir_and_c_show_the_masked_operation_not_a_scalar_loop():
    _B, sch = _row_add(37, 16)
    func = lower(sch, "tail", 1)
    ir = format_stmt(func)
    assert "# vector tail: masked" in ir
    assert " mask ((j_i + (j_o * 16)) < 37)] = " in ir, ir
    src = generate_c(func)
    tail = src.split("/* vector tail: masked */")[1]
    assert "tt_maskstore_f32x16(&B[" in tail and "tt_maskload_f32x16(&A[" in tail
    assert "for (int j_i" not in src  # no lane-by-lane loop anywhere
    assert "_mm512_mask_loadu_ps" in src and "_mm256_maskload_ps" in src


def test_bool_and_gathers_keep_the_scalar_tail_with_its_note():
    M = te.placeholder((3, 37), dtype="bool", name="M")
    F = te.compute((3, 37), lambda i, j: te.select(M[i, j], 1.0, 2.0), name="F")
    sch = Schedule(F)
    _, inner = sch.split("F", "j", 16)
    sch.vectorize("F", inner)
    src = generate_c(lower(sch, "tail", 1))
    assert "vector tail: lane by lane (M is bool, which has no masked loads" in src
    A = te.placeholder((3, 181), name="A")  # stride 5: a gather (2 to 4 are strided loads)
    G = te.compute((3, 37), lambda i, j: A[i, 5 * j], name="G")
    sch = Schedule(G)
    _, inner = sch.split("G", "j", 8)
    sch.vectorize("G", inner)
    assert "read of A is not contiguous in j_i" in generate_c(lower(sch, "gather", 1))


# -- never past the buffer -------------------------------------------------------------------------
AT_A_GUARD_PAGE = """
import ctypes, mmap, sys
import numpy as np
import tensortune.te as te
from tensortune.pipeline import compile
from tensortune.schedule import Schedule
from tensortune.target import Target

n, lanes, isa = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
A = te.placeholder((n,), name="A")
B = te.compute((n,), lambda i: A[i] * 2.0 + 1.0, name="B")
k = te.reduce_axis(n, "k")
S = te.compute((1,), lambda i: te.sum(A[k], axis=k), name="S")
page = mmap.PAGESIZE
memory = mmap.mmap(-1, 2 * page)
start = ctypes.addressof(ctypes.c_char.from_buffer(memory))
assert ctypes.CDLL(None).mprotect(ctypes.c_void_p(start + page), page, 0) == 0
a = np.frombuffer(memory, np.float32, n, page - n * 4)  # ends at the guard page
a[:] = np.arange(n, dtype=np.float32)
for out, axis, ref in ((B, "i", 2 * a + 1), (S, "k", a.sum(keepdims=True))):
    s = Schedule(out)
    _, inner = s.split(out.name, axis, lanes)
    s.vectorize(out.name, inner)
    kernel = compile(out, s, Target.cross(isa, num_threads=1))
    assert "tt_maskload_f32x" in kernel.source, kernel.source
    assert np.allclose(kernel(a), ref), (kernel(a), ref)
print("ok")
"""


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize(("n", "lanes"), [(37, 16), (5, 8), (3, 4), (19, 16)])
def test_masked_loads_never_read_past_an_input_ending_at_an_unmapped_page(isa, n, lanes):
    """The input's last element is the last byte before a PROT_NONE page: a full load, or a
    load and blend, of the tail would segfault (in a subprocess, so the test fails cleanly)."""
    run = subprocess.run(
        [sys.executable, "-c", AT_A_GUARD_PAGE, str(n), str(lanes), isa],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0 and run.stdout.strip() == "ok", (run.returncode, run.stderr[-2000:])


ASAN_KERNELS = """
import sys
import numpy as np
import tensortune.te as te
from tensortune.build.kernel import Kernel
from tensortune.pipeline import arg_specs, build_source
from tensortune.schedule import Schedule
from tensortune.target import Target
import subprocess, tempfile, os

isa = sys.argv[1]
target = Target.cross(isa, num_threads=1)
M, N, K = 7, 37, 13
A = te.placeholder((M, K), name="A")
B = te.placeholder((K, N), name="B")
k = te.reduce_axis(K, "k")
C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
s = Schedule(C)
s.cache_write("C", "register")
io, jo, ii, ji = s.tile("C", "i", "j", 2, 16)
s.compute_at("C_register", "C", jo)
s.reorder("C_register", ["k", "i", "j"])
s.unroll("C_register", "i")
s.vectorize("C_register", "j")
s.vectorize("C", ji)
X = te.placeholder((M, N), name="X")
r = te.reduce_axis(N, "r")
R = te.compute((M,), lambda i: te.max_reduce(X[i, r], axis=r), name="R")
s2 = Schedule(R)
_, rv = s2.split("R", "r", 8)
s2.vectorize("R", rv)
cases = ((C, s, (M, K), (K, N)), (R, s2, (M, N)))
rng = np.random.default_rng(0)
for out, sch, *shapes in cases:
    source, func = build_source(sch, "k_" + out.name, target)
    assert "tt_maskload_" in source
    tmp = tempfile.mkdtemp()
    c, so = os.path.join(tmp, "k.c"), os.path.join(tmp, "k.so")
    open(c, "w").write(source)
    flags = [*target.cflags, "-fPIC", "-shared", "-fopenmp", "-std=gnu11", "-fsanitize=address",
             "-fno-omit-frame-pointer", "-o", so, c, "-lm"]
    subprocess.run([target.cc, *flags], check=True)
    kern = Kernel(so, func.name, arg_specs(func), source, target)
    ins = [rng.uniform(-1, 1, sh).astype(np.float32) for sh in shapes]
    ins = [np.copy(x) for x in ins]  # exact-size heap blocks: ASan's redzones follow them
    got = kern(*ins)
    ref = ins[0] @ ins[1] if out is C else ins[0].max(axis=1)
    assert np.allclose(got, ref, rtol=1e-4, atol=1e-4), (got, ref)
print("ok")
"""


@pytest.mark.parametrize("isa", ISAS)
def test_tail_kernels_are_clean_under_address_sanitizer(isa):
    """Tail kernels built with -fsanitize=address, run with libasan preloaded: a masked access
    that touched a byte past a buffer would be reported (and fail the subprocess)."""
    lib = subprocess.run(
        ["gcc", "-print-file-name=libasan.so"], capture_output=True, text=True, check=False
    ).stdout.strip()
    if not lib or not os.path.isabs(lib) or not os.path.exists(lib):
        pytest.skip("gcc has no libasan.so on this machine")
    env = {**os.environ, "LD_PRELOAD": lib, "ASAN_OPTIONS": "detect_leaks=0"}
    run = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(ASAN_KERNELS), isa],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert run.returncode == 0 and run.stdout.strip().endswith("ok"), run.stderr[-3000:]
