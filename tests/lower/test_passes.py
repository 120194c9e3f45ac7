"""Each lowering pass alone, on small hand-built loop nests, and the notes of decisions that
cannot take effect (no silent drops)."""

from __future__ import annotations

import numpy as np
import pytest

import tensortune.te as te
from tensortune.codegen import generate_c
from tensortune.ir.nodes import Allocate, Buffer, Comment, For, IfThen, Store, seq, walk_stmts
from tensortune.lower import lower
from tensortune.lower.facts import Facts
from tensortune.lower.parallel import parallel_loops
from tensortune.lower.registers import promote_registers
from tensortune.lower.unroll import unroll
from tensortune.lower.unswitch import unswitch
from tensortune.lower.vectorize import vectorize
from tensortune.pipeline import compile
from tensortune.schedule import Schedule
from tensortune.te.expr import Const, TensorRead, Var

A = Buffer("A", (64,), "float32")


def _stmts(s, kind):
    return [x for x in walk_stmts(s) if isinstance(x, kind)]


def test_facts_use_integer_rounding():
    i = Var("i")
    edge = Facts().assume(i * 6 + 5 < 64, False)  # 6i >= 59, so i >= 10
    assert edge.decide(i * 6 + 4 < 64) is False
    assert Facts().assume(i * 6 + 5 < 64, True).decide(i * 6 + 4 < 64) is True
    assert Facts().decide(i * 6 + 4 < 64) is None


def test_unroll_replicates_with_constants_and_drops_decided_guards():
    i = Var("i")
    body = IfThen(i < 3, Store(A, (i,), Const(1.0, "float32")))
    out = unroll(For(i, 4, "unrolled", body))
    stores = _stmts(out, Store)
    assert [s.indices[0] for s in stores] == [Const(0), Const(1), Const(2)]
    assert not _stmts(out, IfThen) and not _stmts(out, For)


def test_unswitch_hoists_an_invariant_guard_once_without_unreachable_copies():
    i, j = Var("i"), Var("j")
    inner = seq(
        [
            IfThen(i * 6 + 5 < 64, Store(A, (j,), Const(1.0, "float32"))),
            IfThen(i * 6 + 4 < 64, Store(A, (j,), Const(2.0, "float32"))),
        ]
    )
    out = unswitch(For(i, 11, "serial", For(j, 8, "serial", inner)))
    (top,) = [x for x in walk_stmts(out) if isinstance(x, IfThen)]  # one test, no nested ones
    assert top.orelse is not None
    # the edge copy (6i + 5 >= 64, so i = 10) knows 6i + 4 < 64 is false too: no store left
    assert not _stmts(top.orelse, Store)
    assert len(_stmts(top.body, Store)) == 2


def test_parallel_on_a_loop_of_extent_one_is_noted():
    i = Var("i")
    out = parallel_loops(For(i, 1, "parallel", Store(A, (i,), Const(0.0, "float32"))), 2)
    assert "parallel on loop i of extent 1: runs on one thread" in [
        c.text for c in _stmts(out, Comment)
    ]
    assert all(f.kind == "serial" for f in _stmts(out, For))


def test_vectorize_splits_a_tail_and_notes_a_scalar_fallback():
    v, o = Var("v"), Var("o")
    guarded = IfThen(o * 8 + v < 60, Store(A, (o * 8 + v,), Const(1.0, "float32")))
    out = vectorize(For(o, 8, "serial", For(v, 8, "vectorized", guarded)))
    (split,) = _stmts(out, IfThen)[:1]
    assert isinstance(split.body, For) and split.body.kind == "vectorized"
    assert not _stmts(split.body, IfThen)
    assert "vector tail: masked" in [c.text for c in _stmts(split.orelse, Comment)]
    (tail,) = _stmts(split.orelse, For)
    assert tail.kind == "vectorized" and isinstance(tail.body, IfThen)  # the mask: o*8+v < 60
    scalar = vectorize(For(o, 8, "serial", For(v, 8, "vectorized", guarded)), masked=False)
    notes = [c.text for c in _stmts(scalar, Comment)]
    assert notes == ["vector tail: lane by lane (masked tails are off for this target)"]
    odd = vectorize(For(v, 6, "vectorized", Store(A, (v,), Const(1.0, "float32"))))
    notes = [c.text for c in _stmts(odd, Comment)]
    assert notes == ["vectorize v fell back to scalar: 6 lanes is not a power of two up to 64"]


