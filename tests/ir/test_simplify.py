"""The index simplifier: floordiv/mod folding under loop ranges, guard folding, linear_coeff."""

from __future__ import annotations

import importlib
import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tensortune.ir.simplify import expr_range, linear_coeff, simplify, to_linear
from tensortune.te.expr import Binary, Compare, Const, Expr, Select, Var

# the module, not the function tensortune.ir re-exports under the same name
simplify_module = importlib.import_module("tensortune.ir.simplify")


def ev(e: Expr, env: dict[Var, int]):
    """Evaluate an index expression with Python's (floor) integer semantics."""
    match e:
        case Const(v):
            return v
        case Var():
            return env[e]
        case Binary(op, a, b):
            x, y = ev(a, env), ev(b, env)
            return {
                "add": lambda: x + y,
                "sub": lambda: x - y,
                "mul": lambda: x * y,
                "floordiv": lambda: x // y,
                "mod": lambda: x % y,
                "min": lambda: min(x, y),
                "max": lambda: max(x, y),
                "and": lambda: x and y,
                "or": lambda: x or y,
            }[op]()
        case Compare(op, a, b):
            x, y = ev(a, env), ev(b, env)
            return {"lt": x < y, "le": x <= y, "gt": x > y, "ge": x >= y, "eq": x == y,
                    "ne": x != y}[op]  # fmt: skip
        case Select(c, t, f):
            return ev(t, env) if ev(c, env) else ev(f, env)
    raise TypeError(e)


i, j, k = Var("i"), Var("j"), Var("k")


