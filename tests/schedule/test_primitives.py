"""Schedule primitives: each one's effect checked against NumPy after compiling, trace replay, and
the readable ScheduleError every illegal request raises."""

from __future__ import annotations

import json

import numpy as np
import pytest

import tensortune.te as te
from tensortune.codegen import generate_c
from tensortune.errors import ScheduleError
from tensortune.lower import lower
from tensortune.pipeline import compile
from tensortune.schedule import Schedule

RNG = np.random.default_rng(7)


def rand(*shape) -> np.ndarray:
    return RNG.uniform(-1, 1, size=shape).astype(np.float32)


# -- programs ------------------------------------------------------------------------------------
def matmul(M=13, N=20, K=9):
    A = te.placeholder((M, K), name="A")
    B = te.placeholder((K, N), name="B")
    k = te.reduce_axis(K, "k")
    C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    a, b = rand(M, K), rand(K, N)
    return C, (a, b), a.astype(np.float64) @ b


def matmul_relu(M=12, N=16, K=8):
    """C = A @ B (a reduction stage) feeding D = relu(C) (the output)."""
    C, (a, b), ref = matmul(M, N, K)
    D = te.compute((M, N), lambda i, j: te.max(C[i, j], 0.0), name="D")
    return D, (a, b), np.maximum(ref, 0)


def scaled_matmul(M=10, N=16, K=12):
    """P = A * 2 (elementwise producer) read by C = P @ B."""
    A = te.placeholder((M, K), name="A")
    B = te.placeholder((K, N), name="B")
    P = te.compute((M, K), lambda i, k: A[i, k] * 2.0, name="P")
    k = te.reduce_axis(K, "k")
    C = te.compute((M, N), lambda i, j: te.sum(P[i, k] * B[k, j], axis=k), name="C")
    a, b = rand(M, K), rand(K, N)
    return C, (a, b), (a.astype(np.float64) * 2) @ b


def box_sum(H=11, W=19):
    """A two-axis reduction: 3x3 box sums of X, so fuse/split of reduce loops have work."""
    X = te.placeholder((H + 2, W + 2), name="X")
    r, s = te.reduce_axis(3, "r"), te.reduce_axis(3, "s")
    Y = te.compute((H, W), lambda y, x: te.sum(X[y + r.var, x + s.var], axis=(r, s)), name="Y")
    x = rand(H + 2, W + 2)
    ref = sum(x[a : a + H, b : b + W].astype(np.float64) for a in range(3) for b in range(3))
    return Y, (x,), ref


def row_max(M=5, N=23):
    """A max reduction: a short last block must add -inf, not 0."""
    X = te.placeholder((M, N), name="X")
    k = te.reduce_axis(N, "k")
    R = te.compute((M,), lambda i: te.max_reduce(X[i, k] - 2.0, axis=k), name="R")
    x = rand(M, N)
    return R, (x,), (x.astype(np.float64) - 2.0).max(axis=1)


def chain(M=9, N=24):
    """D = A*B + bias[j] -> E = relu(D) -> F = exp(-E)."""
    A, B = te.placeholder((M, N), name="A"), te.placeholder((M, N), name="B")
    bias = te.placeholder((N,), name="bias")
    D = te.compute((M, N), lambda i, j: A[i, j] * B[i, j] + bias[j], name="D")
    E = te.compute((M, N), lambda i, j: te.max(D[i, j], 0.0), name="E")
    F = te.compute((M, N), lambda i, j: te.exp(-E[i, j]), name="F")
    a, b, c = rand(M, N), rand(M, N), rand(N)
    return F, (a, b, c), np.exp(-np.maximum(a.astype(np.float64) * b + c, 0))


def softmax_rows(M=6, N=40):
    """Softmax as four stages: exp (E) is read by both the sum (S) and the output (Y)."""
    X = te.placeholder((M, N), name="X")
    k1, k2 = te.reduce_axis(N, "k"), te.reduce_axis(N, "k")
    mx = te.compute((M,), lambda i: te.max_reduce(X[i, k1], axis=k1), name="Mx")
    E = te.compute((M, N), lambda i, j: te.exp(X[i, j] - mx[i]), name="E")
    S = te.compute((M,), lambda i: te.sum(E[i, k2], axis=k2), name="S")
    Y = te.compute((M, N), lambda i, j: E[i, j] / S[i], name="Y")
    x = rand(M, N)
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    return Y, (x,), e / e.sum(axis=1, keepdims=True)