def test_promote_registers_keeps_a_non_constant_tile_in_memory():
    i = Var("i")
    tile = Buffer("T", (4,), "float32", "register")
    body = For(i, 4, "serial", Store(tile, (i,), Const(0.0, "float32")))
    out = promote_registers(Allocate(tile, body))
    assert isinstance(out, Allocate) and out.buffer.scope == "local"
    assert "register tile T kept in memory" in _stmts(out, Comment)[0].text
    ok = promote_registers(Allocate(tile, Store(tile, (Const(1),), TensorRead(A, (Const(0),)))))
    assert ok.buffer.scope == "register"


def test_c_notes_extent_one_parallel_and_vector_fallback_and_still_computes():
    X = te.placeholder((1, 34), name="X")
    P = te.compute((1, 34), lambda i, j: X[i, j] * 2.0, name="P")
    Y = te.compute((1, 32), lambda i, j: P[i, j] + P[i, j + 2], name="Y")
    s = Schedule(Y)
    s.parallel("Y", "i")  # extent 1
    jo, _ = s.split("Y", "j", 4)
    s.compute_at("P", "Y", jo)  # 6 columns of P per iteration of j_o
    s.vectorize("P", "j")  # 6 lanes where it is computed
    src = generate_c(lower(s, "k", 2))
    assert "/* parallel on loop i of extent 1: runs on one thread */" in src
    assert "/* vectorize j fell back to scalar: 6 lanes is not a power of two up to 64 */" in src
    assert "#pragma omp" not in src
    x = np.arange(34, dtype=np.float32).reshape(1, 34)
    np.testing.assert_allclose(compile(Y, s)(x), 2 * x[:, :32] + 2 * x[:, 2:])


@pytest.mark.parametrize(("n", "width"), [(28, 32), (7, 8)])
def test_a_register_tile_wider_than_its_row_keeps_rows_of_whole_vectors(n, width):
    """28 output columns in one 32-wide register tile (4 unrolled vectors of 8), 2 rows deep:
    the tile's rows stay 32 wide instead of being cut to the output's 28, so no row's last
    vector overlaps the next row; the tile is named variables and the columns past 28 are
    one masked operation per row (the same for 7 columns in an 8-wide tile)."""
    A = te.placeholder((4, 5), name="A")
    B = te.placeholder((5, n), name="B")
    k = te.reduce_axis(5, "k")
    C = te.compute((4, n), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = Schedule(C)
    s.cache_write("C", "register")
    _io, jo, ii, ji = s.tile("C", "i", "j", 2, width)
    s.compute_at("C_register", "C", jo)
    s.reorder("C_register", ["k", "i", "j"])
    s.unroll("C_register", "i")
    s.unroll("C", ii)
    for stage, loop in (("C_register", "j"), ("C", ji)):
        vo, vi = s.split(stage, loop, 8)
        s.unroll(stage, vo)
        s.vectorize(stage, vi)
    func = lower(s, "k", 1)
    (tile,) = [a.buffer for a in _stmts(func.body, Allocate) if a.buffer.name == "C_register"]
    assert (tile.shape, tile.scope) == ((2, width), "register")
    notes = [c.text for c in _stmts(func.body, Comment)]
    assert notes.count("vector tail: masked") == 2 + 2 + 2  # init, update, copy-out rows
    assert not any("kept in memory" in t or "scalar" in t for t in notes), notes
    a = np.random.default_rng(n).uniform(-1, 1, (4, 5)).astype(np.float32)
    b = np.random.default_rng(n + 1).uniform(-1, 1, (5, n)).astype(np.float32)
    np.testing.assert_allclose(compile(C, s)(a, b), a @ b, rtol=1e-5, atol=1e-5)


def test_vectorize_keeps_a_serial_loop_with_an_empty_body():
    # a schedule can leave a loop whose body lowering emptied (hypothesis found one in a conv)
    loop = For(Var("r"), 4, "serial", seq([]))
    assert vectorize(loop) == loop
