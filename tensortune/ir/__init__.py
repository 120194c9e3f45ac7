"""Loop-nest IR, its simplifier and printer."""

from .nodes import (
    Allocate,
    Buffer,
    Comment,
    For,
    IfThen,
    PrimFunc,
    Seq,
    Stmt,
    Store,
    seq,
    walk_stmts,
)
from .printer import format_expr, format_stmt
from .simplify import simplify
from .width import needs_64bit_indices

__all__ = [
    "Allocate",
    "Buffer",
    "Comment",
    "For",
    "IfThen",
    "PrimFunc",
    "Seq",
    "Stmt",
    "Store",
    "format_expr",
    "format_stmt",
    "needs_64bit_indices",
    "seq",
    "simplify",
    "walk_stmts",
]
