"""Index-arithmetic simplification by canonical linear forms and known loop ranges.

Integer expressions are rewritten as ``sum(coeff * atom) + const`` where an atom is a variable or a
non-linear sub-expression; floor division and modulo by constants fold away when the range of the
remainder is known. Comparisons whose outcome is decided by the ranges fold to constants, which is
what removes guards from divisible loops and packing indices from packed reads.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from ..te.expr import (
    Binary,
    Call,
    Compare,
    Const,
    Expr,
    Select,
    Storage,
    Var,
    children,
    const,
    rebuild,
)

Ranges = Mapping[Var, int]  # var -> extent, the var ranging over [0, extent)
Linear = tuple[dict[Expr, int], int]


def _atom_key(a: Expr) -> tuple:
    return (0, a.name, a.uid) if isinstance(a, Var) else (1, repr(a))


def _tables(ranges: Ranges) -> tuple[dict, dict]:
    """The memo tables (simplified forms, linear forms) of one set of loop ranges.

    Lowering simplifies the same index expressions again in every unrolled copy and every pass,
    and each simplification re-reads its children's linear forms; both are pure functions of the
    expression and the ranges, so they are computed once per ranges (bounded: cleared when big).
    """
    key = frozenset(ranges.items())
    tables = _MEMO.get(key)
    if tables is None or len(tables[0]) + len(tables[1]) > _TABLE_LIMIT:
        if len(_MEMO) > _TABLES_LIMIT:
            _MEMO.clear()
        tables = _MEMO[key] = ({}, {})
    return tables


_MEMO: dict[frozenset, tuple[dict, dict]] = {}
_TABLES_LIMIT, _TABLE_LIMIT = 1024, 100_000


def simplifier(ranges: Ranges) -> Callable[[Expr], Expr]:
    """``simplify`` under fixed ``ranges``: for a pass that simplifies many expressions there."""
    tables = _tables(ranges)
    return lambda e: _simplify(e, ranges, tables)


def to_linear(e: Expr, ranges: Ranges) -> Linear:
    """Canonical linear form of an int32 expression (its children already simplified)."""
    terms, c0 = _linear(e, ranges, _tables(ranges)[1])
    return dict(terms), c0  # a copy: callers may change it, the memo's stays


def _linear(e: Expr, ranges: Ranges, memo: dict) -> Linear:
    if isinstance(e, Const | Var):
        return ({}, int(e.value)) if isinstance(e, Const) else ({e: 1}, 0)
    out = memo.get(e)
    if out is None:
        out = memo[e] = _linear_node(e, ranges, memo)
    return out


def _linear_node(e: Expr, ranges: Ranges, memo: dict) -> Linear:
    match e:
        case Binary("add" | "sub" as op, a, b):
            la, lb = _linear(a, ranges, memo), _linear(b, ranges, memo)
            sign = 1 if op == "add" else -1
            terms = dict(la[0])
            for atom, c in lb[0].items():
                terms[atom] = terms.get(atom, 0) + sign * c
            return {k: v for k, v in terms.items() if v}, la[1] + sign * lb[1]
        case Binary("mul", a, b):
            la, lb = _linear(a, ranges, memo), _linear(b, ranges, memo)
            if not la[0] or not lb[0]:
                scale, (terms, c0) = (la[1], lb) if not la[0] else (lb[1], la)
                return {k: v * scale for k, v in terms.items() if v * scale}, c0 * scale
        case Binary("floordiv" | "mod" as op, a, Const(c)) if int(c) > 0:
            folded = _fold_divmod(op, _linear(a, ranges, memo), int(c), ranges)
            if folded is not None:
                return folded
    return {e: 1}, 0


def _fold_divmod(op: str, lin: Linear, c: int, ranges: Ranges) -> Linear | None:
    terms, c0 = lin
    quot = {a: k // c for a, k in terms.items() if k % c == 0}
    rest = {a: k for a, k in terms.items() if k % c != 0}
    bound = linear_range((rest, c0 % c), ranges)
    if bound is None:
        if not terms:
            return ({}, c0 // c) if op == "floordiv" else ({}, c0 % c)
        return None
    lo, hi = bound
    if lo // c != hi // c:
        return None
    k = lo // c
    if op == "floordiv":
        return quot, c0 // c + k
    return rest, c0 % c - k * c


def linear_range(lin: Linear, ranges: Ranges) -> tuple[int, int] | None:
    """Inclusive integer bounds of a linear form, or None when an atom's range is unknown."""
    terms, lo = lin
    hi = lo
    for atom, k in terms.items():
        r = atom_range(atom, ranges)
        if r is None:
            return None
        a, b = k * r[0], k * r[1]
        lo, hi = lo + min(a, b), hi + max(a, b)
    return lo, hi


