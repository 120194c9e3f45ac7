"""Pass ``vectorize``: each vectorized loop becomes one the C printer can emit as vector code.

- A reduction over ``for r: for v (vectorized)`` into one element gets a vector accumulator: a
  register buffer of ``lanes`` elements summed across ``r``, its lanes combined once at the end;
  several such vector loops in ``r`` (an unrolled tile of dot products) get one each.
  With a tail (``if g: X[c] = X[c] op f``) the lanes that are off add the identity instead.
- Guards (tails, padding) inside a vectorized loop are tested at its first and last lane: the
  conditions are affine, so when both hold the whole vector is in range and the vector loop runs
  without them; otherwise the tail runs as one masked vector operation (``if c: store`` inside
  the vectorized loop: see `masks`), or, where no mask can express it (a gather, a bool
  buffer, ``masked=False`` for a target without masked loads), as the original guarded loop
  lane by lane.
- A loop that cannot be vectorized (a width that is not a power of two, a guard that is not
  affine in the lane) runs as a scalar loop, with a comment saying why.

Afterwards a vectorized loop holds only stores and masked stores (``if c: store``). Scalar loops
made here inside a register tile are unrolled (its lanes need constant indices), so ``unroll``
runs again after this pass.
"""

from __future__ import annotations

from ..errors import LoweringError
from ..ir.conditions import conjunction, conjuncts, split_conjuncts
from ..ir.nodes import Allocate, Buffer, Comment, For, IfThen, Seq, Stmt, Store, seq
from ..ir.printer import format_expr
from ..ir.simplify import Ranges, flat_offset, linear_coeff, simplify
from ..ir.visit import map_exprs, stmt_children, with_stmt_children
from ..te import expr as E
from .facts import Facts
from .masks import maskable, some_lane
from .unswitch import minimal

VECTOR_WIDTHS = (2, 4, 8, 16, 32, 64)
ACCUMULATOR_WIDTHS = (4, 8, 16, 32, 64)
COMBINERS = {"add": "sum", "max": "max", "min": "min"}
"""The reduction combiner of each operator that updates an accumulator (`reduction`)."""


def vectorize(s: Stmt, masked: bool = True) -> Stmt:
    """``s`` with vector accumulators, split vector tails and noted scalar fallbacks; tails are
    masked vector operations when ``masked`` (the default: the C is correct on every target)."""
    return _go(s, {}, False, masked)


def _go(s: Stmt, ranges: dict, in_registers: bool, masked: bool) -> Stmt:
    match s:
        case For(var, extent, "vectorized"):
            return _vector_loop(s, ranges, in_registers, masked)
        case For(var, extent, kind, body, comment):
            acc = _accumulate(s, ranges, in_registers, masked) if kind == "serial" else None
            if acc is not None:
                return acc
            inner = _go(body, {**ranges, var: extent}, in_registers, masked)
            return For(var, extent, kind, inner, comment)
        case Allocate(buf, body):
            return Allocate(buf, _go(body, ranges, in_registers or buf.scope == "register", masked))
    kids = tuple(_go(c, ranges, in_registers, masked) for c in stmt_children(s))
    return with_stmt_children(s, kids)


def reduction(value: E.Expr, buf) -> tuple[str, E.Expr] | None:
    """``(op, x)`` when ``value`` is ``buf[same] op x``: an update of an accumulator."""
    if isinstance(value, E.Binary) and value.op in COMBINERS:
        acc = value.a
        if isinstance(acc, E.TensorRead) and acc.tensor is buf:
            return value.op, value.b
    return None


