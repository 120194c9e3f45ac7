"""Register tiles wider than the output row (28 columns in a 32-wide tile, 14 in a 16-wide one,
7 in an 8-wide one: the late stages of depthwise and grouped convs) are held in registers: the
tile's rows are whole vectors, and the lanes past the row are one masked operation, which never
reads or writes past a buffer and agrees with NumPy."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tensortune as tt
from tensortune.space import design_space

from .test_properties import SETTINGS
from .test_strided_loads import default_source
from .test_tails import ISAS
from .test_tails import isa_target as isa_target  # a fixture

# zoo shapes whose default tile is wider than the output row (see tensortune.workload.zoo)
WIDER_THAN_THE_ROW = [
    "depthwise_conv2d:C=144,H=28,W=28,R=3,S=3,pad=1",
    "depthwise_conv2d:C=240,H=14,W=14,R=5,S=5,pad=2",
    "depthwise_conv2d:C=672,H=7,W=7,R=5,S=5,pad=2",
    "depthwise_conv2d:C=192,H=28,W=28,R=3,S=3,pad=1,stride=2",
    "conv2d:C=64,H=14,W=14,K=64,R=3,S=3,pad=1,groups=16",  # 4 channels a group: column tiles
]


@pytest.mark.parametrize("isa", ["avx2", "avx512"])
@pytest.mark.parametrize("spec", WIDER_THAN_THE_ROW)
def test_default_tile_is_named_variables_with_one_masked_tail_per_row(isa, spec):
    """The C for another CPU, read as text: the tile is vector variables; its last vector per
    row is updated from one masked load (a strided one at stride 2) and written back by one
    masked store; no tile in memory and no lane-by-lane loop. (With the padded copy: grouped
    convs' default reads the input directly under the padding tests, every load masked.)"""
    src = default_source(spec, isa, inline_pad=False)
    assert "held in registers" in src and "kept in memory" not in src
    assert "fell back to scalar" not in src and "lane by lane" not in src
    lanes = design_space(tt.workload(spec), tt.Target.cross(isa)).default["lanes"]
    update = rf"(conv2d_register_v\d+) = \(\1 \+ \(tt_maskload\d?_f32x{lanes}\(&X_pad\["
    assert re.search(update, src), "no masked update of a register variable"
    assert re.search(rf"tt_maskstore_f32x{lanes}\(&conv2d\[[^;]*, conv2d_register_v\d+\);", src)


def _config(space, out_width: int, lanes: int, rows: int, inline_pad: bool) -> dict:
    """The default with a tile of ``lanes``-wide vectors (fewer where the target has fewer)
    just covering the output row."""
    lanes = min(lanes, space.target.lanes("float32"))
    vectors = -(-out_width // lanes)
    tile = {"lanes": lanes, "vectors": vectors, "rows": rows, "inline_pad": inline_pad}
    return {**space.default, "vector_axis": "columns", **tile}


@settings(SETTINGS, max_examples=min(SETTINGS.max_examples, 12))
@given(
    width=st.sampled_from([5, 7, 13, 14, 17, 28]),
    window=st.sampled_from([(3, 1), (5, 2)]),
    stride=st.sampled_from([1, 2]),
    groups=st.sampled_from([None, 2]),  # depthwise, or 2 groups of 3 channels
    lanes=st.sampled_from([8, 16]),
    rows=st.sampled_from([1, 2]),
    inline_pad=st.booleans(),
)
def test_tiles_wider_than_the_row_match_numpy(
    isa_target, width, window, stride, groups, lanes, rows, inline_pad
):
    """Depthwise and grouped convs over rows of 3 to 28 output columns, each with the one tile
    of whole vectors covering its row, against NumPy (an unwritten output element stays NaN)."""
    r, pad = window
    if groups is None:
        spec = f"depthwise_conv2d:C=6,H=5,W={width},R={r},S={r},pad={pad},stride={stride}"
    else:
        spec = f"conv2d:C=6,H=5,W={width},K=6,R={r},S={r},pad={pad},stride={stride},groups=2"
    wl = tt.workload(spec)
    space = design_space(wl, isa_target)
    out_width = (width + 2 * pad - r) // stride + 1
    config = _config(space, out_width, lanes, rows, inline_pad)
    kern = tt.compile(wl, schedule=space.schedule(config), target=isa_target)
    assert "kept in memory" not in kern.source
    inputs = wl.random_inputs(width)
    got = np.full(wl.outputs[0].shape, np.nan, dtype=np.float32)  # unwritten stays NaN
    kern(*inputs, out=got)
    np.testing.assert_allclose(got, wl.reference(inputs), rtol=1e-4, atol=1e-4)


AT_GUARD_PAGES = """
import ctypes, json, mmap, sys
import numpy as np
import tensortune as tt
from tensortune.space import design_space

spec, config, isa = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
target = tt.Target.cross(isa, num_threads=1)
wl = tt.workload(spec)
space = design_space(wl, target)
kernel = tt.compile(wl, schedule=space.schedule({**space.default, **config}), target=target)
assert "tt_maskload" in kernel.source and "kept in memory" not in kernel.source


def at_guard_page(shape):
    # a float32 array whose last element is the last byte before a PROT_NONE page
    n = int(np.prod(shape))
    pages = -(-n * 4 // mmap.PAGESIZE) + 1
    memory = mmap.mmap(-1, pages * mmap.PAGESIZE)
    start = ctypes.addressof(ctypes.c_char.from_buffer(memory))
    guard = start + (pages - 1) * mmap.PAGESIZE
    assert ctypes.CDLL(None).mprotect(ctypes.c_void_p(guard), mmap.PAGESIZE, 0) == 0
    keep.append(memory)
    return np.frombuffer(memory, np.float32, n, guard - start - n * 4).reshape(shape)


keep = []
inputs = []
for x in wl.random_inputs(0):
    inputs.append(at_guard_page(x.shape))
    inputs[-1][...] = x
out = at_guard_page(wl.outputs[0].shape)
kernel(*inputs, out=out)
assert np.allclose(out, wl.reference(inputs), rtol=1e-4, atol=1e-4)
print("ok")
"""


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize(
    ("spec", "config"),
    [
        ("depthwise_conv2d:C=3,H=7,W=7,R=5,S=5,pad=2", {"lanes": 8, "vectors": 1}),
        ("depthwise_conv2d:C=3,H=28,W=28,R=3,S=3,pad=1,stride=2", {"lanes": 8, "vectors": 2}),
        ("conv2d:C=4,H=6,W=14,K=4,R=3,S=3,pad=1,groups=2", {"lanes": 8, "vectors": 2}),
    ],
)
def test_masked_tails_never_touch_past_an_input_or_output_ending_at_an_unmapped_page(
    isa, spec, config
):
    """The pad inlined, so the tile's masked loads read the input itself: with every input
    and the output ending right before a PROT_NONE page, a lane past the row that was loaded
    or stored would segfault (in a subprocess, so the test fails cleanly)."""
    config = {**config, "vector_axis": "columns", "inline_pad": True, "rows": 1}
    run = subprocess.run(
        [sys.executable, "-c", AT_GUARD_PAGES, spec, json.dumps(config), isa],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0 and run.stdout.strip() == "ok", (run.returncode, run.stderr[-2000:])