# -- schedules, one or two per primitive ---------------------------------------------------------
def s_split(s):
    s.split("C", "i", 4)  # 13 = 3*4 + 1: a tail
    s.split("C", "k", 3)


def s_split_reduce_outermost(s):
    ko, ki = s.split("C", "k", 4)
    s.reorder("C", [ko, "i", "j", ki])


def s_tile(s):
    s.tile("C", "i", "j", 4, 8)


def s_fuse_spatial(s):
    s.fuse("C", "i", "j")


def s_fuse_then_split(s):
    ij = s.fuse("C", "i", "j")
    s.split("C", ij, 16)


def s_fuse_reduce(s):
    s.fuse("Y", "r", "s")


def s_reorder(s):
    s.reorder("C", ["k", "j", "i"])


def s_vectorize_spatial(s):
    _, ji = s.split("C", "j", 8)
    s.reorder("C", ["i", "j_o", "k", ji])
    s.vectorize("C", ji)


def s_vectorize_reduce(s):
    _, ki = s.split("C", "k", 4)  # 9 = 2*4 + 1: vector fast path and a scalar tail
    s.vectorize("C", ki)


def s_unroll(s):
    _io, ii = s.split("C", "i", 4)
    s.unroll("C", ii)
    s.unroll("C", "k")


def s_parallel(s):
    io, _ = s.split("C", "i", 3)
    s.parallel("C", io)


def s_parallel_fused(s):
    s.parallel("C", s.fuse("C", "i", "j"))


def s_compute_at(s):
    io, _ = s.split("C", "i", 4)
    s.compute_at("P", "C", io)


def s_compute_at_reduce_loop(s):
    s.compute_at("P", "C", "k")


def s_compute_inline(s):
    s.compute_inline("P")


def s_chain_inline_and_at(s):
    s.compute_inline("D")
    jo, ji = s.split("F", "j", 8)
    s.compute_at("E", "F", jo)
    s.vectorize("F", ji)


def s_compute_at_shared(s, per_row=True, lanes=8):
    """Every stage of a softmax inside the output's row loop; E has two readers there."""
    io, ii = s.split("Y", "i", 4)
    at = ii if per_row else io
    for st in ("S", "E", "Mx"):  # readers first
        s.compute_at(st, "Y", at)
    for st in ("Mx", "S", "E", "Y"):
        _, inner = s.split(st, s[st].leaves[-1].name, lanes)
        s.vectorize(st, inner)
    s.parallel("Y", io)


def s_compute_at_shared_nested(s):
    """S attached inside E's consumer loop: E's region must cover S's reads as well as Y's."""
    jo, _ = s.split("Y", "j", 8)
    s.compute_at("S", "Y", jo)
    s.compute_at("E", "Y", "i")
    s.compute_at("Mx", "E", "i")


def s_cache_write_local(s):
    s.cache_write("C", "local")
    _, jo, _, _ = s.tile("C", "i", "j", 4, 8)
    s.compute_at("C_local", "C", jo)


def s_cache_write_register(s, parallel=False):
    register_tile(s, s.cache_write("C", "register"), ["k"], parallel)


def register_tile(s, tile: str, k_loops: list[str], parallel: bool, blocks=()) -> None:
    """A 4x8 tile of C accumulated in registers by stage ``tile``, inside ``blocks`` of C."""
    io, jo, ii, ji = s.tile("C", "i", "j", 4, 8)
    s.reorder("C", [*blocks, io, jo, ii, ji])
    s.compute_at(tile, "C", jo)
    s.reorder(tile, [*k_loops, "i", "j"])
    s.unroll(tile, "i")
    s.vectorize(tile, "j")
    s.unroll("C", ii)
    s.vectorize("C", ji)
    if parallel:  # with blocks: a parallel loop inside the serial block loop
        s.parallel("C", io)


def s_cache_write_intermediate(s):
    s.cache_write("C", "local")
    s.compute_at("C", "D", "i")
    s.compute_at("C_local", "C", "i")


