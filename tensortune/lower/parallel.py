"""Pass ``parallel``: which parallel loops really run in parallel, and a note where one cannot.

OpenMP gets one parallel region per kernel, so a parallel loop inside another runs serially; a
loop of extent 1 has nothing to share out; a kernel built for one thread runs every loop on it.
Each such loop becomes serial with a comment at its place, so a "2-thread" kernel that runs on
one thread says so in its C instead of silently dropping the pragma.
"""

from __future__ import annotations

from ..ir.nodes import Comment, For, Stmt, seq
from ..ir.visit import stmt_children, with_stmt_children


def parallel_loops(s: Stmt, num_threads: int) -> Stmt:
    """``s`` with every parallel loop that cannot run in parallel made serial and noted."""

    def go(node: Stmt, outer: str | None) -> Stmt:
        if isinstance(node, For) and node.kind == "parallel":
            name = node.var.name
            reason = None
            if node.extent == 1:
                reason = f"parallel on loop {name} of extent 1: runs on one thread"
            elif outer is not None:
                reason = f"parallel on loop {name} inside parallel loop {outer}: runs serially"
            elif num_threads <= 1:
                reason = f"parallel on loop {name}: the kernel is built for one thread"
            if reason is None:
                return For(node.var, node.extent, "parallel", go(node.body, name), node.comment)
            body = go(node.body, outer)
            return seq([Comment(reason), For(node.var, node.extent, "serial", body, node.comment)])
        return with_stmt_children(node, tuple(go(c, outer) for c in stmt_children(node)))

    return go(s, None)
