"""Masked vector tails: when the tail of a vectorized loop can run as one masked vector operation.

Inside a vectorized loop, ``if c: X[...] = e`` means what it means lane by lane: the lanes where
``c`` is false neither store nor read. The C printer makes that one masked store (AVX-512 mask
registers, AVX2 ``maskstore``, a lane-by-lane copy elsewhere) whose reads of memory are masked
loads, which never touch the memory of inactive lanes. This module decides when a tail can be
printed that way (`maskable`) and splits a guard into its scalar and per-lane parts
(`lane_guard`, by `tensortune.ir.conditions.split_conjuncts` as the IR printer does), so the
pass, the IR printer and the C printer agree on both.
"""

from __future__ import annotations

import math

from ..ir.conditions import conjunction, conjuncts, split_conjuncts
from ..ir.nodes import Store
from ..ir.simplify import Ranges, flat_offset, linear_coeff, simplify
from ..te import expr as E

MASKED_DTYPES = frozenset({"float32", "float64", "int32"})
"""Element types with masked loads and stores on x86 (4- and 8-byte lanes); bool has none."""

STRIDED_LOAD_STRIDES = (2, 3, 4)
"""Strides at which a vector read is contiguous loads and shuffles, not a gather (a window
sliding by 2 to 4: pools, depthwise convs, patchify stems); in a masked tail, masked ones."""


def strided_load(stride: int | None, lanes: int) -> bool:
    """Whether a read at ``stride`` elements per lane is loads and shuffles: stride 2 always,
    3 and 4 when the vector has at least twice as many lanes (with fewer, the loads and
    shuffles cost as much as a gather)."""
    if stride is None or stride not in STRIDED_LOAD_STRIDES:
        return False
    return stride == 2 or 2 * stride <= lanes


def lane_guard(cond: E.Expr, v: E.Var) -> tuple[E.Expr | None, E.Expr | None]:
    """``(scalar, lanes)``: the conjuncts of ``cond`` that do not depend on ``v`` (tested once,
    as an ``if`` around the masked operation) and those that do (the mask); None when empty."""
    scalar, lanes = split_conjuncts(cond, {v})
    return (conjunction(scalar) if scalar else None, conjunction(lanes) if lanes else None)


def some_lane(cond: E.Expr, v: E.Var, lanes: int, ranges: Ranges) -> list[E.Expr] | None:
    """Scalar tests that hold exactly when some lane in ``[0, lanes)`` passes ``cond``'s
    per-lane conjuncts (each ``±v + e op 0``, so the lanes passing all of them are an interval
    ``[max L, min U)``: non-empty when every lower bound is below every upper bound), or None
    when a conjunct has another form. A masked operation runs only under them: then every
    access the scalar program makes for its active lanes is in bounds, and so are the
    accesses that do not depend on the lane."""
    lo: list[E.Expr] = [E.Const(0)]
    hi: list[E.Expr] = [E.Const(lanes)]
    for a in conjuncts(cond):
        if v not in E.free_vars(a):
            continue
        if not isinstance(a, E.Compare) or a.op not in ("lt", "le", "gt", "ge"):
            return None
        e = simplify(a.a - a.b, ranges)
        c = linear_coeff(e, v, ranges)
        if c not in (1, -1):
            return None
        e0 = simplify(E.substitute(e, {v: E.Const(0)}), ranges)
        # c*v + e0 op 0, i.e. v op' -c*e0
        bound = simplify(E.Const(0) - e0, ranges) if c == 1 else e0
        op = a.op if c == 1 else {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le"}[a.op]
        if op == "lt":
            hi.append(bound)
        elif op == "le":
            hi.append(simplify(bound + 1, ranges))
        elif op == "gt":
            lo.append(simplify(bound + 1, ranges))
        else:
            lo.append(bound)
    tests: list[E.Expr] = []
    for low in lo:
        for high in hi:
            t = simplify(E.Compare("lt", low, high, "bool"), ranges)
            if not (isinstance(t, E.Const) and t.value) and t not in tests:
                tests.append(t)
    return tests


def maskable(
    stores: list[tuple[tuple[E.Expr, ...], Store]], v: E.Var, ranges: Ranges
) -> str | None:
    """Why the guarded ``stores`` of a vector tail cannot run masked, or None when they can.

    Every memory access that varies with ``v`` must be contiguous (a masked load or store of
    consecutive lanes) or a read at a stride with strided loads (`strided_load`: masked ones),
    of an element type with masked forms; a read that does not vary with ``v`` must not hide
    behind a per-lane padding test (it could be out of bounds when no lane passes); an integer
    division must not divide by a value a masked-off lane could make 0."""
    for _, st in stores:
        why = _access(st.buffer, st.indices, v, ranges, store=True)
        if why:
            return why
        if _strided_reads(st.value, v, ranges) and _kept_in_memory(st.buffer, ranges[v]):
            # measured: the masked update of the tile's memory then stalls every window step
            # (a masked load does not forward from the masked store before it)
            return f"strided reads updating {st.buffer.name}, a register tile kept in memory"
        for n in E.walk(st.value):
            if isinstance(n, E.TensorRead):
                why = _access(n.tensor, n.indices, v, ranges, store=False)
                if why:
                    return why
            if (
                isinstance(n, E.Binary)
                and n.op in ("floordiv", "mod", "div")
                and n.dtype == "int32"
                and not isinstance(n.b, E.Const)
            ):
                return "an integer division by a value an inactive lane may make 0"
            if isinstance(n, E.Select) and v in E.free_vars(n.cond):
                for branch in (n.true_value, n.false_value):
                    for r in E.walk(branch):
                        if (
                            isinstance(r, E.TensorRead)
                            and getattr(r.tensor, "scope", "global") != "register"
                            and v not in E.free_vars(r)
                        ):
                            return f"a read of {r.tensor.name} under a per-lane test"
    return None


def _strided_reads(e: E.Expr, v: E.Var, ranges: Ranges) -> bool:
    """Whether ``e`` reads memory at a stride above 1 in ``v``."""
    return any(
        isinstance(n, E.TensorRead)
        and getattr(n.tensor, "scope", "global") != "register"
        and linear_coeff(flat_offset(n.tensor, n.indices, ranges), v, ranges) not in (0, 1)
        for n in E.walk(e)
    )


def _kept_in_memory(buf, lanes: int) -> bool:
    """Whether ``buf`` is a register tile whose rows are not whole vectors, so a row's last
    vector overlaps the next row and `promote_registers` keeps the tile in memory."""
    rows = math.prod(buf.shape[:-1])
    return getattr(buf, "scope", "global") == "register" and rows > 1 and buf.shape[-1] % lanes != 0


def _access(buf, idx: tuple[E.Expr, ...], v: E.Var, ranges: Ranges, store: bool) -> str | None:
    if buf.dtype not in MASKED_DTYPES:
        return f"{buf.name} is {buf.dtype}, which has no masked loads and stores"
    if getattr(buf, "scope", "global") == "register":
        return None
    stride = linear_coeff(flat_offset(buf, idx, ranges), v, ranges)
    if stride in (0, 1) or (not store and strided_load(stride, ranges[v])):
        return None
    return f"{'store to' if store else 'read of'} {buf.name} is not contiguous in {v.name}"