def s_rfactor_local(s):
    """K = 9 in blocks of 4: the last block is short."""
    s.rfactor("C", "k", 4, "local")
    s.reorder("C", ["k_o", "i", "j"])
    s.compute_at("C_rf", "C", "j")


def s_rfactor_register(s):
    """GotoBLAS's kc: the block loop outside the tiles, a register tile per block."""
    register_tile(s, s.rfactor("C", "k", 8, "register"), ["k_i"], True, blocks=["k_o"])
    s.pack("B", "C_rf", 1, 8, (1, 0, 2))


def s_rfactor_box(s):
    """Block one of two reduce axes; the other stays inside the blocks."""
    s.rfactor("Y", "s", 2, "local")
    s.compute_at("Y_rf", "Y", "x")


def s_pack(s):
    s.pack("B", "C", 1, 8, (1, 0, 2))  # 20 columns: a zero-filled tail block


def s_pack_transpose(s):
    s.pack("A", "C", None, 1, (1, 0))


def s_cache_read(s):
    s.cache_read("A", "C")


def s_annotate(s):
    s.annotate("opt_level", "O2")
    s.annotate("fast_math", False)
    s.annotate("extra_cflags", ["-fno-unroll-loops"])


def s_readme(s):
    """The schedule of the README example."""
    s_cache_write_register(s, parallel=True)
    s.pack("B", "C_register", 1, 8, (1, 0, 2))


CASES = {
    "split": (matmul, s_split),
    "split_reduce_outermost": (matmul, s_split_reduce_outermost),
    "tile": (matmul, s_tile),
    "fuse_spatial": (matmul, s_fuse_spatial),
    "fuse_then_split": (matmul, s_fuse_then_split),
    "fuse_reduce": (box_sum, s_fuse_reduce),
    "reorder": (matmul, s_reorder),
    "vectorize_spatial": (matmul, s_vectorize_spatial),
    "vectorize_reduce": (matmul, s_vectorize_reduce),
    "unroll": (matmul, s_unroll),
    "parallel": (matmul, s_parallel),
    "parallel_fused": (matmul, s_parallel_fused),
    "compute_at": (scaled_matmul, s_compute_at),
    "compute_at_reduce_loop": (scaled_matmul, s_compute_at_reduce_loop),
    "compute_inline": (scaled_matmul, s_compute_inline),
    "chain_inline_and_at": (chain, s_chain_inline_and_at),
    "compute_at_shared": (softmax_rows, s_compute_at_shared),
    "compute_at_shared_block": (softmax_rows, lambda s: s_compute_at_shared(s, per_row=False)),
    "compute_at_shared_nested": (softmax_rows, s_compute_at_shared_nested),
    "compute_at_shared_inlined": (
        softmax_rows,
        lambda s: (s.compute_inline("E"), s_compute_at_shared(s, lanes=16)),
    ),
    "cache_write_local": (matmul, s_cache_write_local),
    "cache_write_register": (lambda: matmul(16, 32, 8), s_cache_write_register),
    "cache_write_intermediate": (matmul_relu, s_cache_write_intermediate),
    "rfactor_local": (matmul, s_rfactor_local),
    "rfactor_register": (lambda: matmul(16, 32, 40), s_rfactor_register),
    "rfactor_box": (box_sum, s_rfactor_box),
    "rfactor_max": (row_max, lambda s: s.rfactor("R", "k", 5, "local")),
    "pack": (matmul, s_pack),
    "pack_transpose": (matmul, s_pack_transpose),
    "cache_read": (matmul, s_cache_read),
    "annotate": (matmul, s_annotate),
    "readme": (lambda: matmul(64, 64, 32), s_readme),
}


@pytest.mark.parametrize("case", list(CASES))
def test_primitive_matches_numpy(case, target):
    program, schedule = CASES[case]
    out, inputs, expected = program()
    s = Schedule(out)
    schedule(s)
    kern = compile(out, s, target)
    got = np.full(expected.shape, np.nan, dtype=np.float32)  # unwritten elements stay NaN
    kern(*inputs, out=got)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


def source(s: Schedule) -> str:
    return generate_c(lower(s, "kernel", 2))