def _accumulate(s: For, ranges: dict, in_registers: bool, masked: bool) -> Stmt | None:
    """``for r: for v (vectorized): X[c] = X[c] op f(r, v)`` with a vector accumulator whose
    lanes are combined into ``X[c]`` once, after the loop. Several such vector loops in a row (a
    tile unrolled into them: the rows of a matrix-vector product) get an accumulator each,
    updated in one vector loop: their chains of ``op`` overlap, and one tail test serves all.

    With a tail (``if g(r, v): X[c] = ...``, when ``masked``) the lanes that are off add the
    identity and the update loop gets a fast path and a masked tail. Tests that depend on
    neither ``r`` nor ``v`` stay an ``if`` around it all (they may guard ``X[c]`` itself)."""
    body = s.body.stmts if isinstance(s.body, Seq) else (s.body,)
    loops = [x for x in body if isinstance(x, For) and x.kind == "vectorized"]
    if not loops or len(loops) != len(body):
        return None
    lanes, v = loops[0].extent, loops[0].var
    if lanes not in ACCUMULATOR_WIDTHS or any(x.extent != lanes for x in loops):
        return None
    inside = {**ranges, s.var: s.extent, v: lanes}
    updates = []
    for x in loops:
        u = _update(x, s.var, v, inside, masked)
        if u is None:
            return None
        updates.append(u)
    dt, outer = updates[0][0].buffer.dtype, updates[0][3]
    targets = {st.buffer for st, _, _, _ in updates}
    if any(st.buffer.dtype != dt or o != outer for st, _, _, o in updates) or any(
        isinstance(n, E.TensorRead) and n.tensor in targets  # read before the sums land
        for _, _, rest, _ in updates
        for n in E.walk(rest)
    ):
        return None
    many = len(updates) > 1
    shape = (len(updates), lanes) if many else (lanes,)
    acc = Buffer(f"{updates[0][0].buffer.name}_acc", shape, dt, "register")

    def at(t: int, lane: E.Var) -> tuple[E.Expr, ...]:
        return (E.const(t), lane) if many else (lane,)

    v0, v2 = E.Var(v.name), E.Var(v.name)
    init, step, combine = [], [], []
    for t, (st, op, rest, _) in enumerate(updates):
        here = E.TensorRead(st.buffer, st.indices)
        init.append(
            For(
                v0, lanes, "vectorized", Store(acc, at(t, v0), E.reduce_identity(COMBINERS[op], dt))
            )
        )
        step.append(Store(acc, at(t, v), E.Binary(op, E.TensorRead(acc, at(t, v)), rest, dt)))
        combine.append(
            For(
                v2,
                lanes,
                "vectorized",
                Store(st.buffer, st.indices, E.Binary(op, here, E.TensorRead(acc, at(t, v2)), dt)),
            )
        )
    update = For(s.var, s.extent, "serial", For(v, lanes, "vectorized", seq(step)))
    done: Stmt = Allocate(acc, seq([*init, update, *combine]))
    if any(isinstance(x.body, IfThen) for x in loops):  # a tail: a fast path and a masked tail
        done = _go(done, ranges, in_registers, True)
    return IfThen(conjunction(outer), done) if outer else done


def _update(
    x: For, r: E.Var, v: E.Var, inside: dict, masked: bool
) -> tuple[Store, str, E.Expr, list[E.Expr]] | None:
    """One vector loop ``_accumulate`` takes, its lane renamed ``v``: ``(the store into X[c],
    op, what each step adds, the tests that depend on neither r nor v)``, or None when it does
    not update one element outside registers."""
    body = x.body if x.var is v else map_exprs(x.body, lambda e: E.substitute(e, {x.var: v}))
    cond = None
    if isinstance(body, IfThen) and body.orelse is None and masked:
        cond, body = body.cond, body.body
    if not isinstance(body, Store) or body.buffer.scope == "register":
        return None
    red = reduction(body.value, body.buffer)
    if red is None or E.free_vars(flat_offset(body.buffer, body.indices, inside)) & {r, v}:
        return None
    op, rest = red
    if cond is None:
        return body, op, rest, []
    outer, lane = split_conjuncts(cond, {r, v})
    if not lane or any(isinstance(n, E.TensorRead) for n in E.walk(cond)):
        return None
    dt = body.buffer.dtype
    kept = E.Select(conjunction(lane), rest, E.reduce_identity(COMBINERS[op], dt), dt)
    return body, op, kept, outer


