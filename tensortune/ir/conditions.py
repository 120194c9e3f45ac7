"""Guards as lists of conjuncts: lowering splits, merges and hoists them term by term, and the
IR and C printers split a masked store's guard the same way the ``vectorize`` pass does."""

from __future__ import annotations

from collections.abc import Set

from ..te.expr import Binary, Expr, Var, free_vars


def conjuncts(cond: Expr) -> list[Expr]:
    """The terms of a conjunction (``[cond]`` for anything else)."""
    if isinstance(cond, Binary) and cond.op == "and":
        return conjuncts(cond.a) + conjuncts(cond.b)
    return [cond]


def conjunction(atoms: list[Expr]) -> Expr:
    """``a and b and ...`` of a non-empty list."""
    out = atoms[0]
    for a in atoms[1:]:
        out = Binary("and", out, a, "bool")
    return out


def split_conjuncts(cond: Expr, loop_vars: Set[Var]) -> tuple[list[Expr], list[Expr]]:
    """``(outside, inside)``: the conjuncts of ``cond`` that use none of ``loop_vars`` (tested
    once, around the loops) and those that use some of them, each in their order in ``cond``."""
    outside: list[Expr] = []
    inside: list[Expr] = []
    for a in conjuncts(cond):
        (inside if free_vars(a) & loop_vars else outside).append(a)
    return outside, inside
