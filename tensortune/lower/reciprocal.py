"""Pass ``reciprocals`` (``fast_math`` only): a division by a value that a loop never changes
becomes a multiplication by its reciprocal, computed once before the loop.

``-freciprocal-math`` allows the rewrite, but GCC makes it only for divisions by one value in
one basic block: softmax's last pass divided every vector of a row by the row's sum (``vdivps``
issues once per 3.5 cycles on Zen 3, a multiply twice per cycle). The reciprocal lives in a
one-element buffer named after what it inverts, so the C shows it::

    for j_o in 0..25:                        softmax_sum_rcp[0] = 1 / softmax_sum[i]
      softmax[i, j] = exp[i, j] / sum[i]  ->  for j_o in 0..25:
                                                softmax[i, j] = exp[i, j] * softmax_sum_rcp[0]

A divisor is hoisted out of the outermost loop that neither binds a variable it reads nor writes
a buffer it reads; constant divisors are left to the C compiler, which folds them.
"""

from __future__ import annotations

from ..dtype import FLOAT_DTYPES
from ..ir.nodes import Allocate, Buffer, For, Stmt, Store, seq, walk_stmts
from ..ir.visit import map_exprs, stmt_children, walk_exprs, with_stmt_children
from ..te.expr import (
    Binary,
    Const,
    Expr,
    Storage,
    TensorRead,
    Var,
    const,
    free_vars,
    rewrite,
    walk,
)


def reciprocals(s: Stmt) -> Stmt:
    """``s`` with every loop-invariant float divisor inverted once before its loop."""
    taken = {st.buffer.name for st in walk_stmts(s) if isinstance(st, (Store, Allocate))}
    taken |= {b.name for e in walk_exprs(s) for b in _reads(e)}
    return _go(s, taken)


def _go(s: Stmt, taken: set[str]) -> Stmt:
    if not isinstance(s, For):
        return with_stmt_children(s, tuple(_go(c, taken) for c in stmt_children(s)))
    divisors = _invariant_divisors(s)
    if not divisors:
        return For(s.var, s.extent, s.kind, _go(s.body, taken), s.comment)
    buffers = {d: _buffer(d, taken) for d in divisors}

    def invert(e: Expr) -> Expr | None:
        if isinstance(e, Binary) and e.op == "div" and e.b in buffers:
            return Binary("mul", e.a, TensorRead(buffers[e.b], (Const(0),)), e.dtype)
        return None

    body = map_exprs(s.body, lambda e: rewrite(e, invert))
    out: Stmt = For(s.var, s.extent, s.kind, _go(body, taken), s.comment)
    for d, buf in reversed(buffers.items()):
        inverse = Binary("div", const(1.0, d.dtype), d, d.dtype)
        out = Allocate(buf, seq([Store(buf, (Const(0),), inverse), out]))
    return out


def _invariant_divisors(loop: For) -> list[Expr]:
    """The distinct float divisors in ``loop``'s stores that it never changes, in order."""
    bound: set[Var] = set()
    written: set[str] = set()
    for st in walk_stmts(loop):
        if isinstance(st, For):
            bound.add(st.var)
        elif isinstance(st, (Store, Allocate)):
            written.add(st.buffer.name)
    found: list[Expr] = []
    for st in walk_stmts(loop):
        if not isinstance(st, Store):
            continue
        for e in walk(st.value):
            if not (isinstance(e, Binary) and e.op == "div" and e.dtype in FLOAT_DTYPES):
                continue
            d = e.b
            reads = {b.name for b in _reads(d)}
            if reads and not reads & written and not free_vars(d) & bound and d not in found:
                found.append(d)
    return found


def _reads(e: Expr) -> list[Storage]:
    """The buffers ``e`` reads, in pre-order."""
    return [n.tensor for n in walk(e) if isinstance(n, TensorRead)]


def _buffer(divisor: Expr, taken: set[str]) -> Buffer:
    """A one-element local buffer named after the first tensor the divisor reads."""
    base = f"{_reads(divisor)[0].name}_rcp"
    name, n = base, 1
    while name in taken:
        n += 1
        name = f"{base}{n}"
    taken.add(name)
    return Buffer(name, (1,), divisor.dtype, "local")
