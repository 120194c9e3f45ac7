"""Pass ``vectorize``: each vectorized loop becomes one the C printer can emit as vector code.

- A reduction over ``for r: for v (vectorized)`` into one element gets a vector accumulator: a
  register buffer of ``lanes`` elements summed across ``r``, its lanes combined once at the end.
- Guards (tails, padding) inside a vectorized loop are tested at its first and last lane: the
  conditions are affine, so when both hold the whole vector is in range and the vector loop runs
  without them; otherwise a scalar tail runs the original guarded loop lane by lane.
- A loop that cannot be vectorized (a width that is not a power of two, a guard that is not
  affine in the lane) runs as a scalar loop, with a comment saying why.

Afterwards a vectorized loop holds only stores. Scalar loops made here inside a register tile
are unrolled (its lanes need constant indices), so ``unroll`` runs again after this pass.
"""

from __future__ import annotations

from ..errors import LoweringError
from ..ir.nodes import Allocate, Buffer, Comment, For, IfThen, Seq, Stmt, Store, seq
from ..ir.printer import format_expr
from ..ir.simplify import Ranges, linear_coeff, simplify
from ..ir.visit import rewrite_expr, stmt_children, with_stmt_children
from ..te.expr import (
    Binary,
    Compare,
    Const,
    Expr,
    Select,
    TensorRead,
    Var,
    free_vars,
    reduce_identity,
    substitute,
    walk,
)
from .facts import Facts
from .unswitch import conjunction, conjuncts, minimal

VECTOR_WIDTHS = (2, 4, 8, 16, 32, 64)
ACCUMULATOR_WIDTHS = (4, 8, 16, 32, 64)
_COMBINER = {"add": "sum", "max": "max", "min": "min"}


def vectorize(s: Stmt) -> Stmt:
    """``s`` with vector accumulators, split vector tails and noted scalar fallbacks."""
    return _go(s, {}, False)


def _go(s: Stmt, ranges: dict, in_registers: bool) -> Stmt:
    match s:
        case For(var, extent, "vectorized"):
            return _vector_loop(s, ranges, in_registers)
        case For(var, extent, kind, body, comment):
            acc = _accumulate(s, ranges) if kind == "serial" else None
            if acc is not None:
                return acc
            return For(var, extent, kind, _go(body, {**ranges, var: extent}, in_registers), comment)
        case Allocate(buf, body):
            return Allocate(buf, _go(body, ranges, in_registers or buf.scope == "register"))
    return with_stmt_children(s, tuple(_go(c, ranges, in_registers) for c in stmt_children(s)))


def flat_offset(buf, idx: tuple[Expr, ...], ranges: Ranges) -> Expr:
    """The row-major element offset of ``buf[idx]``, simplified."""
    flat: Expr = Const(0)
    for i, n in zip(idx, buf.shape, strict=True):
        flat = flat * n + i
    return simplify(flat, ranges)


def reduction(value: Expr, buf) -> tuple[str, Expr] | None:
    """``(op, x)`` when ``value`` is ``buf[same] op x``: an update of an accumulator."""
    if isinstance(value, Binary) and value.op in _COMBINER:
        acc = value.a
        if isinstance(acc, TensorRead) and acc.tensor is buf:
            return value.op, value.b
    return None


def _accumulate(s: For, ranges: dict) -> Stmt | None:
    """``for r: for v (vectorized): X[c] = X[c] op f(r, v)`` with a vector accumulator."""
    inner = s.body
    if not (
        isinstance(inner, For)
        and inner.kind == "vectorized"
        and inner.extent in ACCUMULATOR_WIDTHS
        and isinstance(inner.body, Store)
        and inner.body.buffer.scope != "register"
    ):
        return None
    st, lanes = inner.body, inner.extent
    inside = {**ranges, s.var: s.extent, inner.var: lanes}
    red = reduction(st.value, st.buffer)
    if red is None or free_vars(flat_offset(st.buffer, st.indices, inside)) & {s.var, inner.var}:
        return None
    op, rest = red
    dt = st.buffer.dtype
    acc = Buffer(f"{st.buffer.name}_acc", (lanes,), dt, "register")
    v0, v2 = Var(inner.var.name), Var(inner.var.name)
    here = TensorRead(st.buffer, st.indices)
    return Allocate(
        acc,
        seq(
            [
                For(v0, lanes, "vectorized", Store(acc, (v0,), reduce_identity(_COMBINER[op], dt))),
                For(
                    s.var,
                    s.extent,
                    "serial",
                    For(
                        inner.var,
                        lanes,
                        "vectorized",
                        Store(
                            acc, (inner.var,), Binary(op, TensorRead(acc, (inner.var,)), rest, dt)
                        ),
                    ),
                ),
                For(
                    v2,
                    lanes,
                    "vectorized",
                    Store(st.buffer, st.indices, Binary(op, here, TensorRead(acc, (v2,)), dt)),
                ),
            ]
        ),
    )


