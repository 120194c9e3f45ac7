"""Strided windows (stride 2 to 4: pools, depthwise convs, patchify stems) read their input as
contiguous loads and shuffles (``tt_load<k>_``; in a masked tail ``tt_maskload<k>_``), never
lane by lane, and never past the buffer."""

from __future__ import annotations

import re
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tensortune as tt
from tensortune.codegen import generate_c
from tensortune.lower import lower
from tensortune.pipeline import compile
from tensortune.schedule import Schedule
from tensortune.space import design_space
from tensortune.target import Target

from .test_properties import SETTINGS, conv2d_nchw, conv_reference, rand
from .test_tails import ISAS
from .test_tails import isa_target as isa_target  # a fixture

# a vector built element by element: ((f32x16){X[...], X[...], ...})
GATHER = re.compile(r"\(\(f32x\d+\)\{\w+\[")


# a conv's register tile along output columns (its default runs vectors along output channels)
COLUMNS = {"vector_axis": "columns", "rows": 2, "vectors": 4, "lanes": 8, "parallel_fuse": False}


def default_source(spec: str, isa: str, **overrides) -> str:
    target = Target.cross(isa, num_threads=2)
    space = design_space(tt.workload(spec), target)
    return generate_c(lower(space.schedule({**space.default, **overrides}), "k", 2))


