"""What is known to hold at a point of the program: the conditions of the branches around it.

A fact about an affine comparison is kept as an interval of its linear form divided by the gcd of
its coefficients, so facts combine with integer rounding: knowing ``not (6*i + 5 < 64)`` (i.e.
``6*i >= 59``, so ``i >= 10``) decides ``6*i + 4 < 64`` false. This is what lets the unswitch
pass drop the implied tests and the unreachable branches of a ragged tile.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..ir.simplify import simplify, to_linear
from ..te.expr import Binary, Call, Compare, Const, Expr, Var

_Key = tuple[tuple[Expr, int], ...]


def _bound(c: Expr) -> tuple[_Key, float, float] | None:
    """``c`` as ``lo <= T <= hi`` for a normalised linear form ``T``, if it is affine."""
    if not (isinstance(c, Compare) and c.op in ("lt", "le", "gt", "ge") and c.a.dtype == "int32"):
        return None
    terms, c0 = to_linear(simplify(Binary("sub", c.a, c.b, "int32")), {})
    if not terms:
        return None
    atoms = sorted(terms, key=lambda a: (0, a.name, a.uid) if isinstance(a, Var) else (1, repr(a)))
    g = math.gcd(*(abs(terms[a]) for a in atoms))
    sign = 1 if terms[atoms[0]] > 0 else -1
    key = tuple((a, sign * terms[a] // g) for a in atoms)
    # T + c0 <op> 0 with T = sign * g * T'
    lo, hi = -math.inf, math.inf
    if c.op in ("lt", "le"):
        hi = -c0 - (1 if c.op == "lt" else 0)
    else:
        lo = -c0 + (1 if c.op == "gt" else 0)
    if sign < 0:
        lo, hi = -hi, -lo
    lo = lo if lo == -math.inf else math.ceil(lo / g)
    hi = hi if hi == math.inf else math.floor(hi / g)
    return key, lo, hi


@dataclass(frozen=True)
class Facts:
    """Conditions known true or false; immutable, so each branch extends its own copy."""

    intervals: dict[_Key, tuple[float, float]] = field(default_factory=dict)
    exact: frozenset[tuple[Expr, bool]] = frozenset()

    def assume(self, cond: Expr, value: bool) -> Facts:
        """These facts and ``cond == value``."""
        match cond:
            case Binary("and", a, b) if value:
                return self.assume(a, True).assume(b, True)
            case Binary("or", a, b) if not value:
                return self.assume(a, False).assume(b, False)
            case Call("not", (x,)):
                return self.assume(x, not value)
        intervals = dict(self.intervals)
        bound = _bound(cond)
        if bound is not None:
            key, lo, hi = bound
            if not value:  # the complement of a half-line is the other half-line
                lo, hi = (hi + 1, math.inf) if lo == -math.inf else (-math.inf, lo - 1)
            klo, khi = intervals.get(key, (-math.inf, math.inf))
            intervals[key] = (max(lo, klo), min(hi, khi))
        return Facts(intervals, self.exact | {(cond, value)})

    def decide(self, cond: Expr) -> bool | None:
        """``cond``'s value wherever these facts hold, or None when they do not decide it."""
        match cond:
            case Const(v):
                return bool(v)
            case Binary("and" | "or" as op, a, b):
                da, db = self.decide(a), self.decide(b)
                if op == "and":
                    return False if False in (da, db) else True if da and db else None
                return True if True in (da, db) else False if da is False and db is False else None
            case Call("not", (x,)):
                d = self.decide(x)
                return None if d is None else not d
        for value in (True, False):
            if (cond, value) in self.exact:
                return value
        bound = _bound(cond)
        if bound is None or bound[0] not in self.intervals:
            return None
        key, lo, hi = bound
        klo, khi = self.intervals[key]
        if klo > khi:
            return None  # contradictory facts: unreachable code, leave it alone
        if lo <= klo and khi <= hi:
            return True
        if khi < lo or klo > hi:
            return False
        return None
