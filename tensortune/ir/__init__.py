"""Loop-nest IR, its simplifier and printer."""

from .nodes import Allocate, Buffer, Comment, For, IfThen, PrimFunc, Seq, Stmt, Store, seq
from .printer import format_expr, format_stmt
from .simplify import simplify

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
    "seq",
    "simplify",
]
