"""A readable, Python-like rendering of the loop IR (for humans, ``--emit-ir`` and golden tests).

It follows the C line for line: a vectorized loop of stores prints one line per store (as the C
prints one vector statement), branches print ``else:`` where the C has ``} else {``, comments are
the C's comments.
"""

from __future__ import annotations

from ..te import expr as E
from .conditions import split_conjuncts
from .nodes import Allocate, Comment, For, IfThen, PrimFunc, Seq, Stmt, Store

_SYM = {
    "add": "+", "sub": "-", "mul": "*", "div": "/", "floordiv": "//", "mod": "%",
    "and": "and", "or": "or", "lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!=",
}  # fmt: skip


def format_expr(e: E.Expr) -> str:
    match e:
        case E.Const(v):
            return repr(v)
        case E.Var(name):
            return name
        case E.Binary("max" | "min" as op, a, b):
            return f"{op}({format_expr(a)}, {format_expr(b)})"
        case E.Binary(op, a, b) | E.Compare(op, a, b):
            return f"({format_expr(a)} {_SYM[op]} {format_expr(b)})"
        case E.Select(c, t, f):
            return f"select({format_expr(c)}, {format_expr(t)}, {format_expr(f)})"
        case E.Call(func, args):
            return f"{func}({', '.join(format_expr(a) for a in args)})"
        case E.Cast(v, dt):
            return f"{dt}({format_expr(v)})"
        case E.TensorRead(t, idx):
            return f"{t.name}[{', '.join(format_expr(i) for i in idx)}]"
        case E.Reduce(comb, src, axes):
            return f"{comb}({format_expr(src)}, axis=[{', '.join(a.name for a in axes)}])"
    return repr(e)


def format_stmt(s: Stmt | PrimFunc, indent: int = 0) -> str:
    pad = "  " * indent
    match s:
        case PrimFunc(name, params, _, temps, body):
            sig = ", ".join(f"{b.name}: {b.dtype}{list(b.shape)}" for b in params)
            head = [f"def {name}({sig}):"]
            head += [f"  alloc {b.name}: {b.dtype}{list(b.shape)}" for b in temps]
            return "\n".join([*head, format_stmt(body, 1)])
        case For(var, extent, "vectorized", body, _) if _only_stores(body):
            stores = body.stmts if isinstance(body, Seq) else (body,)
            tag = f"  # vector: {var.name} in range({extent})"
            return "\n".join(
                _masked(x, var, indent) + tag
                if isinstance(x, IfThen)
                else format_stmt(x, indent) + ("" if isinstance(x, Comment) else tag)
                for x in stores
            )
        case For(var, extent, kind, body, _):
            tag = "" if kind == "serial" else f"  # {kind}"
            return f"{pad}for {var.name} in range({extent}):{tag}\n{format_stmt(body, indent + 1)}"
        case Store(buf, idx, value):
            index = ", ".join(format_expr(i) for i in idx)
            return f"{pad}{buf.name}[{index}] = {format_expr(value)}"
        case Seq(stmts):
            return "\n".join(format_stmt(x, indent) for x in stmts)
        case IfThen(cond, body, orelse):
            text = f"{pad}if {format_expr(cond)}:\n{format_stmt(body, indent + 1)}"
            if orelse is not None:
                text += f"\n{pad}else:\n{format_stmt(orelse, indent + 1)}"
            return text
        case Allocate(buf, body):
            alloc = f"{pad}alloc {buf.name}: {buf.dtype}{list(buf.shape)} ({buf.scope})"
            return f"{alloc}\n{format_stmt(body, indent)}"
        case Comment(text):
            return f"{pad}# {text}"
    raise TypeError(s)


def _only_stores(s: Stmt) -> bool:
    stmts = s.stmts if isinstance(s, Seq) else (s,)
    return all(
        isinstance(x, Store | Comment)
        or (isinstance(x, IfThen) and isinstance(x.body, Store) and x.orelse is None)
        for x in stmts
    )


def _masked(s: IfThen, v: E.Var, indent: int) -> str:
    """A masked vector store, as the C prints it: ``if`` on the part of the test that does not
    depend on the lane, the rest as the mask (``C[i, j mask (j < 37)] = ...``)."""
    scalar, lanes = split_conjuncts(s.cond, {v})
    st = s.body
    assert isinstance(st, Store)
    pad = "  " * indent
    mask = " and ".join(format_expr(a) for a in lanes)
    index = ", ".join(format_expr(i) for i in st.indices) + (f" mask {mask}" if lanes else "")
    line = f"{st.buffer.name}[{index}] = {format_expr(st.value)}"
    if not scalar:
        return f"{pad}{line}"
    return f"{pad}if {' and '.join(format_expr(a) for a in scalar)}:\n{pad}  {line}"