@pytest.mark.parametrize("case", list(CASES))
def test_trace_replay_gives_identical_source(case):
    program, schedule = CASES[case]
    out, _, _ = program()
    s = Schedule(out)
    schedule(s)
    trace = json.loads(json.dumps(s.trace))  # the trace survives JSON
    assert trace == json.loads(s.trace_json())
    replayed = Schedule.from_trace(out, trace)
    assert replayed.trace == s.trace
    assert replayed.flags == s.flags
    assert source(replayed) == source(s)


def test_trace_records_one_step_per_call_with_defaults_filled_in():
    C, _, _ = matmul()
    s = Schedule(C)
    assert s.tile("C", "i", "j", 4, 8) == ("i_o", "j_o", "i_i", "j_i")
    s.cache_read("B", "C")
    assert s.trace == [
        {"primitive": "tile", "args": {"stage": "C", "x": "i", "y": "j", "x_factor": 4,
                                       "y_factor": 8}},
        {"primitive": "pack", "args": {"tensor": "B", "consumer": "C", "axis": None,
                                       "factor": 1, "order": None}},
    ]  # fmt: skip


def test_split_names_are_fresh_and_deterministic():
    C, _, _ = matmul()
    s = Schedule(C)
    assert s.split("C", "i", 4) == ("i_o", "i_i")
    assert s.split("C", "i_i", 2) == ("i_i_o", "i_i_i")
    assert [lp.name for lp in s["C"].leaves] == ["i_o", "i_i_o", "i_i_i", "j", "k"]
    assert s["C"].extents()["i_o"] == 4  # ceil(13 / 4)


def test_from_trace_of_a_fresh_schedule_is_the_naive_program():
    C, _, _ = matmul()
    assert source(Schedule.from_trace(C, [])) == source(Schedule(C))


# -- illegal requests ----------------------------------------------------------------------------
def attach_p_at_j(s):
    s.compute_at("P", "C", "j")  # loop order i, j, k: k runs inside the attach point


def chain_at_non_consumer(s):
    s.compute_at("D", "F", "i")  # F reads E, not D