def _vector_loop(s: For, ranges: dict, in_registers: bool) -> Stmt:
    v, lanes = s.var, s.extent
    scalar_kind = "unrolled" if in_registers else "serial"

    def fallback(reason: str) -> Stmt:
        note = Comment(f"vectorize {v.name} fell back to scalar: {reason}")
        return seq([note, For(v, lanes, scalar_kind, s.body, s.comment)])

    if lanes not in VECTOR_WIDTHS:
        return fallback(f"{lanes} lanes is not a power of two up to {VECTOR_WIDTHS[-1]}")
    guarded = _flatten(s.body, ())
    inside = {**ranges, v: lanes}
    conds: dict[Expr, None] = {}  # ordered: the C must not depend on hash order
    for guards, st in guarded:
        for c in (*guards, *_index_selects(st.value, v)):
            conds[simplify(c, inside)] = None
    tests: dict[Expr, None] = {}
    for c in conds:
        if isinstance(c, Const) and c.value:
            continue
        if not _affine_conjunction(c, v, inside):
            return fallback(f"guard {format_expr(c)} is not affine in {v.name}")
        for lane in (0, lanes - 1):
            tests[simplify(substitute(c, {v: Const(lane)}), ranges)] = None
    if any(isinstance(t, Const) and not t.value for t in tests):
        return fallback(f"no {lanes} consecutive lanes pass its guards")
    vector = For(
        v,
        lanes,
        "vectorized",
        seq(
            [
                Store(st.buffer, st.indices, _drop_selects(st.value, conds, inside))
                for _, st in guarded
            ]
        ),
        s.comment,
    )
    atoms: dict[Expr, None] = {}
    for t in tests:
        atoms.update((a, None) for a in conjuncts(t) if not isinstance(a, Const))
    if not atoms:
        return vector
    cond = conjunction(minimal(list(atoms), Facts()))
    tail = seq(
        [Comment("vector tail: lane by lane"), For(v, lanes, scalar_kind, s.body, s.comment)]
    )
    return IfThen(cond, vector, tail)


def _flatten(s: Stmt, guards: tuple[Expr, ...]) -> list[tuple[tuple[Expr, ...], Store]]:
    match s:
        case Store():
            return [(guards, s)]
        case IfThen(c, body, None):
            return _flatten(body, (*guards, c))
        case Seq(stmts):
            return [x for st in stmts for x in _flatten(st, guards)]
        case Comment():
            return []
    raise LoweringError(f"a vectorized loop must be innermost; found {type(s).__name__} inside it")


def _index_only(e: Expr) -> bool:
    return all(not isinstance(n, TensorRead) for n in walk(e))


def _index_selects(e: Expr, v: Var) -> list[Expr]:
    """Conditions of selects that depend only on indices (padding), including ``v``."""
    return [
        n.cond
        for n in walk(e)
        if isinstance(n, Select) and _index_only(n.cond) and v in free_vars(n.cond)
    ]


def _affine_conjunction(c: Expr, v: Var, ranges: Ranges) -> bool:
    match c:
        case Binary("and", a, b):
            return _affine_conjunction(a, v, ranges) and _affine_conjunction(b, v, ranges)
        case Compare(op, a, b) if op != "ne" and a.dtype == "int32":
            return linear_coeff(a - b, v, ranges) is not None
    return v not in free_vars(c)


def _drop_selects(e: Expr, conds: dict[Expr, None], ranges: Ranges) -> Expr:
    """Inside the vector fast path the padding selects are known true."""

    def post(x: Expr) -> Expr | None:
        if isinstance(x, Select) and simplify(x.cond, ranges) in conds:
            return x.true_value
        return None

    return rewrite_expr(e, post)
