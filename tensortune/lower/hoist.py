"""Which guards of a register tile can be checked once outside its reduction loop."""

from __future__ import annotations

from collections.abc import Collection

from ..ir.simplify import simplify
from ..schedule.stage import Loop, Stage
from ..te.expr import Binary, Compare, Const, Expr, Var, free_vars, substitute


def hoistable_guards(
    st: Stage,
    loops: list[Loop],
    ext: dict[str, int],
    guards: list[Expr],
    first_reduce: int | None,
) -> dict[int, Expr]:
    """Guards inside the reduction that only unrolled or vector loops below it vary, each as
    the condition that it holds for every iteration of those loops: ``{id(guard): that}``.

    A register tile at a ragged edge is guarded lane by lane inside its reduction loop, and
    lane access keeps the accumulators out of registers in every tile. With the guards checked
    once outside the reduction, every tile but the edge ones runs the unguarded loop.
    """
    if first_reduce is None:
        return {}
    inner = {
        lp.var: ext[lp.name] - 1
        for lp in loops[first_reduce:]
        if lp.kind == "spatial" and st.annotations.get(lp.name) in ("unrolled", "vectorized")
    }
    varying_inside = {lp.var for lp in loops[first_reduce:]} - inner.keys()
    out: dict[int, Expr] = {}
    for g in guards:
        used = free_vars(g)
        if (
            used & inner.keys()
            and not used & varying_inside
            and isinstance(g, Compare)
            and g.op == "lt"
            and grows_with(g.a, inner.keys())
            and not free_vars(g.b) & inner.keys()
        ):
            out[id(g)] = simplify(substitute(g, {v: Const(inner[v]) for v in used & inner.keys()}))
    return out


def grows_with(e: Expr, vs: Collection[Var]) -> bool:
    """Whether ``e`` never decreases as any of the variables ``vs`` grows."""
    if not free_vars(e) & set(vs):
        return True
    match e:
        case Var():
            return True
        case Binary("add", a, b):
            return grows_with(a, vs) and grows_with(b, vs)
        case Binary("mul", a, Const(value=c)) | Binary("mul", Const(value=c), a):
            return c >= 0 and grows_with(a, vs)
        case Binary("floordiv", a, Const(value=c)):
            return c > 0 and grows_with(a, vs)
    return False
