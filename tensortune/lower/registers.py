"""Pass ``promote_registers``: decide which register tiles really become named variables.

A ``register`` buffer whose every access has a constant offset once unrolled (a vector access: a
constant first lane and a constant stride) is printed as one C variable per scalar or vector it
is accessed as, which is what keeps accumulator tiles in registers. One accessed any other way
(a non-constant index, or as overlapping but different vectors) is kept as a local array, with a
comment saying so. The decision is made here, once; the printer names the variables with the
same ``RegisterNames`` and cannot fail.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..ir.nodes import Allocate, Buffer, Comment, For, IfThen, Stmt, Store, seq
from ..ir.simplify import flat_offset, linear_coeff, simplify
from ..ir.visit import map_exprs, stmt_children, with_stmt_children
from ..te.expr import Const, Expr, TensorRead, free_vars, rewrite, substitute, walk


class NotPromotable(Exception):
    """A register buffer is accessed in a way named variables cannot express."""


@dataclass
class RegisterNames:
    """Named variables for a register buffer: scalars, or vectors of ``lanes`` elements
    ``stride`` apart (a tile vectorized along a dimension that is not the buffer's last)."""

    buffer: Buffer
    names: dict[tuple[int, int, int], str] = field(default_factory=dict)  # (off, lanes, stride)

    def name(self, offset: int, lanes: int, stride: int = 1) -> str:
        """The variable (or vector lane) holding ``lanes`` elements from ``offset``."""
        if lanes == 1:
            stride = 1
        if stride <= 0:
            raise NotPromotable
        mine = {offset + k * stride for k in range(lanes)}
        for (off, n, step), existing in self.names.items():
            theirs = range(off, off + n * step, step)
            if not any(x in theirs for x in mine):
                continue
            if lanes == 1 and n > 1:
                return f"{existing}[{(offset - off) // step}]"  # one lane of a vector variable
            if (off, n, step) != (offset, lanes, stride):
                raise NotPromotable
        key = (offset, lanes, stride)
        if key not in self.names:
            suffix = f"v{offset}" if lanes > 1 else f"{offset}"
            self.names[key] = f"{self.buffer.name}_{suffix}"
        return self.names[key]

    def access(self, idx: tuple[Expr, ...], ranges: dict, vec: tuple | None) -> str:
        """The name for ``buffer[idx]``, inside the vector loop ``vec = (var, lanes)`` if any."""
        off = flat_offset(self.buffer, idx, ranges)
        if vec is not None and vec[0] in free_vars(off):
            v, lanes = vec
            stride = linear_coeff(off, v, ranges)
            base = simplify(substitute(off, {v: Const(0)}), ranges)
            if stride is None or not isinstance(base, Const):
                raise NotPromotable
            return self.name(int(base.value), lanes, stride)
        if not isinstance(off, Const):
            raise NotPromotable
        return self.name(int(off.value), 1)


def promote_registers(s: Stmt) -> Stmt:
    """``s`` with each register buffer that cannot be named variables made a local array."""

    def go(node: Stmt) -> Stmt:
        node = with_stmt_children(node, tuple(go(c) for c in stmt_children(node)))
        if not (isinstance(node, Allocate) and node.buffer.scope == "register"):
            return node
        try:
            _visit(node.body, RegisterNames(node.buffer), {}, None)
            return node
        except NotPromotable:
            pass
        old = node.buffer
        new = Buffer(old.name, old.shape, old.dtype, "local")
        note = Comment(f"register tile {old.name} kept in memory: indices not constant")
        return Allocate(new, seq([note, _rebind(node.body, old, new)]))

    return go(s)


def _visit(s: Stmt, names: RegisterNames, ranges: dict, vec: tuple | None) -> None:
    """Name every access to ``names.buffer`` in program order, as the printer will."""
    buf = names.buffer
    match s:
        case For(var, extent, kind, body):
            inner_vec = (var, extent) if kind == "vectorized" else vec
            _visit(body, names, {**ranges, var: extent}, inner_vec)
            return
        case Store(b, idx, value):
            for e in (value, *idx):
                _reads(e, names, ranges, vec)
            if b is buf:
                names.access(idx, ranges, vec)
            return
        case IfThen(cond):
            _reads(cond, names, ranges, vec)
    for c in stmt_children(s):
        _visit(c, names, ranges, vec)


def _reads(e: Expr, names: RegisterNames, ranges: dict, vec: tuple | None) -> None:
    for n in walk(e):
        if isinstance(n, TensorRead) and n.tensor is names.buffer:
            names.access(n.indices, ranges, vec)


def _rebind(s: Stmt, old: Buffer, new: Buffer) -> Stmt:
    """``s`` with every access to ``old`` made to ``new``."""

    def expr(e: Expr) -> Expr:
        return rewrite(
            e,
            lambda x: (
                TensorRead(new, x.indices)
                if isinstance(x, TensorRead) and x.tensor is old
                else None
            ),
        )

    def stmt(node: Stmt) -> Stmt:
        node = with_stmt_children(node, tuple(stmt(c) for c in stmt_children(node)))
        if isinstance(node, Store) and node.buffer is old:
            return Store(new, node.indices, node.value)
        return node

    return map_exprs(stmt(s), expr)
