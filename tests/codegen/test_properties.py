"""Property tests: random legal schedules compile to kernels that agree with NumPy.

Each example draws shapes (including 1, primes and sizes that are not multiples of the vector
width) and a random legal schedule, compiles it with gcc and compares the result with a NumPy
reference. Set ``TT_PROPERTY_EXAMPLES`` to run more examples per property when hunting bugs.
"""

from __future__ import annotations

import json
import os

import numpy as np
from hypothesis import HealthCheck, Phase, event, given, note, settings
from hypothesis import strategies as st

import tensortune.te as te
from tensortune.build.compiler import compile_library
from tensortune.build.kernel import Kernel
from tensortune.codegen import generate_c
from tensortune.errors import ScheduleError
from tensortune.lower import lower
from tensortune.pipeline import (
    arg_specs,
    as_outputs,
    build_source,
    compile,
    kernel_name,
    schedule_flags,
)
from tensortune.schedule import Schedule
from tensortune.target import Target

# Bug hunting: TT_PROPERTY_EXAMPLES=500 TT_PROPERTY_RANDOM=1 (fresh examples each run),
# TT_PROPERTY_NOSHRINK=1 (report the first failure as found), TT_PROPERTY_ASAN=1 (see check()).
EXAMPLES = int(os.environ.get("TT_PROPERTY_EXAMPLES", "25"))
NO_SHRINK = os.environ.get("TT_PROPERTY_NOSHRINK")
_PHASES = {"phases": (Phase.explicit, Phase.generate)} if NO_SHRINK else {}
SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    derandomize=os.environ.get("TT_PROPERTY_RANDOM") is None,
    **_PHASES,
)

DIMS = st.sampled_from([1, 2, 3, 7, 8, 13, 16, 17, 31, 33])
FACTORS = st.sampled_from([1, 2, 3, 4, 5, 7, 8, 16])
LANES = st.sampled_from([4, 8, 16])


def rand(rng: np.random.Generator, shape) -> np.ndarray:
    return rng.uniform(-1.0, 1.0, size=shape).astype(np.float32)


def check(sch: Schedule, outputs, inputs, expected, target: Target, reduction: int = 1) -> None:
    note(f"trace: {sch.trace_json()}")
    if os.environ.get("TT_PROPERTY_ASAN"):  # with LD_PRELOAD=$(gcc -print-file-name=libasan.so)
        print("trace:", sch.trace_json(), flush=True)
        kern = compile_with_asan(outputs, sch, target)
    else:
        kern = compile(outputs, sch, target)
    got = np.full(np.shape(expected), np.nan, dtype=np.float32)  # unwritten elements stay NaN
    kern(*inputs, out=got)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5 * (reduction + 10))


def compile_with_asan(outputs, sch: Schedule, target: Target) -> Kernel:
    """``compile`` with AddressSanitizer added to the schedule's flags (no schedule annotation
    can ask for it: annotations take only allowlisted flags)."""
    source, func = build_source(sch, kernel_name(outputs, as_outputs(outputs)), target)
    flags = [*schedule_flags(sch), "-fsanitize=address", "-fno-omit-frame-pointer"]
    path = compile_library(source, target, flags)
    return Kernel(path, func.name, arg_specs(func), source, target)


# -- random legal loop schedules -------------------------------------------------------------------
def loops(sch: Schedule, stage: str) -> list[str]:
    return [lp.name for lp in sch[stage].leaves]


def attachable(sch: Schedule, stage: str) -> list[str]:
    """Loops a producer may be computed at: neither vectorized nor unrolled."""
    notes = sch[stage].annotations
    return [n for n in loops(sch, stage) if notes.get(n) in (None, "parallel")]


def extent(sch: Schedule, stage: str, loop: str) -> int:
    return sch[stage].extents()[loop]


def random_splits(draw, sch: Schedule, stage: str) -> None:
    for name in loops(sch, stage):
        if draw(st.booleans()):
            sch.split(stage, name, draw(FACTORS))


def random_reorder(draw, sch: Schedule, stage: str) -> None:
    sch.reorder(stage, draw(st.permutations(loops(sch, stage))))


def attach_points(sch: Schedule, stage: str) -> set[str]:
    return {o.attach[2] for o in sch.stages if o.attach[:2] == ("at", stage)}


def random_fuse(draw, sch: Schedule, stage: str) -> None:
    """Fuse one random pair of adjacent loops of the same kind."""
    st_, busy = sch[stage], attach_points(sch, stage)
    pairs = [
        (a.name, b.name)
        for a, b in zip(st_.leaves, st_.leaves[1:], strict=False)
        if a.kind == b.kind and not {a.name, b.name} & (busy | st_.annotations.keys())
    ]
    if pairs and draw(st.booleans()):
        sch.fuse(stage, *draw(st.sampled_from(pairs)))