ILLEGAL = [
    # (program, schedule, primitive, loop, reason fragment)
    (matmul, lambda s: s.parallel("C", "k"), "parallel", "k", "reduction loop"),
    (
        scaled_matmul,
        lambda s: (attach_p_at_j(s), s.reorder("C", ["k", "i", "j"])),
        "reorder",
        "j",
        "break the dependence",
    ),
    (matmul, lambda s: s.vectorize("C", "i"), "vectorize", "i", "innermost"),
    (
        matmul,
        lambda s: (s.split("C", "k", 3), s.vectorize("C", "k_i")),
        "vectorize",
        "k_i",
        "not a power of two",
    ),
    (matmul, lambda s: s.vectorize("C", "k"), "vectorize", "k", "not a power of two"),  # 9
    (
        matmul,
        lambda s: (s.split("C", "k", 4), s.vectorize("C", "k_i"), s.reorder("C", ["k_i", "i"])),
        "reorder",
        "k_i",
        "must stay innermost",
    ),
    (
        scaled_matmul,
        lambda s: (s.split("C", "k", 4), s.compute_at("P", "C", "k_i"), s.vectorize("C", "k_i")),
        "vectorize",
        "k_i",
        "computed at this loop",
    ),
    (matmul, lambda s: s.split("C", "zz", 2), "split", "zz", "no loop 'zz'"),
    (matmul, lambda s: s.unroll("C", "i_o"), "unroll", "i_o", "no loop 'i_o'"),
    (matmul, lambda s: s.compute_at("C", "C", "q"), "compute_at", "q", "no loop 'q'"),
    (matmul, lambda s: s.split("D", "i", 2), "split", None, "unknown stage 'D'"),
    (matmul, lambda s: s.parallel("nope", "i"), "parallel", None, "unknown stage 'nope'"),
    (matmul, lambda s: s.split("C", "i", 0), "split", "i", "positive int"),
    (matmul, lambda s: s.split("C", "i", -4), "split", "i", "positive int"),
    (matmul, lambda s: s.split("C", "i", 2.0), "split", "i", "positive int"),
    (matmul, lambda s: s.split("C", "i", "4"), "split", "i", "positive int"),
    (matmul, lambda s: s.split("C", "i", True), "split", "i", "positive int"),
    (matmul, lambda s: s.tile("C", "i", "j", 4, 0), "split", "j", "positive int"),
    (matmul, lambda s: s.pack("B", "C", 1, 0), "pack", None, "positive int"),
    (matmul, lambda s: s.pack("B", "C", 1, True), "pack", None, "positive int"),
    (matmul, lambda s: s.fuse("C", "i", "k"), "fuse", "k", "directly inside"),
    (matmul, lambda s: s.fuse("C", "j", "i"), "fuse", "i", "directly inside"),
    (matmul, lambda s: s.fuse("C", "j", "k"), "fuse", "k", "spatial loop with a reduce loop"),
    (matmul_relu, lambda s: s.compute_inline("C"), "compute_inline", None, "reduction"),
    (matmul_relu, lambda s: s.compute_inline("D"), "compute_inline", None, "output"),
    (chain, chain_at_non_consumer, "compute_at", "i", "read by ['E']"),
    (softmax_rows, lambda s: s.compute_at("E", "Y", "i"), "compute_at", "i", "read by ['S']"),
    (
        softmax_rows,
        lambda s: (s.compute_at("S", "Y", "i"), s.compute_at("E", "Y", "i"), s.compute_root("S")),
        "compute_root",
        None,
        "read by ['S']",
    ),
    (
        softmax_rows,
        lambda s: (
            s.split("Y", "j", 8),
            s.compute_at("S", "Y", "j_i"),
            s.compute_at("E", "Y", "j_o"),
            s.reorder("Y", ["j_i", "j_o"]),
        ),
        "reorder",
        None,
        "not computed inside",
    ),
    (softmax_rows, lambda s: s.compute_at("Mx", "Mx", "i"), "compute_at", "i", "inside itself"),
    (
        softmax_rows,
        lambda s: (
            s.compute_at("S", "Y", "i"),
            s.compute_at("E", "Y", "i"),
            s.compute_at("Mx", "E", "i"),
            s.compute_at("E", "Mx", "i"),
        ),
        "compute_at",
        "i",
        "'Mx' is computed inside 'E'",
    ),
    (matmul_relu, lambda s: s.compute_at("D", "D", "i"), "compute_at", "i", "output"),
    (
        matmul,
        lambda s: (s.split("C", "i", 4), s.cache_write("C", "local")),
        "cache_write",
        None,
        "before other primitives",
    ),
    (matmul, lambda s: s.cache_write("C", "shared"), "cache_write", None, "scope"),
    (matmul, lambda s: s.rfactor("C", "i", 4), "rfactor", "i", "not a reduce axis"),
    (matmul, lambda s: s.rfactor("C", "k", 9), "rfactor", "k", "factor must be an int in 1..8"),
    (matmul, lambda s: s.rfactor("C", "k", 4, "global"), "rfactor", "k", "scope"),
    (
        matmul,
        lambda s: (s.split("C", "i", 4), s.rfactor("C", "k", 4)),
        "rfactor",
        None,
        "before other primitives",
    ),
    (
        matmul,
        lambda s: (
            s.rfactor("C", "k", 4),
            s.reorder("C", ["k_o", "i", "j"]),
            s.parallel("C", "k_o"),
        ),
        "parallel",
        "k_o",
        "reduction loop",
    ),
    (
        scaled_matmul,
        lambda s: (s.compute_at("P", "C", "i"), s.cache_write("C", "local")),
        "cache_write",
        None,
        "apply cache_write before compute_at",
    ),
    (
        scaled_matmul,
        lambda s: (s.compute_at("P", "C", "i"), s.pack("P", "C")),
        "pack",
        None,
        "pack it before compute_at",
    ),
    (
        matmul,
        lambda s: (s.split("C", "k", 4), s.vectorize("C", "k_i"), s.unroll("C", "k_i")),
        "unroll",
        "k_i",
        "already vectorized",
    ),
    (
        matmul,
        lambda s: (s.split("C", "k", 4), s.vectorize("C", "k_i"), s.split("C", "k_i", 2)),
        "split",
        "k_i",
        "already vectorized",
    ),
    (
        scaled_matmul,
        lambda s: (s.split("C", "k", 4), s.vectorize("C", "k_i"), s.compute_at("P", "C", "k_i")),
        "compute_at",
        "k_i",
        "vectorized",
    ),
    (
        matmul,
        lambda s: (s.parallel("C", "i"), s.parallel("C", "j")),
        "parallel",
        "j",
        "already has a parallel loop",
    ),
    (
        lambda: matmul(300, 4, 4),
        lambda s: s.unroll("C", "i"),
        "unroll",
        "i",
        "exceeds 256",
    ),
    (matmul, lambda s: s.reorder("C", ["i", "i"]), "reorder", None, "named twice"),
    (matmul, lambda s: s.annotate("colour", 1), "annotate", None, "unknown key"),
    (matmul, lambda s: s.annotate("opt_level", "O9"), "annotate", None, "opt_level"),
    (matmul, lambda s: s.annotate("extra_cflags", "-O1"), "annotate", None, "allowed flags"),
    (
        matmul,
        lambda s: s.annotate("extra_cflags", ["-wrapper", "/bin/sh,-c,touch pwned"]),
        "annotate",
        None,
        "allowed flags",
    ),
    (matmul, lambda s: s.pack("Z", "C"), "pack", None, "does not read a tensor called 'Z'"),
    (matmul, lambda s: s.pack("B", "C", 2), "pack", None, "axis must be in"),
    (matmul, lambda s: s.pack("B", "C", 1, 4, (0, 1)), "pack", None, "order must permute"),
    (matmul, lambda s: s.split("C", "i"), "split", None, "bad arguments"),
]


