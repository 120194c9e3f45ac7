"""Lowering: printed loop IR of small schedules, guards, and bound inference of attached stages."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tensortune.te as te
from tensortune.errors import LoweringError
from tensortune.ir.nodes import Allocate, For, IfThen, walk_stmts
from tensortune.ir.printer import format_stmt
from tensortune.lower import build_nest, lower
from tensortune.lower.bounds import read_range, region_of_reads
from tensortune.pipeline import compile
from tensortune.schedule import Schedule
from tensortune.target import Target
from tensortune.te.expr import Const, Var


def matmul(M: int, N: int, K: int):
    A = te.placeholder((M, K), name="A")
    B = te.placeholder((K, N), name="B")
    k = te.reduce_axis(K, "k")
    return te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")


def golden(text: str) -> str:
    return textwrap.dedent(text).strip("\n")


def test_tiled_matmul_golden():
    C = matmul(8, 8, 4)
    s = Schedule(C)
    io, jo, ii, ji = s.tile("C", "i", "j", 4, 4)
    s.reorder("C", [io, jo, "k", ii, ji])
    s.parallel("C", io)
    s.vectorize("C", ji)
    assert format_stmt(lower(s, "mm", 2)) == golden(
        """
        def mm(A: float32[8, 4], B: float32[4, 8], C: float32[8, 8]):
          # stage C
          for i_o in range(2):  # parallel
            for j_o in range(2):
              for i_i in range(4):
                C[(i_i + (i_o * 4)), (j_i + (j_o * 4))] = 0.0  # vector: j_i in range(4)
              for k in range(4):
                for i_i in range(4):
                  C[(i_i + (i_o * 4)), (j_i + (j_o * 4))] = (C[(i_i + (i_o * 4)), (j_i + (j_o * 4))] + (A[(i_i + (i_o * 4)), k] * B[k, (j_i + (j_o * 4))]))  # vector: j_i in range(4)
        """  # noqa: E501
    )


def test_cache_write_local_golden():
    C = matmul(8, 16, 4)
    s = Schedule(C)
    s.cache_write("C", "local")
    _, jo, _, _ = s.tile("C", "i", "j", 2, 8)
    s.compute_at("C_local", "C", jo)
    assert format_stmt(lower(s, "mm")) == golden(
        """
        def mm(A: float32[8, 4], B: float32[4, 16], C: float32[8, 16]):
          # stage C
          for i_o in range(4):
            for j_o in range(2):
              alloc C_local: float32[2, 8] (local)
              # C_local: computed at C.j_o
              for i in range(2):
                for j in range(8):
                  C_local[i, j] = 0.0
                  for k in range(4):
                    C_local[i, j] = (C_local[i, j] + (A[(i + (i_o * 2)), k] * B[k, (j + (j_o * 8))]))
              for i_i in range(2):
                for j_i in range(8):
                  C[(i_i + (i_o * 2)), (j_i + (j_o * 8))] = C_local[i_i, j_i]
        """  # noqa: E501
    )


def test_non_divisible_split_guard_sits_inside_the_loop_it_depends_on():
    C = matmul(10, 8, 4)
    s = Schedule(C)
    s.split("C", "i", 4)
    assert format_stmt(lower(s, "mm")) == golden(
        """
        def mm(A: float32[10, 4], B: float32[4, 8], C: float32[10, 8]):
          # stage C
          for i_o in range(3):
            for i_i in range(4):
              if ((i_i + (i_o * 4)) < 10):
                for j in range(8):
                  C[(i_i + (i_o * 4)), j] = 0.0
                  for k in range(4):
                    C[(i_i + (i_o * 4)), j] = (C[(i_i + (i_o * 4)), j] + (A[(i_i + (i_o * 4)), k] * B[k, j]))
        """  # noqa: E501
    )


def test_divisible_split_has_no_guard():
    C = matmul(16, 16, 16)
    s = Schedule(C)
    s.tile("C", "i", "j", 4, 8)
    s.split("C", "k", 4)
    func = lower(s, "mm")
    assert not any(isinstance(x, IfThen) for x in walk_stmts(func.body))


def test_parameters_are_inputs_then_outputs_and_temporaries_are_root_intermediates():
    A = te.placeholder((4, 4), name="A")
    B = te.compute((4, 4), lambda i, j: A[i, j] + 1.0, name="B")
    C = te.compute((4, 4), lambda i, j: B[j, i] * 2.0, name="C")
    func = lower(Schedule(C), "k")
    assert [b.name for b in func.params] == ["A", "C"]
    assert [b.name for b in func.outputs] == ["C"]
    assert [b.name for b in func.temporaries] == ["B"]
    s = Schedule(C)
    s.compute_inline("B")
    inlined = lower(s, "k")
    assert inlined.temporaries == ()
    assert "A[j, i] + 1.0" in format_stmt(inlined)


# -- bound inference -------------------------------------------------------------------------------
def test_stencil_region_of_an_attached_stage():
    X = te.placeholder((10,), name="X")
    sq = te.compute((10,), lambda i: X[i] * 2.0, name="Sq")
    out = te.compute((8,), lambda i: sq[i] + sq[i + 2], name="St")
    s = Schedule(out)
    io, _ = s.split("St", "i", 4)
    s.compute_at("Sq", "St", io)
    assert format_stmt(lower(s, "st")) == golden(
        """
        def st(X: float32[10], St: float32[8]):
          # stage St
          for i_o in range(2):
            alloc Sq: float32[6] (local)
            # Sq: computed at St.i_o
            for i in range(6):
              Sq[i] = (X[(i + (i_o * 4))] * 2.0)
            for i_i in range(4):
              St[(i_i + (i_o * 4))] = (Sq[i_i] + Sq[(i_i + 2)])
        """
    )


def _allocations(func):
    return {x.buffer.name: x.buffer for x in walk_stmts(func.body) if isinstance(x, Allocate)}


def test_strided_window_region_of_an_attached_pad_stage():
    """A 3x3 stride-2 window over 4 output rows needs 2*(4-1)+3 = 9 padded rows (and 8 output
    columns 2*7+3 = 17 of the 18 padded ones)."""
    X = te.placeholder((1, 2, 16, 16), name="X")
    pad = te.compute(
        (1, 2, 18, 18),
        lambda n, c, y, x: te.select(
            (y >= 1) & (y < 17) & (x >= 1) & (x < 17), X[n, c, y - 1, x - 1], 0.0
        ),
        name="pad",
    )
    W = te.placeholder((4, 2, 3, 3), name="W")
    rc, rr, rs = te.reduce_axis(2, "rc"), te.reduce_axis(3, "rr"), te.reduce_axis(3, "rs")
    O = te.compute(
        (1, 4, 8, 8),
        lambda n, k, y, x: te.sum(
            pad[n, rc.var, y * 2 + rr.var, x * 2 + rs.var] * W[k, rc, rr, rs], axis=(rc, rr, rs)
        ),
        name="conv",
    )
    s = Schedule(O)
    yo, _ = s.split("conv", "y", 4)
    s.compute_at("pad", "conv", yo)
    assert _allocations(lower(s))["pad"].shape == (1, 2, 9, 17)
    s = Schedule(O)
    s.compute_at("pad", "conv", "x")  # one output pixel: one 3x3 window in every channel
    assert _allocations(lower(s))["pad"].shape == (1, 2, 3, 3)
    s = Schedule(O)
    s.compute_at("pad", "conv", "rc")  # inside the channel loop: one channel
    assert _allocations(lower(s))["pad"].shape == (1, 1, 3, 3)


def test_region_grows_over_the_loops_inside_the_attach_point():
    C = matmul(16, 16, 8)
    s = Schedule(C)
    s.cache_write("C", "local")
    io, _jo, _, _ = s.tile("C", "i", "j", 4, 8)
    s.compute_at("C_local", "C", io)  # every j_o inside: a 4 x 16 band
    assert _allocations(lower(s))["C_local"].shape == (4, 16)


def test_read_range_and_region_of_reads():
    i, io, ii = Var("i"), Var("io"), Var("ii")
    lo, ext = read_range(io * 4 + ii + 2, {ii: 4}, {io: 3})
    assert ext == 4
    assert lo == (io * 4 + 2) or str(lo) == str(io * 4 + Const(2))
    # two reads [x, x+4) and [x+2, x+6) union to [x, x+6)
    region = region_of_reads([(io * 4 + ii,), (io * 4 + ii + 2,)], (100,), {ii: 4}, {io: 20})
    assert region[0][1] == 6
    # a window wider than the tensor is clamped to the whole tensor
    region = region_of_reads([(ii * 3,)], (8,), {ii: 4}, {})
    assert region == ((Const(0), 8),)
    # a read the varying loop does not touch has extent 1
    assert read_range(i * 2, {ii: 4}, {i: 5})[1] == 1


# -- a stage with several readers computed at one loop ------------------------------------------
def shifted_sum(M: int, N: int):
    """P is read by Y at [i, j] and by Q at [i, j + 2]; Q is read by Y."""
    X = te.placeholder((M, N + 2), name="X")
    P = te.compute((M, N + 2), lambda i, j: X[i, j] * 3.0, name="P")
    Q = te.compute((M, N), lambda i, j: P[i, j + 2] - 1.0, name="Q")
    Y = te.compute((M, N), lambda i, j: P[i, j] + Q[i, j], name="Y")
    return Y


def _shared_schedule(Y, at_row: bool, block: int, lanes: int | None) -> Schedule:
    s = Schedule(Y)
    jo, ji = s.split("Y", "j", block)
    at = "i" if at_row else jo
    s.compute_at("Q", "Y", at if at_row else ji)  # the other reader: at or inside the loop
    s.compute_at("P", "Y", at)
    for name in ("P", "Q") if lanes else ():
        _, inner = s.split(name, "j", lanes)
        s.vectorize(name, inner)
    return s


def test_region_of_a_shared_stage_is_the_union_of_its_readers_needs():
    Y = shifted_sum(8, 16)
    # per row: Y needs P[i, 0:16], Q needs P[i, 2:18]
    assert _allocations(lower(_shared_schedule(Y, True, 4, 4)))["P"].shape == (1, 18)
    # per 4 columns: Y needs P[i, 4jo : 4jo+4], Q (inside j_i) needs P[i, 4jo+2 : 4jo+6]
    assert _allocations(lower(_shared_schedule(Y, False, 4, None)))["P"].shape == (1, 6)


def test_shared_stage_is_computed_before_all_its_readers():
    Y = shifted_sum(8, 16)
    text = format_stmt(lower(_shared_schedule(Y, False, 4, 2)))
    assert text.index("# P: computed at Y.j_o") < text.index("# Q: computed at Y.j_i")


@settings(max_examples=12, deadline=None)
@given(
    m=st.integers(1, 9),
    n=st.integers(1, 40),
    at_row=st.booleans(),
    block=st.sampled_from([1, 3, 4, 8]),
    lanes=st.sampled_from([None, 2, 4, 8]),
)
def test_shared_stage_matches_numpy(m, n, at_row, block, lanes):
    Y = shifted_sum(m, n)
    x = np.random.default_rng(m * 100 + n).uniform(-1, 1, (m, n + 2)).astype(np.float32)
    p = x.astype(np.float64) * 3.0
    expected = p[:, :n] + (p[:, 2:] - 1.0)
    kern = compile(Y, _shared_schedule(Y, at_row, block, lanes), Target.detect(num_threads=2))
    np.testing.assert_allclose(kern(x), expected, rtol=1e-5, atol=1e-5)


def test_unroll_limit_of_an_attached_stage_applies_to_its_region():
    """A split of an attached stage's loop is as long as the region it produces, not the root:
    unrolling it is fine where the region is small and a lowering error where it is not."""
    X = te.placeholder((4096,), name="X")
    sq = te.compute((4096,), lambda i: X[i] * 2.0, name="Sq")
    out = te.compute((4096,), lambda i: sq[i] + 1.0, name="Out")
    for block, ok in ((64, True), (4096, False)):
        s = Schedule(out)
        io, _ = s.split("Out", "i", block)
        s.compute_at("Sq", "Out", io)
        outer, _ = s.split("Sq", "i", 4)
        s.unroll("Sq", outer)  # 1024 iterations at root; block/4 where it is computed
        if ok:
            loops = [x for x in walk_stmts(build_nest(s, "f").body) if isinstance(x, For)]
            assert any(x.kind == "unrolled" and x.extent == block // 4 for x in loops)
        else:
            with pytest.raises(LoweringError, match="extent 1024 where it is computed"):
                lower(s, "f")


def test_ragged_register_tile_runs_an_unguarded_reduction_away_from_the_edge():
    """Guards of a ragged register tile that only its unrolled/vector loops vary are checked
    once outside the reduction: interior tiles get a k loop with no guard in it, edge tiles
    (a ragged row edge, a ragged column edge) guarded ones, and all compute the right answer."""
    import tensortune as tt
    from tensortune.space.registry import design_space

    target = Target.detect(num_threads=1)
    wl = tt.workload("matmul:M=10,N=20,K=8")
    ds = design_space(wl, target)
    config = {**ds.default, "variant": "tile", "mr": 4, "nr_vectors": 1, "pack_b": False}
    config["pack_at"] = "root"
    sch = ds.schedule(config)
    k_loops = [
        x for x in walk_stmts(lower(sch, "f").body) if isinstance(x, For) and "k" in x.var.name
    ]
    guarded = [any(isinstance(x, IfThen) for x in walk_stmts(loop.body)) for loop in k_loops]
    assert guarded.count(False) == 1 and guarded.count(True) >= 1
    inputs = wl.random_inputs(0)
    got = compile(wl.outputs, sch, target)(*inputs)
    np.testing.assert_allclose(got, wl.reference(inputs), rtol=1e-5, atol=1e-5)