def _vector_loop(s: For, ranges: dict, in_registers: bool, masked: bool) -> Stmt:
    v, lanes = s.var, s.extent
    scalar_kind = "unrolled" if in_registers else "serial"

    def fallback(reason: str) -> Stmt:
        note = Comment(f"vectorize {v.name} fell back to scalar: {reason}")
        return seq([note, For(v, lanes, scalar_kind, s.body, s.comment)])

    if lanes not in VECTOR_WIDTHS:
        return fallback(f"{lanes} lanes is not a power of two up to {VECTOR_WIDTHS[-1]}")
    guarded = _flatten(s.body, ())
    inside = {**ranges, v: lanes}
    conds: dict[E.Expr, None] = {}  # ordered: the C must not depend on hash order
    for guards, st in guarded:
        for c in (*guards, *_index_selects(st.value, v)):
            conds[simplify(c, inside)] = None
    tests: dict[E.Expr, None] = {}
    for c in conds:
        if isinstance(c, E.Const) and c.value:
            continue
        if not _affine_conjunction(c, v, inside):
            return fallback(f"guard {format_expr(c)} is not affine in {v.name}")
        for lane in (0, lanes - 1):
            tests[simplify(E.substitute(c, {v: E.Const(lane)}), ranges)] = None
    if any(isinstance(t, E.Const) and not t.value for t in tests):  # never a whole vector
        tail, is_masked = _tail(s, guarded, ranges, scalar_kind, masked)
        return tail if is_masked else fallback(f"no {lanes} consecutive lanes pass its guards")
    vector = For(
        v,
        lanes,
        "vectorized",
        seq(
            [
                Store(st.buffer, st.indices, _drop_selects(st.value, conds, inside))
                for _, st in guarded
            ]
        ),
        s.comment,
    )
    atoms: dict[E.Expr, None] = {}
    for t in tests:
        atoms.update((a, None) for a in conjuncts(t) if not isinstance(a, E.Const))
    if not atoms:
        return vector
    cond = conjunction(minimal(list(atoms), Facts()))
    return IfThen(cond, vector, _tail(s, guarded, ranges, scalar_kind, masked)[0])


def _tail(s: For, guarded, ranges: dict, scalar_kind: str, masked: bool) -> tuple[Stmt, bool]:
    """The lanes of ``s`` that are not a whole vector: one masked vector operation per store,
    each under the scalar test that some lane passes (`some_lane`), or the loop lane by lane
    with a note saying why not; and whether it is masked."""
    v, lanes = s.var, s.extent
    inside = {**ranges, v: lanes}
    why = maskable(guarded, v, inside) if masked else "masked tails are off for this target"
    stores: list[Stmt] = []
    for g, st in guarded if why is None else ():
        some = some_lane(conjunction(list(g)), v, lanes, ranges) if g else []
        if some is None:
            why = "a per-lane test that is not a bound on the lane"
            break
        stores.append(IfThen(conjunction([*some, *g]), st) if g else st)
    if why is None:
        return seq([Comment("vector tail: masked"), For(v, lanes, "vectorized", seq(stores))]), True
    note = Comment(f"vector tail: lane by lane ({why})")
    return seq([note, For(v, lanes, scalar_kind, s.body, s.comment)]), False


def _flatten(s: Stmt, guards: tuple[E.Expr, ...]) -> list[tuple[tuple[E.Expr, ...], Store]]:
    match s:
        case Store():
            return [(guards, s)]
        case IfThen(c, body, None):
            return _flatten(body, (*guards, c))
        case Seq(stmts):
            return [x for st in stmts for x in _flatten(st, guards)]
        case Comment():
            return []
    raise LoweringError(f"a vectorized loop must be innermost; found {type(s).__name__} inside it")


def _index_only(e: E.Expr) -> bool:
    return all(not isinstance(n, E.TensorRead) for n in E.walk(e))


def _index_selects(e: E.Expr, v: E.Var) -> list[E.Expr]:
    """Conditions of selects that depend only on indices (padding), including ``v``."""
    return [
        n.cond
        for n in E.walk(e)
        if isinstance(n, E.Select) and _index_only(n.cond) and v in E.free_vars(n.cond)
    ]


def _affine_conjunction(c: E.Expr, v: E.Var, ranges: Ranges) -> bool:
    match c:
        case E.Binary("and", a, b):
            return _affine_conjunction(a, v, ranges) and _affine_conjunction(b, v, ranges)
        case E.Compare(op, a, b) if op != "ne" and a.dtype == "int32":
            return linear_coeff(a - b, v, ranges) is not None
    return v not in E.free_vars(c)


def _drop_selects(e: E.Expr, conds: dict[E.Expr, None], ranges: Ranges) -> E.Expr:
    """Inside the vector fast path the padding selects are known true."""

    def post(x: E.Expr) -> E.Expr | None:
        if isinstance(x, E.Select) and simplify(x.cond, ranges) in conds:
            return x.true_value
        return None

    return E.rewrite(e, post)