def random_vectorize(draw, sch: Schedule, stage: str) -> None:
    """Split the innermost loop by 4/8/16 (often not dividing it) and vectorize the inner part."""
    innermost = loops(sch, stage)[-1]
    if innermost not in attach_points(sch, stage) and draw(st.booleans()):
        _, inner = sch.split(stage, innermost, draw(LANES))
        sch.vectorize(stage, inner)


def random_unroll(draw, sch: Schedule, stage: str, budget: int = 64) -> None:
    st_ = sch[stage]
    for name in loops(sch, stage):
        n = extent(sch, stage, name)
        if name not in st_.annotations and n <= 8 and n <= budget and draw(st.booleans()):
            sch.unroll(stage, name)
            budget //= max(n, 1)


def random_parallel(draw, sch: Schedule, stage: str, outer: int = 2) -> None:
    st_ = sch[stage]
    spatial = [lp.name for lp in st_.leaves[:outer] if lp.kind == "spatial"]
    spatial = [n for n in spatial if n not in st_.annotations]
    if spatial and draw(st.booleans()):
        sch.parallel(stage, draw(st.sampled_from(spatial)))


def random_loop_nest(draw, sch: Schedule, stage: str) -> None:
    random_splits(draw, sch, stage)
    random_reorder(draw, sch, stage)
    random_fuse(draw, sch, stage)
    random_vectorize(draw, sch, stage)
    random_unroll(draw, sch, stage)
    random_parallel(draw, sch, stage)


# -- (a) matmul ------------------------------------------------------------------------------------
def matmul(M: int, N: int, K: int):
    A = te.placeholder((M, K), name="A")
    B = te.placeholder((K, N), name="B")
    k = te.reduce_axis(K, "k")
    C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    return A, B, C


def register_tile(draw, sch: Schedule, N: int) -> None:
    """The schedule of the README: register accumulator tile, packed B, vector copy-out."""
    sch.cache_write("C", "register")
    ti, tj = draw(st.sampled_from([1, 2, 4])), draw(LANES)
    io, jo, ii, ji = sch.tile("C", "i", "j", ti, tj)
    sch.compute_at("C_register", "C", jo)
    if draw(st.booleans()):
        ko, ki = sch.split("C_register", "k", draw(FACTORS))
        sch.reorder("C_register", [ko, ki, "i", "j"])
    else:
        sch.reorder("C_register", ["k", "i", "j"])
    sch.unroll("C_register", "i")
    sch.vectorize("C_register", "j")
    if draw(st.booleans()):
        sch.unroll("C", ii)
    sch.vectorize("C", ji)
    if draw(st.booleans()):
        sch.parallel("C", io)
    if draw(st.booleans()):
        sch.pack("B", "C_register", 1, tj, (1, 0, 2))


def local_tile(draw, sch: Schedule) -> None:
    """cache_write('local') computed at a random loop of a randomly tiled copy-out."""
    sch.cache_write("C", "local")
    io, jo, _ii, _ji = sch.tile("C", "i", "j", draw(FACTORS), draw(FACTORS))
    sch.compute_at("C_local", "C", draw(st.sampled_from([io, jo])))
    random_reorder(draw, sch, "C_local")
    random_vectorize(draw, sch, "C_local")
    random_unroll(draw, sch, "C_local")
    random_vectorize(draw, sch, "C")
    random_parallel(draw, sch, "C")


@SETTINGS
@given(M=DIMS, N=DIMS, K=DIMS, kind=st.sampled_from(["loops", "register", "local"]), data=st.data())
def test_matmul_random_schedule(target, M, N, K, kind, data):
    _A, _B, C = matmul(M, N, K)
    sch = Schedule(C)
    if kind == "register":
        register_tile(data.draw, sch, N)
    elif kind == "local":
        local_tile(data.draw, sch)
    else:
        random_loop_nest(data.draw, sch, "C")
        if data.draw(st.booleans()):
            name, axis = data.draw(st.sampled_from([("A", 0), ("A", 1), ("B", 0), ("B", 1)]))
            order = data.draw(st.permutations([0, 1, 2]))
            sch.pack(name, "C", axis, data.draw(FACTORS), order)
    rng = np.random.default_rng(M * 10007 + N * 101 + K)
    a, b = rand(rng, (M, K)), rand(rng, (K, N))
    check(sch, C, (a, b), a.astype(np.float64) @ b, target, reduction=K)


