"""Pass ``unroll``: unrolled loops become copies of their body, one per iteration.

Each copy has the loop variable bound to a constant and every expression simplified under the
ranges of the loops around it, so guards a copy always passes vanish and register-tile indices
become constants (which is what lets ``promote_registers`` name them). Loops of extent 1 go the
same way, whatever their kind; a vectorized one leaves a note, since no vector code results.
"""

from __future__ import annotations

from collections.abc import Callable

from ..ir.nodes import Comment, For, IfThen, Stmt, Store, seq
from ..ir.simplify import Ranges, simplifier
from ..ir.visit import stmt_children, with_stmt_children
from ..te.expr import Const, Expr, Var, substitute


def unroll(s: Stmt, ranges: Ranges | None = None) -> Stmt:
    """``s`` with no unrolled loop and no loop of extent 1 left, expressions simplified."""
    ranges = dict(ranges or {})
    return _go(s, ranges, {}, simplifier(ranges))


def _go(
    s: Stmt, ranges: dict[Var, int], bound: dict[Var, Expr], simp: Callable[[Expr], Expr]
) -> Stmt:
    """``s`` unrolled, with the variables of the unrolled loops around it bound to constants
    (``bound``): each expression is substituted once, where it is simplified (``simp``, under
    ``ranges``), rather than the whole body being copied at every loop level."""
    match s:
        case For(var, extent, kind, body) if kind == "unrolled" or extent == 1:
            copies: list[Stmt] = []
            if kind == "vectorized":
                copies.append(Comment(f"vectorize on loop {var.name} of extent 1: scalar code"))
            for k in range(extent):
                copies.append(_go(body, ranges, {**bound, var: Const(k)}, simp))
            return seq(copies)
        case For(var, extent, kind, body, comment):
            inner = {**ranges, var: extent}
            return For(var, extent, kind, _go(body, inner, bound, simplifier(inner)), comment)
        case IfThen(cond, body, orelse):
            c = simp(substitute(cond, bound))
            if isinstance(c, Const):
                taken = body if c.value else orelse
                return seq([]) if taken is None else _go(taken, ranges, bound, simp)
            then = _go(body, ranges, bound, simp)
            return IfThen(c, then, None if orelse is None else _go(orelse, ranges, bound, simp))
        case Store(buf, idx, value):
            idx = tuple(simp(substitute(i, bound)) for i in idx)
            return Store(buf, idx, simp(substitute(value, bound)))
    return with_stmt_children(s, tuple(_go(c, ranges, bound, simp) for c in stmt_children(s)))