@pytest.mark.parametrize("isa", ["avx2", "avx512"])
@pytest.mark.parametrize(
    ("spec", "stride", "overrides"),
    [
        ("maxpool2d:C=8,H=50,W=50,R=3,S=3,stride=3", 3, {}),
        ("maxpool2d:C=8,H=65,W=65,R=4,S=4,stride=4", 4, {}),
        ("depthwise_conv2d:C=8,H=64,W=64,R=5,S=5,stride=4,pad=2", 4, {}),
        # a ConvNeXt-style 4x4/4 patchify stem with its vectors along output columns
        ("conv2d:C=3,H=128,W=128,K=16,R=4,S=4,stride=4", 4, COLUMNS),
        ("depthwise_conv2d:C=8,H=33,W=33,R=3,S=3,stride=2,pad=1", 2, {}),
    ],
)
def test_strided_window_reads_are_loads_and_shuffles_not_gathers(isa, spec, stride, overrides):
    """The C for another CPU, read as text: the window read is one strided-load helper per
    vector, built from contiguous loads, and no vector is assembled element by element."""
    src = default_source(spec, isa, **overrides)
    used = re.search(rf"tt_load{stride}_f32x(\d+)\(&", src)
    assert used, "no strided load"
    assert not GATHER.search(src), GATHER.search(src)
    lanes = int(used.group(1))
    helper = src.split(f"tt_load{stride}_f32x{lanes}(const float* p) {{")[1].split("\n}")[0]
    loads = [int(at or 0) for at in re.findall(rf"tt_load_f32x{lanes}\(p(?: \+ (\d+))?\)", helper)]
    span = stride * (lanes - 1) + 1
    assert len(loads) == -(-span // lanes)
    assert max(loads) + lanes == span  # the last load ends at the last lane's element


@settings(SETTINGS, max_examples=min(SETTINGS.max_examples, 12))
@given(
    stride=st.sampled_from([3, 4]),
    ksize=st.sampled_from([1, 3, 4, 5]),
    pad=st.sampled_from([0, 1, 2]),
    width=st.sampled_from([29, 67, 100]),
    lanes=st.sampled_from([8, 16]),
    groups=st.sampled_from([1, 2]),
    inline_pad=st.booleans(),
)
def test_strided_convolutions_match_numpy(
    isa_target, stride, ksize, pad, width, lanes, groups, inline_pad
):
    """Convs at stride 3 and 4 vectorized along the output columns (full vectors read with
    strided loads, the ragged tail lane by lane) against NumPy."""
    shape, out_ch = (1, 2 * groups, 7, width), 2 * groups
    _X, _W, O = conv2d_nchw(shape, out_ch, ksize, stride, pad, groups)
    sch = Schedule(O)
    if inline_pad:
        sch.compute_inline("pad")
    b, k, y, x, rc, rr, rs = (lp.name for lp in sch["conv"].leaves)
    xo, xi = sch.split("conv", x, lanes)
    sch.reorder("conv", [b, k, y, xo, rc, rr, rs, xi])
    sch.vectorize("conv", xi)
    kern = compile(O, sch, isa_target)
    if O.shape[3] >= lanes:
        assert f"tt_load{stride}_" in kern.source
    rng = np.random.default_rng(stride * 1000 + width + ksize)
    xs, ws = rand(rng, shape), rand(rng, (out_ch, shape[1] // groups, ksize, ksize))
    got = kern(xs, ws)
    red = shape[1] // groups * ksize * ksize
    want = conv_reference(xs, ws, stride, pad, groups)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5 * (red + 10))


@pytest.mark.parametrize(
    "spec",
    [
        "maxpool2d:C=5,H=50,W=47,R=3,S=3,stride=3",
        "maxpool2d:C=3,H=36,W=70,R=4,S=4,stride=4,pad=1",
        "depthwise_conv2d:C=6,H=20,W=71,R=5,S=5,stride=4,pad=2",
        "depthwise_conv2d:C=4,H=17,W=52,R=3,S=3,stride=3",
    ],
)
def test_strided_window_design_space_defaults_match_numpy(isa_target, spec):
    wl = tt.workload(spec)
    space = design_space(wl, isa_target)
    kern = tt.compile(wl, schedule=space.schedule(space.default), target=isa_target)
    inputs = wl.random_inputs(0)
    np.testing.assert_allclose(kern(*inputs), wl.reference(inputs), rtol=1e-4, atol=1e-4)


AT_A_GUARD_PAGE = """
import ctypes, mmap, sys
import numpy as np
import tensortune.te as te
from tensortune.pipeline import compile
from tensortune.schedule import Schedule
from tensortune.target import Target

stride, lanes, n, isa = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
size = stride * (n - 1) + 1
A = te.placeholder((size,), name="A")
B = te.compute((n,), lambda i: A[stride * i] * 2.0, name="B")
s = Schedule(B)
_, inner = s.split("B", "i", lanes)
s.vectorize("B", inner)
kernel = compile(B, s, Target.cross(isa, num_threads=1))
assert f"tt_load{stride}_" in kernel.source, kernel.source
assert (n % lanes != 0) == (f"tt_maskload{stride}_" in kernel.source), kernel.source
page = mmap.PAGESIZE
memory = mmap.mmap(-1, 2 * page)
start = ctypes.addressof(ctypes.c_char.from_buffer(memory))
assert ctypes.CDLL(None).mprotect(ctypes.c_void_p(start + page), page, 0) == 0
a = np.frombuffer(memory, np.float32, size, page - size * 4)  # ends at the guard page
a[:] = np.arange(size, dtype=np.float32)
assert np.array_equal(kernel(a), 2 * a[::stride])
print("ok")
"""


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize(
    ("stride", "lanes", "n"), [(3, 8, 16), (4, 16, 37), (2, 16, 21), (2, 8, 13), (2, 8, 16)]
)
def test_strided_loads_never_read_past_an_input_ending_at_an_unmapped_page(isa, stride, lanes, n):
    """The last full vector's last load ends at its last lane's element, and a masked tail's
    loads at its last active lane's: with the input's last element right before a PROT_NONE
    page, one element more would segfault."""
    run = subprocess.run(
        [sys.executable, "-c", AT_A_GUARD_PAGE, str(stride), str(lanes), str(n), isa],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0 and run.stdout.strip() == "ok", (run.returncode, run.stderr[-2000:])


def test_a_strided_tail_is_one_masked_strided_load():
    """A stride-2 pool over 73 output columns (tiles of 32) and a stride-2 depthwise conv over
    28 columns (a 32-wide tile: its rows are whole vectors, so the tile is held in registers):
    the tail's window read is one masked strided load, never a scalar loop."""
    for spec in (
        "maxpool2d:C=64,H=147,W=147,R=3,S=3,stride=2",
        "depthwise_conv2d:C=144,H=56,W=56,R=3,S=3,pad=1,stride=2",
    ):
        src = default_source(spec, "avx2")
        assert re.search(r"tt_maskload2_f32x8\(&X(_pad)?\[", src), spec
        assert "fell back to scalar" not in src and "lane by lane" not in src, spec
        assert "kept in memory" not in src, spec


def test_avx2_stride_2_reads_deinterleave_in_two_fixed_shuffles():
    """AVX2's stride-2 read of eight lanes (both gcc spellings, full and masked): one shuffle
    that keeps every lane in its 128-bit half (a ``vshufps``), then one of 64-bit pairs (a
    ``vpermpd``), neither needing an index vector in a register; applied to the two loads
    (elements 0-7 and 7-14) they give elements 0, 2, ..., 14."""
    src = default_source("depthwise_conv2d:C=144,H=56,W=56,R=5,S=5,pad=2,stride=2", "avx2")
    for helper in ("tt_load2_f32x8(const float* p)", "tt_maskload2_f32x8(const float* p, "):
        gcc = src.split(helper)[1].split("#else\n")[1].split("#endif")[0]
        halves, pairs = (
            [int(x) for x in found.split(", ")]
            for found in re.findall(r"\n  r = .*__builtin_shuffle\(.*\{([\d, ]+)\}\);", gcc)
        )
        assert "(tt_d4)r" in gcc and len(pairs) == 4, gcc  # a permutation of 64-bit pairs
        assert all(j % 8 // 4 == i // 4 for i, j in enumerate(halves)), halves
        v0, v1 = list(range(8)), list(range(7, 15))
        within = [(v0 + v1)[j] for j in halves]
        assert [x for q in pairs for x in within[2 * q : 2 * q + 2]] == list(range(0, 15, 2))