@pytest.mark.parametrize(
    ("program", "schedule", "primitive", "loop", "reason"),
    ILLEGAL,
    ids=[f"{p}-{reason}" for _, _, p, _, reason in ILLEGAL],
)
def test_illegal_request_raises_a_readable_error(program, schedule, primitive, loop, reason):
    out, _, _ = program()
    s = Schedule(out)
    with pytest.raises(ScheduleError) as info:
        schedule(s)
    err = info.value
    assert (err.primitive, err.loop) == (primitive, loop)
    assert reason in err.reason
    where = f" on loop '{loop}'" if loop else ""
    assert str(err).startswith(f"{primitive}{where}: ")


@pytest.mark.parametrize(
    "trace",
    [
        [{"primitive": "explode", "args": {}}],
        [{"primitive": "trace_json", "args": {}}],  # a method, but not a primitive
        [{"primitive": "from_trace", "args": {}}],
        ["split"],
        [{"args": {"stage": "C"}}],
        [{"primitive": "split", "args": ["C", "i", 4]}],
    ],
)
def test_unknown_or_malformed_trace_step(trace):
    C, _, _ = matmul()
    with pytest.raises(ScheduleError) as info:
        Schedule.from_trace(C, trace)
    assert info.value.primitive == "from_trace"


def test_trace_step_with_bad_arguments():
    C, _, _ = matmul()
    with pytest.raises(ScheduleError, match="split: bad arguments"):
        Schedule.from_trace(C, [{"primitive": "split", "args": {"stage": "C", "loop": "i"}}])
    with pytest.raises(ScheduleError, match="split on loop 'i': factor"):
        Schedule.from_trace(C, [{"primitive": "split", "args": {"stage": "C", "loop": "i",
                                                                "factor": 0}}])  # fmt: skip


def test_a_refused_primitive_leaves_the_schedule_unchanged():
    C, _, _ = scaled_matmul()
    s = Schedule(C)
    s.compute_at("P", "C", "j")
    before = (source(s), list(s.trace))
    with pytest.raises(ScheduleError):
        s.tile("C", "i", "k", 2, 0)  # the first split succeeds, the second is refused
    with pytest.raises(ScheduleError):
        s.reorder("C", ["k", "i", "j"])
    with pytest.raises(ScheduleError):
        s.split("C", "j", 2)  # P is computed at j
    assert [lp.name for lp in s["C"].leaves] == ["i", "j", "k"]
    assert (source(s), s.trace) == before


def test_schedule_needs_unique_tensor_names():
    A = te.placeholder((4,), name="X")
    B = te.compute((4,), lambda i: A[i] + 1.0, name="X")
    with pytest.raises(ScheduleError, match="unique"):
        Schedule(B)