# -- floordiv / mod folding ----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("expr", "ranges", "expected"),
    [
        ((i * 8 + j) // 8, {j: 8}, i),
        ((i * 8 + j) % 8, {j: 8}, j),
        ((i * 8 + j) // 8, {i: 4, j: 8}, i),
        ((i * 16 + j * 4 + k) // 4, {j: 4, k: 4}, i * 4 + j),
        ((i * 16 + j * 4 + k) % 16, {j: 4, k: 4}, j * 4 + k),
        ((j + 8) % 8, {j: 8}, j),
        ((j + 8) // 8, {j: 8}, Const(1)),
        ((j + 13) // 8, {j: 3}, Const(1)),
        ((j + 13) % 8, {j: 3}, j + 5),
        ((7 - j) // 8, {j: 8}, Const(0)),
        (j // 8, {j: 8}, Const(0)),
        (j % 8, {j: 8}, j),
        (Const(-7) // 2, {}, Const(-4)),
        (Const(-7) % 2, {}, Const(1)),
    ],
)
def test_divmod_folds_under_ranges(expr, ranges, expected):
    assert simplify(expr, ranges) == simplify(expected, ranges)


@pytest.mark.parametrize(
    ("expr", "ranges"),
    [
        ((i * 8 + j) // 8, {j: 9}),  # j may reach 8: the quotient can be i + 1
        ((j - 3) // 8, {j: 8}),  # j - 3 spans zero
        ((j + 5) % 8, {j: 8}),  # wraps
        (j // 8, {}),  # unknown range
    ],
)
def test_divmod_kept_when_the_range_does_not_decide(expr, ranges):
    out = simplify(expr, ranges)
    assert any(isinstance(n, Binary) and n.op in ("floordiv", "mod") for n in _nodes(out))
    for env in _assignments(out, ranges):
        assert ev(out, env) == ev(expr, env)


def test_constants_fold_with_floor_semantics():
    assert simplify(Const(7) // Const(-2)) == Const(-4)
    assert simplify(Const(7) % Const(-2)) == Const(-1)
    assert simplify(Const(3) * Const(4) + Const(5)) == Const(17)


def test_linear_form_is_canonical():
    a = simplify(i * 4 + j + i * 4 - j * 2 + 3 - 3)
    b = simplify(j * -1 + i * 8)
    assert a == b


# -- guards --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("cond", "ranges", "expected"),
    [
        (i * 4 + j < 16, {i: 4, j: 4}, True),  # a divisible split: the tail guard vanishes
        (i * 4 + j < 15, {i: 4, j: 4}, None),  # a non-divisible one keeps it
        (i * 4 + j < 100, {i: 4, j: 4}, True),
        (i * 4 + j >= 0, {i: 4, j: 4}, True),
        (i - 1 >= 0, {i: 4}, None),  # padding at the border
        (i + 4 < 4, {i: 4}, False),
        (Compare("eq", i - i, Const(0)), {}, True),
        (Compare("ne", i + 1, Const(0)), {i: 3}, True),
        (i <= 3, {i: 4}, True),
        (i > 3, {i: 4}, False),
    ],
)
def test_guard_folding(cond, ranges, expected):
    out = simplify(cond, ranges)
    if expected is None:
        assert not isinstance(out, Const)
    else:
        assert out == Const(expected, "bool")


def test_conjunction_with_a_decided_guard_keeps_the_other():
    cond = (i * 4 + j < 16) & (k < 3)
    assert simplify(cond, {i: 4, j: 4, k: 4}) == simplify(k < 3, {k: 4})
    assert simplify((i < 4) & (k < 9), {i: 4, k: 4}) == Const(True, "bool")
    assert simplify((i < 0) & (k < 3), {i: 4, k: 4}) == Const(False, "bool")


def test_select_on_a_decided_condition():
    e = Select(i < 4, i * 2, Const(0), "int32")
    assert simplify(e, {i: 4}) == simplify(i * 2)


def test_min_max_fold_when_ranges_are_ordered():
    assert simplify(Binary("min", i, Const(10), "int32"), {i: 4}) == i
    assert simplify(Binary("max", i, Const(10), "int32"), {i: 4}) == Const(10)
    kept = simplify(Binary("min", i, Const(2), "int32"), {i: 4})
    assert isinstance(kept, Binary) and kept.op == "min"


def test_expr_range():
    assert expr_range(i * 4 + j, {i: 3, j: 4}) == (0, 11)
    assert expr_range(i * -2 + 5, {i: 3}) == (1, 5)
    assert expr_range((i * 4 + j) // 4, {i: 3, j: 4}) == (0, 2)
    assert expr_range(i + k, {i: 3}) is None


# -- linear_coeff --------------------------------------------------------------------------------
def test_linear_coeff():
    assert linear_coeff(i * 8 + j, j) == 1
    assert linear_coeff(i * 8 + j, i) == 8
    assert linear_coeff(i * 8 + j * 3 - j, j) == 2
    assert linear_coeff(i * 8, j) == 0
    assert linear_coeff((i * 8 + j) // 3, j) is None  # j inside a non-linear atom
    assert linear_coeff(i * j, j) is None


def test_linear_coeff_sees_through_folded_divmod():
    # (i*8 + j) % 8 is j when j < 8: unit stride, which is what makes a vector load contiguous
    assert linear_coeff((i * 8 + j) % 8 + ((i * 8 + j) // 8) * 32, j, {j: 8}) == 1
    assert linear_coeff((i * 8 + j) % 8, j, {j: 9}) is None


# -- property: simplification never changes the value -----------------------------------------
VARS = (i, j, k)


@st.composite
def index_exprs(draw, depth: int = 3) -> Expr:
    if depth == 0 or draw(st.integers(0, 3)) == 0:
        if draw(st.booleans()):
            return draw(st.sampled_from(VARS))
        return Const(draw(st.integers(-9, 9)))
    op = draw(st.sampled_from(["add", "sub", "mulc", "floordiv", "mod", "min", "max"]))
    a = draw(index_exprs(depth - 1))
    if op == "mulc":
        return Binary("mul", a, Const(draw(st.integers(-4, 8))), "int32")
    if op in ("floordiv", "mod"):
        return Binary(op, a, Const(draw(st.integers(1, 9))), "int32")
    return Binary(op, a, draw(index_exprs(depth - 1)), "int32")


@settings(max_examples=300, deadline=None)
@given(
    e=index_exprs(),
    extents=st.tuples(*[st.integers(1, 12)] * 3),
    cmp=st.sampled_from(["lt", "le", "gt", "ge", "eq", "ne"]),
    bound=st.integers(-20, 40),
)
def test_simplify_preserves_value(e, extents, cmp, bound):
    ranges = dict(zip(VARS, extents, strict=True))
    out = simplify(e, ranges)
    cond = Compare(cmp, e, Const(bound))
    folded = simplify(cond, ranges)
    r = expr_range(e, ranges)
    for env in _assignments(e, ranges):
        value = ev(e, env)
        assert ev(out, env) == value
        assert bool(ev(folded, env)) == bool(ev(cond, env))
        if r is not None:
            assert r[0] <= value <= r[1]


@settings(max_examples=200, deadline=None)
@given(
    coeffs=st.tuples(*[st.integers(-5, 5)] * 3),
    c0=st.integers(-10, 10),
    div=st.integers(2, 8),
    extents=st.tuples(*[st.integers(1, 9)] * 3),
)
def test_linear_coeff_matches_finite_differences(coeffs, c0, div, extents):
    ranges = dict(zip(VARS, extents, strict=True))
    e = Const(c0)
    for v, c in zip(VARS, coeffs, strict=True):
        e = e + v * c
    for v, c in zip(VARS, coeffs, strict=True):
        assert linear_coeff(e, v, ranges) == c
    lane = Var("lane")
    wrapped = (e * div + lane) // div  # == e when 0 <= lane < div
    assert linear_coeff(wrapped, i, {**ranges, lane: div}) == coeffs[0]
    assert linear_coeff(wrapped, lane, {**ranges, lane: div}) == 0


def _nodes(e: Expr):
    from tensortune.te.expr import walk

    return list(walk(e))


def _assignments(e: Expr, ranges: dict[Var, int], limit: int = 400):
    """Values for every variable: each ranged one over its range, a free one over -5..5."""
    names = [v for v in VARS if v in ranges or v in _nodes(e)]
    spaces = [range(ranges[v]) if v in ranges else range(-5, 6) for v in names]
    for n, values in enumerate(itertools.product(*spaces)):
        if n >= limit:
            return
        yield dict(zip(names, values, strict=True))


def _cold(e: Expr, ranges: dict) -> Expr:
    """``simplify`` with an empty memo: what the function computes from scratch."""
    simplify_module._MEMO.clear()
    return simplify(e, ranges)


@settings(max_examples=60, deadline=None)
@given(
    exprs=st.lists(index_exprs(), min_size=1, max_size=6),
    extents=st.tuples(*[st.integers(1, 12)] * 3),
    bound=st.integers(-20, 40),
)
def test_memo_returns_what_a_cold_simplify_does(exprs, extents, bound):
    """The memo (per ranges, keyed by structure) never changes an answer: every expression and
    every guard on it simplifies the same with a warm memo, in any order, as from scratch."""
    ranges = dict(zip(VARS, extents, strict=True))
    queries = [(e, r) for e in exprs for r in (ranges, {})]
    queries += [(Compare("lt", e, Const(bound)), ranges) for e in exprs]
    cold = [repr(_cold(e, r)) for e, r in queries]
    cold_ranges = [(simplify_module._MEMO.clear(), expr_range(e, ranges))[1] for e in exprs]
    simplify_module._MEMO.clear()
    for _ in range(2):  # the second round answers from the memo
        assert [repr(simplify(e, r)) for e, r in reversed(queries)] == cold[::-1]
        assert [expr_range(e, ranges) for e in exprs] == cold_ranges


def test_to_linear_hands_out_copies():
    """A caller changing the linear form it got cannot change the next caller's."""
    i, j = VARS[0], VARS[1]
    e = i * 4 + j
    terms, _ = to_linear(e, {})
    terms[i] = 99
    assert to_linear(e, {}) == ({i: 4, j: 1}, 0)
