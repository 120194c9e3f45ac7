"""Pass ``unswitch``: a guard that a loop does not change is tested once, outside the loop.

``for j: ... if c: A ...`` with ``c`` independent of ``j`` and of every loop inside becomes
``if c: for j: ... A ... else: for j: ...`` — the copy where ``c`` holds carries no test. This is
done once, at the outermost loop where the guard is invariant (never at a parallel loop, whose
pragma must stay on it), and every branch carries the facts it established (``Facts``), so tests
those facts imply disappear and branches they rule out are never emitted: the edge tile of a
ragged register tile gets exactly one guarded copy, and the interior one none.
"""

from __future__ import annotations

from ..ir.conditions import conjunction, conjuncts
from ..ir.nodes import For, IfThen, Stmt, seq, walk_stmts
from ..ir.visit import stmt_children, with_stmt_children
from ..te.expr import Const, Expr, TensorRead, free_vars, walk
from .facts import Facts


def unswitch(s: Stmt, facts: Facts | None = None) -> Stmt:
    """``s`` with loop-invariant guards hoisted and every decided test removed."""
    return _go(s, facts or Facts(), frozenset(), True)


def prune(s: Stmt, facts: Facts | None = None) -> Stmt:
    """``s`` with every test its enclosing branches decide removed, nothing hoisted: run after
    passes that add tests (vector tails) inside branches ``unswitch`` made."""
    return _go(s, facts or Facts(), frozenset(), False)


def _go(s: Stmt, facts: Facts, tried: frozenset[Expr], hoist: bool) -> Stmt:
    match s:
        case IfThen(cond, body, orelse):
            d = facts.decide(cond)
            if d is not None:
                taken = body if d else orelse
                return seq([]) if taken is None else _go(taken, facts, tried, hoist)
            cond = _residual(cond, facts)
            then = _go(body, facts.assume(cond, True), tried, hoist)
            if orelse is None:
                return IfThen(cond, then)
            return IfThen(cond, then, _go(orelse, facts.assume(cond, False), tried, hoist))
        case For(kind=kind) if hoist and kind not in ("parallel", "vectorized"):
            atoms = minimal(_invariant_guards(s, facts, tried), facts)
            if atoms:
                cond = conjunction(atoms)
                then = _go(s, facts.assume(cond, True), tried, hoist)
                other = _go(s, facts.assume(cond, False), tried | set(atoms), hoist)
                return IfThen(cond, then, other)
    kids = tuple(_go(c, facts, tried, hoist) for c in stmt_children(s))
    return with_stmt_children(s, kids)


def _residual(cond: Expr, facts: Facts) -> Expr:
    """``cond`` without the conjuncts the facts already decide true."""
    kept = [a for a in conjuncts(cond) if facts.decide(a) is not True]
    return conjunction(kept) if kept else Const(True, "bool")


def _invariant_guards(loop: For, facts: Facts, tried: frozenset[Expr]) -> list[Expr]:
    """Undecided guard conjuncts inside ``loop`` that neither it nor a loop inside it changes."""
    inner = {n.var for n in walk_stmts(loop) if isinstance(n, For)}
    found: list[Expr] = []
    for node in walk_stmts(loop.body):
        if not isinstance(node, IfThen) or any(isinstance(n, TensorRead) for n in walk(node.cond)):
            continue
        for a in conjuncts(node.cond):
            if (
                not isinstance(a, Const)
                and a not in found
                and a not in tried
                and not free_vars(a) & inner
                and facts.decide(a) is None
            ):
                found.append(a)
    return found


def minimal(atoms: list[Expr], facts: Facts) -> list[Expr]:
    """``atoms`` without those the others imply (``6i+4 < 64`` follows from ``6i+5 < 64``)."""
    kept = list(atoms)
    for a in list(atoms):
        others = [b for b in kept if b is not a]
        if not others:
            break
        known = facts
        for b in others:
            known = known.assume(b, True)
        if known.decide(a) is True:
            kept = others
    return kept