def atom_range(atom: Expr, ranges: Ranges) -> tuple[int, int] | None:
    match atom:
        case Var() if atom in ranges:
            return 0, ranges[atom] - 1
        case Binary("floordiv", a, Const(c)) if int(c) > 0:
            r = linear_range(_linear(a, ranges, _tables(ranges)[1]), ranges)
            return None if r is None else (r[0] // int(c), r[1] // int(c))
        case Binary("mod", _, Const(c)) if int(c) > 0:
            return 0, int(c) - 1
        case Binary("min" | "max" as op, a, b):
            lin = _tables(ranges)[1]
            ra = linear_range(_linear(a, ranges, lin), ranges)
            rb = linear_range(_linear(b, ranges, lin), ranges)
            if ra is None or rb is None:
                return None
            f = min if op == "min" else max
            return f(ra[0], rb[0]), f(ra[1], rb[1])
    return None


def from_linear(lin: Linear) -> Expr:
    terms, c0 = lin
    out: Expr | None = None
    for atom in sorted(terms, key=_atom_key):
        k = terms[atom]
        term = atom if k == 1 else Binary("mul", atom, Const(k), "int32")
        out = term if out is None else Binary("add", out, term, "int32")
    if out is None:
        return Const(c0)
    return Binary("add", out, Const(c0), "int32") if c0 else out


def expr_range(e: Expr, ranges: Ranges) -> tuple[int, int] | None:
    """Inclusive integer bounds of an int32 expression under ``ranges``."""
    return _range(e, ranges, _tables(ranges))


def _range(e: Expr, ranges: Ranges, tables: tuple[dict, dict]) -> tuple[int, int] | None:
    return linear_range(_linear(_simplify(e, ranges, tables), ranges, tables[1]), ranges)


def simplify(e: Expr, ranges: Ranges | None = None) -> Expr:
    """``e`` with its index arithmetic in canonical form and what ``ranges`` decide folded."""
    ranges = ranges or {}
    return _simplify(e, ranges, _tables(ranges))


def _simplify(e: Expr, ranges: Ranges, tables: tuple[dict, dict]) -> Expr:
    kids = children(e)
    if not kids:
        return e  # a leaf is its own simplest form
    memo = tables[0]
    out = memo.get(e)
    if out is None:
        node = rebuild(e, tuple(_simplify(k, ranges, tables) for k in kids))
        out = memo[e] = _simplify_node(node, ranges, tables)
    return out


def _simplify_node(e: Expr, ranges: Ranges, tables: tuple[dict, dict]) -> Expr:
    """``e`` (its children simplified) simplified at its root."""
    match e:
        case Binary(op, Const(a), Const(b), dt) if op not in ("and", "or"):
            folded = _fold_binary(op, a, b, dt)
            return e if folded is None else folded
        case Binary("add" | "sub" | "mul" | "floordiv" | "mod", _, _, "int32"):
            return from_linear(_linear(e, ranges, tables[1]))
        case Binary("min" | "max" as op, a, b, "int32"):
            ra, rb = _range(a, ranges, tables), _range(b, ranges, tables)
            if ra and rb:
                if ra[1] <= rb[0]:
                    return a if op == "min" else b
                if rb[1] <= ra[0]:
                    return b if op == "min" else a
        case Binary("add", x, Const(0 | 0.0)) | Binary("add", Const(0 | 0.0), x):
            return x
        case Binary("mul", x, Const(1 | 1.0)) | Binary("mul", Const(1 | 1.0), x):
            return x
        case Binary("and", Const(a), x) | Binary("and", x, Const(a)):
            return x if a else Const(False, "bool")
        case Binary("or", Const(a), x) | Binary("or", x, Const(a)):
            return Const(True, "bool") if a else x
        case Compare(op, a, b) if a.dtype == "int32":
            diff = _linear(
                _simplify(Binary("sub", a, b, "int32"), ranges, tables), ranges, tables[1]
            )
            r = linear_range(diff, ranges)
            if r is not None:
                decided = _decide(op, *r)
                if decided is not None:
                    return Const(decided, "bool")
        case Select(Const(c), t, f, _):
            return t if c else f
        case Call("not", (Const(c),), _):
            return Const(not c, "bool")
    return e


def _fold_binary(op: str, a: float, b: float, dtype: str) -> Expr | None:
    if dtype == "int32":
        i, j = int(a), int(b)
        if op in ("floordiv", "mod") and j == 0:
            return None
        ints = {
            "add": i + j,
            "sub": i - j,
            "mul": i * j,
            "floordiv": i // j if j else 0,
            "mod": i % j if j else 0,
            "max": max(i, j),
            "min": min(i, j),
        }
        return Const(ints[op]) if op in ints else None
    if dtype in ("float32", "float64") and op in ("add", "sub", "mul", "max", "min"):
        floats = {"add": a + b, "sub": a - b, "mul": a * b, "max": max(a, b), "min": min(a, b)}
        return const(floats[op], dtype)
    return None


def _decide(op: str, lo: int, hi: int) -> bool | None:
    """Outcome of ``diff <op> 0`` for diff in [lo, hi], if the range decides it."""
    if op == "lt":
        return True if hi < 0 else False if lo >= 0 else None
    if op == "le":
        return True if hi <= 0 else False if lo > 0 else None
    if op == "gt":
        return True if lo > 0 else False if hi <= 0 else None
    if op == "ge":
        return True if lo >= 0 else False if hi < 0 else None
    if op == "eq":
        return True if lo == hi == 0 else False if lo > 0 or hi < 0 else None
    if op == "ne":
        return False if lo == hi == 0 else True if lo > 0 or hi < 0 else None
    return None


def linear_coeff(e: Expr, var: Var, ranges: Ranges | None = None) -> int | None:
    """Coefficient of ``var`` if ``e`` is affine in it (var not inside any non-linear atom)."""
    terms, _ = to_linear(simplify(e, ranges), ranges or {})
    coeff = 0
    for atom, k in terms.items():
        if atom == var:
            coeff = k
        elif var in _vars(atom):
            return None
    return coeff


def _vars(e: Expr) -> set[Var]:
    stack, out = [e], set()
    while stack:
        n = stack.pop()
        if isinstance(n, Var):
            out.add(n)
        stack.extend(children(n))
    return out


def flat_offset(buf: Storage, idx: tuple[Expr, ...], ranges: Ranges) -> Expr:
    """The row-major element offset of ``buf[idx]``, simplified."""
    flat: Expr = Const(0)
    for i, n in zip(idx, buf.shape, strict=True):
        # ``flat * n + i`` built directly (what the operators build for int32 indices)
        scaled = Binary("mul", flat, Const(int(n)), "int32")
        flat = Binary("add", scaled, i, "int32") if i.dtype == "int32" else scaled + i
    return simplify(flat, ranges)