# -- (b) conv2d NCHW with stride, padding and groups -----------------------------------------------
def conv2d_nchw(shape, out_ch: int, ksize: int, stride: int, pad: int, groups: int):
    n, c, h, w = shape
    X = te.placeholder(shape, name="X")
    W = te.placeholder((out_ch, c // groups, ksize, ksize), name="W")
    P = te.compute(
        (n, c, h + 2 * pad, w + 2 * pad),
        lambda b, ch, y, x: te.select(
            (y >= pad) & (y < h + pad) & (x >= pad) & (x < w + pad),
            X[b, ch, y - pad, x - pad],
            0.0,
        ),
        name="pad",
    )
    oh, ow = (h + 2 * pad - ksize) // stride + 1, (w + 2 * pad - ksize) // stride + 1
    cg, kg = c // groups, out_ch // groups
    rc, rr, rs = te.reduce_axis(cg, "rc"), te.reduce_axis(ksize, "rr"), te.reduce_axis(ksize, "rs")
    O = te.compute(
        (n, out_ch, oh, ow),
        lambda b, k, y, x: te.sum(
            P[b, (k // kg) * cg + rc.var, y * stride + rr.var, x * stride + rs.var]
            * W[k, rc, rr, rs],
            axis=(rc, rr, rs),
        ),
        name="conv",
    )
    return X, W, O


def conv_reference(x, w, stride, pad, groups):
    n, _c, h, wd = x.shape
    out_ch, cg, ks, _ = w.shape
    kg = out_ch // groups
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = (h + 2 * pad - ks) // stride + 1, (wd + 2 * pad - ks) // stride + 1
    out = np.zeros((n, out_ch, oh, ow))
    for g in range(groups):
        xs = xp[:, g * cg : (g + 1) * cg]
        ws = w[g * kg : (g + 1) * kg].astype(np.float64)
        for r in range(ks):
            for s in range(ks):
                rows = slice(r, r + stride * (oh - 1) + 1, stride)
                cols = slice(s, s + stride * (ow - 1) + 1, stride)
                win = xs[:, :, rows, cols]
                out[:, g * kg : (g + 1) * kg] += np.einsum("nchw,kc->nkhw", win, ws[:, :, r, s])
    return out


@st.composite
def conv_shapes(draw):
    groups = draw(st.sampled_from([1, 1, 2, 3]))
    c = groups * draw(st.sampled_from([1, 2, 3]))
    out_ch = groups * draw(st.sampled_from([1, 2, 4]))
    ksize = draw(st.sampled_from([1, 3]))
    stride = draw(st.sampled_from([1, 2]))
    pad = draw(st.sampled_from([0, 1, 2]))
    h = draw(st.sampled_from([1, 5, 7, 13, 17]))
    w = draw(st.sampled_from([1, 6, 7, 13, 19]))
    if h + 2 * pad < ksize or w + 2 * pad < ksize:
        h, w = h + ksize, w + ksize
    n = draw(st.sampled_from([1, 2]))
    return (n, c, h, w), out_ch, ksize, stride, pad, groups


@SETTINGS
@given(
    conv=conv_shapes(),
    placement=st.sampled_from(["root", "inline", "at"]),
    data=st.data(),
)
def test_conv2d_random_schedule(target, conv, placement, data):
    shape, out_ch, ksize, stride, pad, groups = conv
    _X, _W, O = conv2d_nchw(shape, out_ch, ksize, stride, pad, groups)
    sch = Schedule(O)
    draw = data.draw
    random_splits(draw, sch, "conv")
    random_reorder(draw, sch, "conv")
    if placement == "inline":
        sch.compute_inline("pad")
    elif placement == "at":
        sch.compute_at("pad", "conv", draw(st.sampled_from(attachable(sch, "conv"))))
        random_reorder(draw, sch, "pad")
        random_vectorize(draw, sch, "pad")
    else:
        random_loop_nest(draw, sch, "pad")
    random_vectorize(draw, sch, "conv")
    random_unroll(draw, sch, "conv", budget=16)
    random_parallel(draw, sch, "conv")
    rng = np.random.default_rng(sum(shape) * 31 + out_ch)
    x = rand(rng, shape)
    w = rand(rng, (out_ch, shape[1] // groups, ksize, ksize))
    red = shape[1] // groups * ksize * ksize
    check(sch, O, (x, w), conv_reference(x, w, stride, pad, groups), target, reduction=red)


# -- (c) a fused elementwise chain -----------------------------------------------------------------
def chain(M: int, N: int, tail: str):
    A = te.placeholder((M, N), name="A")
    B = te.placeholder((M, N), name="B")
    bias = te.placeholder((N,), name="bias")
    D = te.compute((M, N), lambda i, j: A[i, j] * B[i, j] + bias[j], name="D")
    E = te.compute((M, N), lambda i, j: te.max(D[i, j], 0.0), name="E")
    if tail == "exp":
        F = te.compute((M, N), lambda i, j: te.exp(-E[i, j]) + E[i, j], name="F")
    else:
        F = te.compute((M, N), lambda i, j: te.tanh(E[i, j]) * 0.5 - D[i, j], name="F")
    return A, B, bias, F


def chain_reference(a, b, bias, tail):
    d = a.astype(np.float64) * b + bias
    e = np.maximum(d, 0.0)
    return np.exp(-e) + e if tail == "exp" else np.tanh(e) * 0.5 - d


@SETTINGS
@given(
    M=DIMS,
    N=DIMS,
    tail=st.sampled_from(["exp", "tanh"]),
    placements=st.tuples(*[st.sampled_from(["root", "inline", "at"])] * 2),
    data=st.data(),
)
def test_elementwise_chain_random_schedule(target, M, N, tail, placements, data):
    _A, _B, _bias, F = chain(M, N, tail)
    sch = Schedule(F)
    draw = data.draw
    random_splits(draw, sch, "F")
    random_reorder(draw, sch, "F")
    consumers = {"D": "E" if tail == "exp" else None, "E": "F"}
    for stage, placement in zip(["E", "D"], reversed(placements), strict=True):
        if placement == "inline":
            sch.compute_inline(stage)
        elif placement == "at" and consumers[stage] is not None:
            cons = consumers[stage]
            if sch[cons].attach == ("inline",) or not attachable(sch, cons):
                continue
            sch.compute_at(stage, cons, draw(st.sampled_from(attachable(sch, cons))))
            random_vectorize(draw, sch, stage)
        else:
            random_loop_nest(draw, sch, stage)
    random_vectorize(draw, sch, "F")
    random_unroll(draw, sch, "F", budget=16)
    random_parallel(draw, sch, "F")
    rng = np.random.default_rng(M * 37 + N)
    a, b, c = rand(rng, (M, N)), rand(rng, (M, N)), rand(rng, (N,))
    check(sch, F, (a, b, c), chain_reference(a, b, c, tail), target)


# -- (d) random requests, legal or not ------------------------------------------------------------
def random_request(draw, sch: Schedule) -> None:
    """One primitive with random arguments: it must either apply or raise ScheduleError."""
    stages = [s.name for s in sch.stages]
    stage = draw(st.sampled_from([*stages, *stages, "nope"]))
    names = loops(sch, stage) if stage != "nope" else []
    loop = draw(st.sampled_from([*names, *names, "zz"]))
    other = draw(st.sampled_from([*names, "zz"]))
    factor = draw(st.sampled_from([-1, 0, 1, 2, 3, 4, 4, 8, 8, 16]))
    kind = draw(
        st.sampled_from(
            ["split", "fuse", "reorder", "vectorize", "unroll", "parallel", "compute_at",
             "compute_inline", "compute_root", "cache_write", "pack"]
        )
    )  # fmt: skip
    try:
        if kind == "split":
            sch.split(stage, loop, factor)
        elif kind == "fuse":
            sch.fuse(stage, loop, other)
        elif kind == "reorder":
            sch.reorder(stage, draw(st.permutations(names)) if names else ["zz"])
        elif kind in ("vectorize", "unroll", "parallel"):
            getattr(sch, kind)(stage, loop)
        elif kind == "compute_at":
            consumer = draw(st.sampled_from([s.name for s in sch.stages]))
            sch.compute_at(stage, consumer, draw(st.sampled_from([*loops(sch, consumer), "zz"])))
        elif kind in ("compute_inline", "compute_root"):
            getattr(sch, kind)(stage)
        elif kind == "cache_write":
            sch.cache_write(stage, draw(st.sampled_from(["local", "register"])))
        else:
            tensor = draw(st.sampled_from(["A", "B", "P"]))
            sch.pack(tensor, stage, draw(st.sampled_from([None, 0, 1])), max(factor, 1))
    except ScheduleError:
        pass


@SETTINGS
@given(M=DIMS, N=DIMS, K=DIMS, data=st.data())
def test_random_requests_are_applied_or_refused_cleanly(target, M, N, K, data):
    """Whatever mix of primitives is accepted compiles to the right answer and replays."""
    A = te.placeholder((M, K), name="A")
    B = te.placeholder((K, N), name="B")
    P = te.compute((M, K), lambda i, k: A[i, k] * 2.0, name="P")
    k = te.reduce_axis(K, "k")
    C = te.compute((M, N), lambda i, j: te.sum(P[i, k] * B[k, j], axis=k), name="C")
    sch = Schedule(C)
    for _ in range(data.draw(st.integers(1, 30))):
        random_request(data.draw, sch)
    event(f"accepted {min(len(sch.trace) // 3 * 3, 9)}+ primitives")
    replayed = Schedule.from_trace(C, json.loads(sch.trace_json()))
    assert generate_c(lower(replayed, "k", 2)) == generate_c(lower(sch, "k", 2))
    rng = np.random.default_rng(M * 7 + N * 3 + K)
    a, b = rand(rng, (M, K)), rand(rng, (K, N))
    check(sch, C, (a, b), (2.0 * a.astype(np.float64)) @ b, target, reduction=K)
