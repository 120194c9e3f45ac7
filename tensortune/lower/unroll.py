"""Pass ``unroll``: unrolled loops become copies of their body, one per iteration.

Each copy has the loop variable bound to a constant and every expression simplified under the
ranges of the loops around it, so guards a copy always passes vanish and register-tile indices
become constants (which is what lets ``promote_registers`` name them). Loops of extent 1 go the
same way, whatever their kind; a vectorized one leaves a note, since no vector code results.
"""

from __future__ import annotations

from functools import partial

from ..ir.nodes import Comment, For, IfThen, Stmt, Store, seq
from ..ir.simplify import Ranges, simplify
from ..ir.visit import map_exprs, stmt_children, with_stmt_children
from ..te.expr import Const, Var, substitute


def unroll(s: Stmt, ranges: Ranges | None = None) -> Stmt:
    """``s`` with no unrolled loop and no loop of extent 1 left, expressions simplified."""
    return _go(s, dict(ranges or {}))


def _go(s: Stmt, ranges: dict[Var, int]) -> Stmt:
    match s:
        case For(var, extent, kind, body) if kind == "unrolled" or extent == 1:
            copies: list[Stmt] = []
            if kind == "vectorized":
                copies.append(Comment(f"vectorize on loop {var.name} of extent 1: scalar code"))
            for k in range(extent):
                bound = map_exprs(body, partial(substitute, mapping={var: Const(k)}))
                copies.append(_go(bound, ranges))
            return seq(copies)
        case For(var, extent, kind, body, comment):
            return For(var, extent, kind, _go(body, {**ranges, var: extent}), comment)
        case IfThen(cond, body, orelse):
            c = simplify(cond, ranges)
            if isinstance(c, Const):
                taken = body if c.value else orelse
                return seq([]) if taken is None else _go(taken, ranges)
            return IfThen(c, _go(body, ranges), None if orelse is None else _go(orelse, ranges))
        case Store(buf, idx, value):
            return Store(buf, tuple(simplify(i, ranges) for i in idx), simplify(value, ranges))
    return with_stmt_children(s, tuple(_go(c, ranges) for c in stmt_children(s)))
