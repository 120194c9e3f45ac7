"""Bound inference: which region of a producer one iteration of a consumer's loop needs.

Indices are affine in the consumer's loop variables in every operator we lower; the region of a read
is then ``[lo, lo + extent)`` where ``lo`` is symbolic in the loops outside the attach point and
the extent is a constant, which is what lets an attached stage get a fixed-size buffer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..ir.simplify import Ranges, atom_range, expr_range, from_linear, simplify, to_linear
from ..te.expr import Const, Expr, Var, free_vars

Region = tuple[tuple[Expr, int], ...]  # per dimension: (min, extent)


def read_range(index: Expr, varying: Ranges, context: Ranges) -> tuple[Expr, int] | None:
    """(lo, extent) of ``index`` while ``varying`` vars sweep their ranges, others held fixed."""
    all_ranges = {**context, **varying}
    terms, c0 = to_linear(simplify(index, all_ranges), all_ranges)
    fixed: dict[Expr, int] = {}
    lo, span = c0, 0
    for atom, k in terms.items():
        inner = free_vars(atom)
        if not inner & varying.keys():
            fixed[atom] = k
            continue
        if not inner <= varying.keys():
            return None
        r = atom_range(atom, varying)
        if r is None:
            return None
        a, b = k * r[0], k * r[1]
        lo += min(a, b)
        span += abs(b - a)
    return from_linear((fixed, lo)), span + 1


def union(ranges: Sequence[tuple[Expr, int]], context: Ranges) -> tuple[Expr, int] | None:
    lo, ext = ranges[0]
    for other_lo, other_ext in ranges[1:]:
        delta = simplify(other_lo - lo, context)
        if not isinstance(delta, Const):
            return None
        d = int(delta.value)
        hi = max(d + other_ext, ext)
        if d < 0:
            lo = other_lo
        ext = hi - min(d, 0)
    return lo, ext


def region_of_reads(
    reads: Sequence[Sequence[Expr]],
    shape: Sequence[int],
    varying: Ranges,
    context: Ranges,
    whole_tile: bool = False,
) -> Region:
    """The box covering every read, each dimension the whole tensor when unknown, and also when
    at least as large, unless ``whole_tile``: a register tile keeps its box past the tensor's
    end, so its rows stay whole vectors (a row of 28 in a 32-wide tile would make each row's
    last vector overlap the next row, which named variables cannot hold); the lanes past the
    end are guarded, so they run masked."""
    out: list[tuple[Expr, int]] = []
    for dim, full in enumerate(shape):
        per_read = [read_range(idx[dim], varying, context) for idx in reads]
        known = [r for r in per_read if r is not None]
        box = union(known, context) if len(known) == len(per_read) else None
        if box is None or box[1] == full or (box[1] > full and not whole_tile):
            out.append((Const(0), full))
        else:
            out.append(box)
    return tuple(out)


def may_be_negative(e: Expr, ranges: Mapping[Var, int]) -> bool:
    r = expr_range(e, ranges)
    return r is None or r[0] < 0
