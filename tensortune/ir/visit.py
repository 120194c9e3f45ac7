"""Generic traversal of the loop IR: one place that knows each statement's children and
expressions, so passes say only what they change instead of copying a recursion per node type."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from ..te.expr import Expr
from .nodes import Allocate, For, IfThen, Seq, Stmt, Store, seq


def stmt_children(s: Stmt) -> tuple[Stmt, ...]:
    """The statements directly inside ``s``."""
    match s:
        case Seq(stmts):
            return stmts
        case For(body=body) | Allocate(body=body):
            return (body,)
        case IfThen(body=body, orelse=orelse):
            return (body,) if orelse is None else (body, orelse)
    return ()


def with_stmt_children(s: Stmt, new: tuple[Stmt, ...]) -> Stmt:
    """``s`` with new child statements; ``s`` itself when nothing changed."""
    old = stmt_children(s)
    if len(old) == len(new) and all(a is b for a, b in zip(old, new, strict=True)):
        return s
    match s:
        case Seq():
            return seq(new)
        case For(var, extent, kind, _, comment):
            return For(var, extent, kind, new[0], comment)
        case Allocate(buf):
            return Allocate(buf, new[0])
        case IfThen(cond):
            return IfThen(cond, new[0], new[1] if len(new) > 1 else None)
    raise TypeError(s)


def rewrite(s: Stmt, post: Callable[[Stmt], Stmt | None]) -> Stmt:
    """Post-order rewrite: children first, then ``post`` on the rebuilt node (None keeps it)."""
    node = with_stmt_children(s, tuple(rewrite(c, post) for c in stmt_children(s)))
    out = post(node)
    return node if out is None else out


def stmt_exprs(s: Stmt) -> tuple[Expr, ...]:
    """The expressions a statement holds itself (not those of the statements inside it)."""
    match s:
        case Store(_, idx, value):
            return (*idx, value)
        case IfThen(cond):
            return (cond,)
    return ()


def map_exprs(s: Stmt, f: Callable[[Expr], Expr]) -> Stmt:
    """``s`` with ``f`` applied to every expression a statement holds (post-order over
    statements; ``f`` sees whole expressions, e.g. an index or a stored value)."""

    def post(node: Stmt) -> Stmt | None:
        match node:
            case Store(buf, idx, value):
                new_idx, new_value = tuple(f(i) for i in idx), f(value)
                if new_value is value and all(a is b for a, b in zip(new_idx, idx, strict=True)):
                    return None  # unchanged: keep the node (and so its parents) as they are
                return Store(buf, new_idx, new_value)
            case IfThen(cond, body, orelse):
                new_cond = f(cond)
                return None if new_cond is cond else IfThen(new_cond, body, orelse)
        return None

    return rewrite(s, post)


def walk_exprs(s: Stmt) -> Iterator[Expr]:
    """Every expression held anywhere in ``s`` (top-level ones; walk each for sub-expressions)."""
    stack = [s]
    while stack:
        node = stack.pop()
        yield from stmt_exprs(node)
        stack.extend(reversed(stmt_children(node)))
