"""The loop-nest IR: buffers, loops, stores, guards and allocations.

Expressions are the DSL's own nodes; a read of a buffer is a ``TensorRead`` whose tensor is a
``Buffer`` (buffers quack like tensors: name, shape, dtype).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..dtype import dtype
from ..te.expr import Expr, Var

LOOP_KINDS = ("serial", "parallel", "vectorized", "unrolled")
SCOPES = ("global", "local", "register")


@dataclass(frozen=True, eq=False)
class Buffer:
    """Storage for one tensor; ``global`` temporaries live on the heap, ``local`` on the stack."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    scope: str = "global"

    @property
    def size(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def nbytes(self) -> int:
        return self.size * dtype(self.dtype).size

    def __repr__(self) -> str:
        return f"Buffer({self.name}{list(self.shape)}, {self.dtype}, {self.scope})"


class Stmt:
    __slots__ = ()


@dataclass(frozen=True, slots=True)
class For(Stmt):
    var: Var
    extent: int
    kind: str
    body: Stmt
    comment: str = ""


@dataclass(frozen=True, slots=True)
class Store(Stmt):
    buffer: Buffer
    indices: tuple[Expr, ...]
    value: Expr


@dataclass(frozen=True, slots=True)
class Seq(Stmt):
    stmts: tuple[Stmt, ...]


@dataclass(frozen=True, slots=True)
class IfThen(Stmt):
    """``if cond: body else: orelse`` (``orelse`` None when there is no else branch)."""

    cond: Expr
    body: Stmt
    orelse: Stmt | None = None


@dataclass(frozen=True, slots=True)
class Allocate(Stmt):
    buffer: Buffer
    body: Stmt


@dataclass(frozen=True, slots=True)
class Comment(Stmt):
    text: str


@dataclass(frozen=True)
class PrimFunc:
    """One kernel: parameters in calling order, heap temporaries, and the loop nest."""

    name: str
    params: tuple[Buffer, ...]
    outputs: tuple[Buffer, ...]
    temporaries: tuple[Buffer, ...]
    body: Stmt
    num_threads: int = 1


def seq(stmts) -> Stmt:
    flat: list[Stmt] = []
    for s in stmts:
        if isinstance(s, Seq):
            flat.extend(s.stmts)
        elif s is not None:
            flat.append(s)
    return flat[0] if len(flat) == 1 else Seq(tuple(flat))


def walk_stmts(s: Stmt):
    """Every statement in a tree, pre-order."""
    yield s
    match s:
        case Seq(stmts):
            for x in stmts:
                yield from walk_stmts(x)
        case IfThen(body=body, orelse=orelse):
            yield from walk_stmts(body)
            if orelse is not None:
                yield from walk_stmts(orelse)
        case For(body=body) | Allocate(body=body):
            yield from walk_stmts(body)
