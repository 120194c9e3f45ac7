"""Splitting a kernel at its constant inputs: the stages computed from constants alone move to a
prepack function, the kernel reads what it wrote; without constants nothing changes."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tensortune.te as te
from tensortune.errors import LoweringError
from tensortune.ir.nodes import Store, walk_stmts
from tensortune.ir.printer import format_stmt
from tensortune.lower import lower, lower_prepacked
from tensortune.lower.prepack import constant_stages
from tensortune.schedule import Schedule


def _packed_matmul(m: int, n: int, k: int, factor: int, at_panel: bool) -> Schedule:
    """C = A @ B with B packed into ``factor``-wide column panels, at root or at C's loop."""
    A = te.placeholder((m, k), name="A")
    B = te.placeholder((k, n), name="B")
    r = te.reduce_axis(k, "r")
    C = te.compute((m, n), lambda i, j: te.sum(A[i, r] * B[r, j], axis=r), name="C")
    s = Schedule(C)
    jo, _ = s.split("C", "j", factor)
    s.reorder("C", [jo, "i", "r", "j_i"])
    packed = s.pack("B", "C", 1, factor, (1, 0, 2))
    if at_panel:
        s.compute_at(packed, "C", jo)
    return s


def _stored(func) -> set[str]:
    return {x.buffer.name for x in walk_stmts(func.body) if isinstance(x, Store)}


@settings(max_examples=30, deadline=None)
@given(
    st.integers(1, 9),
    st.integers(1, 40),
    st.integers(1, 9),
    st.sampled_from([1, 4, 8, 16]),
    st.booleans(),
)
def test_the_pack_of_a_constant_moves_to_prepack(m, n, k, factor, at_panel):
    s = _packed_matmul(m, n, k, factor, at_panel)
    before = format_stmt(lower(s, "mm"))
    split = lower_prepacked(s, "mm", 1, {"B"})
    assert split.prepack is not None and split.prepack.name == "mm_prepack"
    assert [b.name for b in split.prepack.params] == ["B", "B_pack"]
    assert [b.name for b in split.packed] == ["B_pack"]
    assert split.packed[0].shape == (-(-n // factor), k, factor)  # the whole copy, even at_panel
    assert [b.name for b in split.run.params] == ["A", "B_pack", "C"]
    assert _stored(split.prepack) == {"B_pack"} and _stored(split.run) == {"C"}
    assert split.run.temporaries == () and split.prepack.temporaries == ()
    assert format_stmt(lower(s, "mm")) == before  # the caller's schedule is left alone


@settings(max_examples=10, deadline=None)
@given(st.integers(1, 9), st.integers(1, 40), st.sampled_from([4, 16]), st.booleans())
def test_without_constants_nothing_changes(m, n, factor, at_panel):
    s = _packed_matmul(m, n, 3, factor, at_panel)
    split = lower_prepacked(s, "mm", 2)
    assert split.prepack is None and split.packed == ()
    assert format_stmt(split.run) == format_stmt(lower(s, "mm", 2))


def test_a_pack_of_what_changes_stays_in_the_kernel():
    s = _packed_matmul(4, 16, 4, 8, False)
    split = lower_prepacked(s, "mm", 1, {"A"})  # B_pack reads B, which is not constant
    assert split.prepack is None
    assert format_stmt(split.run) == format_stmt(lower(s, "mm"))


def test_chains_of_constant_stages_keep_their_intermediates_private():
    W = te.placeholder((8, 8), name="W")
    X = te.placeholder((8, 8), name="X")
    scaled = te.compute((8, 8), lambda i, j: W[i, j] * 2.0, name="Scaled")
    flipped = te.compute((8, 8), lambda i, j: scaled[j, i] + 1.0, name="Flipped")
    Y = te.compute((8, 8), lambda i, j: X[i, j] + flipped[i, j], name="Y")
    s = Schedule(Y)
    assert constant_stages(s, {"W"}) == {"Scaled", "Flipped"}
    split = lower_prepacked(s, "k", 1, {"W"})
    assert split.prepack is not None
    assert [b.name for b in split.prepack.temporaries] == ["Scaled"]
    assert [b.name for b in split.packed] == ["Flipped"]
    assert [b.name for b in split.run.params] == ["X", "Flipped", "Y"]


def test_outputs_never_move_and_unknown_constants_are_refused():
    W = te.placeholder((4,), name="W")
    Y = te.compute((4,), lambda i: W[i] * 3.0, name="Y")
    split = lower_prepacked(Schedule(Y), "k", 1, {"W"})
    assert split.prepack is None  # Y is written on every call, though it reads only W
    with pytest.raises(LoweringError, match=r"constants \['V'\] are not inputs"):
        lower_prepacked(Schedule(Y), "k", 1, {"V"})
