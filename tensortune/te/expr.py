"""Scalar expression nodes of the tensor-expression DSL.

Nodes are frozen dataclasses, so structurally equal expressions compare and hash equal;
variables carry a unique id so that two loops both called ``i`` never collide. Python
operators build nodes.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from ..dtype import FLOAT_DTYPES, TENSOR_DTYPES
from ..dtype import dtype as dtype_info
from ..errors import DSLError

if TYPE_CHECKING:
    from .tensor import Tensor

BINARY_OPS = ("add", "sub", "mul", "div", "floordiv", "mod", "max", "min", "and", "or")
COMPARE_OPS = ("lt", "le", "gt", "ge", "eq", "ne")
EXP_FUNCS = ("exp", "exp_nonpos")  # exp_nonpos: exp of an argument known to be <= 0 (softmax)
MATH_FUNCS = (*EXP_FUNCS, "log", "tanh", "erf", "sqrt", "rsqrt", "abs", "sigmoid", "neg", "not")

_uid = itertools.count()


def check_dtype(name: str) -> str:
    """``name`` if a tensor may hold it (a row of ``tensortune.dtype``), else a DSLError."""
    if name not in TENSOR_DTYPES:
        raise DSLError(f"unknown dtype '{name}': use one of {', '.join(TENSOR_DTYPES)}")
    return name


def promote(a: str, b: str) -> str:
    """The dtype of a binary operation on ``a`` and ``b``: the higher promotion rank wins."""
    return a if dtype_info(a).rank >= dtype_info(b).rank else b


class Storage(Protocol):
    """What a read names: a DSL ``Tensor`` before lowering, an IR ``Buffer`` after it."""

    @property
    def name(self) -> str: ...

    @property
    def shape(self) -> tuple[int, ...]: ...

    @property
    def dtype(self) -> str: ...


class Expr:
    """Operator overloading shared by every node; subclasses are frozen dataclasses."""

    __slots__ = ("_hash",)  # see _hash_once
    dtype: str

    def __add__(self, o: Any) -> Expr:
        return binary("add", self, o)

    def __radd__(self, o: Any) -> Expr:
        return binary("add", o, self)

    def __sub__(self, o: Any) -> Expr:
        return binary("sub", self, o)

    def __rsub__(self, o: Any) -> Expr:
        return binary("sub", o, self)

    def __mul__(self, o: Any) -> Expr:
        return binary("mul", self, o)

    def __rmul__(self, o: Any) -> Expr:
        return binary("mul", o, self)

    def __truediv__(self, o: Any) -> Expr:
        return binary("div", self, o)

    def __rtruediv__(self, o: Any) -> Expr:
        return binary("div", o, self)

    def __floordiv__(self, o: Any) -> Expr:
        return binary("floordiv", self, o)

    def __rfloordiv__(self, o: Any) -> Expr:
        return binary("floordiv", o, self)

    def __mod__(self, o: Any) -> Expr:
        return binary("mod", self, o)

    def __rmod__(self, o: Any) -> Expr:
        return binary("mod", o, self)

    def __neg__(self) -> Expr:
        return Call("neg", (self,), self.dtype)

    def __lt__(self, o: Any) -> Expr:
        return compare("lt", self, o)

    def __le__(self, o: Any) -> Expr:
        return compare("le", self, o)

    def __gt__(self, o: Any) -> Expr:
        return compare("gt", self, o)

    def __ge__(self, o: Any) -> Expr:
        return compare("ge", self, o)

    def __and__(self, o: Any) -> Expr:
        return binary("and", self, o)

    def __or__(self, o: Any) -> Expr:
        return binary("or", self, o)

    def __invert__(self) -> Expr:
        return Call("not", (self,), "bool")

    def __bool__(self) -> bool:
        raise DSLError(
            "a tensor expression has no truth value: use tt.select(cond, a, b) instead of if/and/or"
        )


@dataclass(frozen=True, slots=True)
class Const(Expr):
    value: int | float | bool
    dtype: str = "int32"

    def __repr__(self) -> str:
        return repr(self.value)


@dataclass(frozen=True, slots=True)
class Var(Expr):
    """An integer index variable (a loop or an axis)."""

    name: str
    uid: int = field(default_factory=lambda: next(_uid))
    dtype: str = "int32"

    def __repr__(self) -> str:
        return self.name


@dataclass(frozen=True, slots=True)
class IterVar:
    """An axis of a compute: a variable with a constant extent, spatial or reduce."""

    var: Var
    extent: int
    kind: str = "spatial"  # or "reduce"

    @property
    def name(self) -> str:
        return self.var.name


# An axis stands for its variable in arithmetic, so ``A[p * 2 + r]`` works with a reduce axis r.
for _op in (
    "add", "radd", "sub", "rsub", "mul", "rmul", "floordiv", "rfloordiv", "mod", "rmod",
    "lt", "le", "gt", "ge", "neg",
):  # fmt: skip
    setattr(
        IterVar,
        f"__{_op}__",
        (lambda name: lambda self, *other: getattr(self.var, name)(*other))(f"__{_op}__"),
    )


@dataclass(frozen=True, slots=True)
class Binary(Expr):
    op: str
    a: Expr
    b: Expr
    dtype: str


@dataclass(frozen=True, slots=True)
class Compare(Expr):
    op: str
    a: Expr
    b: Expr
    dtype: str = "bool"


@dataclass(frozen=True, slots=True)
class Select(Expr):
    cond: Expr
    true_value: Expr
    false_value: Expr
    dtype: str


@dataclass(frozen=True, slots=True)
class Call(Expr):
    """A math function or unary operator applied elementwise."""

    func: str
    args: tuple[Expr, ...]
    dtype: str


@dataclass(frozen=True, slots=True)
class Cast(Expr):
    value: Expr
    dtype: str


@dataclass(frozen=True, slots=True)
class TensorRead(Expr):
    """An element of ``tensor``: a DSL ``Tensor`` in a compute body, a ``Buffer`` once lowered."""

    tensor: Storage
    indices: tuple[Expr, ...]

    @property
    def dtype(self) -> str:  # type: ignore[override]
        return self.tensor.dtype


@dataclass(frozen=True, slots=True)
class Reduce(Expr):
    """A commutative reduction over reduce axes; only allowed at the top of a compute body."""

    combiner: str  # sum | max | min
    source: Expr
    axes: tuple[IterVar, ...]
    dtype: str


def _hash_once(cls: Any) -> None:
    """Give ``cls`` its structural hash, computed once per node (memo tables key on them)."""
    structural = cls.__hash__

    def cached(self: Any) -> int:
        if (h := getattr(self, "_hash", None)) is None:
            object.__setattr__(self, "_hash", h := structural(self))
        return h

    cls.__hash__ = cached


for _cls in (Var, Binary, Compare, Select, Call, Cast, TensorRead, Reduce):
    _hash_once(_cls)


def reduce_identity(combiner: str, dtype: str) -> Const:
    """The value a reduction starts from: adding it changes nothing."""
    if combiner == "sum":
        return const(0, dtype)
    if dtype == "int32":
        return Const(-(2**31) if combiner == "max" else 2**31 - 1, "int32")
    if dtype == "bool":  # max is "any" (starts false), min is "all" (starts true)
        return Const(combiner == "min", "bool")
    return const(float("-inf") if combiner == "max" else float("inf"), dtype)


def const(value: int | float | bool, dtype: str | None = None) -> Const:
    if dtype is None:
        dtype = (
            "bool" if isinstance(value, bool) else "int32" if isinstance(value, int) else "float32"
        )
    check_dtype(dtype)
    if dtype in FLOAT_DTYPES:
        value = float(value)
    elif dtype == "int32":
        value = int(value)
    return Const(value, dtype)


def as_expr(value: Any, like: str | None = None) -> Expr:
    """Wrap Python scalars; a bare scalar takes the dtype of the expression it meets (as in TVM)."""
    if isinstance(value, Expr):
        return value
    if isinstance(value, IterVar):
        return value.var
    if isinstance(value, bool):
        return const(value, "bool")
    if isinstance(value, int):
        return const(value, like if like in ("int32", "float32", "float64") else "int32")
    if isinstance(value, float):
        return const(value, like if like in FLOAT_DTYPES else "float32")
    raise DSLError(f"cannot use {type(value).__name__} {value!r} in a tensor expression")


def binary(op: str, a: Any, b: Any) -> Expr:
    a, b = _pair(a, b)
    if op in ("and", "or"):
        if a.dtype != "bool" or b.dtype != "bool":
            raise DSLError(f"'{op}' needs boolean operands, got {a.dtype} and {b.dtype}")
        return Binary(op, a, b, "bool")
    ints = a.dtype == "int32" and b.dtype == "int32"
    if op in ("floordiv", "mod") and not ints and (op == "mod" or "bool" in (a.dtype, b.dtype)):
        raise DSLError(f"'{op}' needs int32 operands, got {a.dtype} and {b.dtype}")
    dtype = promote(a.dtype, b.dtype)
    if op == "div" and dtype == "int32":
        raise DSLError("'/' on integers is ambiguous: use '//' for floor division or cast to float")
    return Binary(op, _cast_to(a, dtype), _cast_to(b, dtype), dtype)


def compare(op: str, a: Any, b: Any) -> Expr:
    a, b = _pair(a, b)
    dtype = promote(a.dtype, b.dtype)
    return Compare(op, _cast_to(a, dtype), _cast_to(b, dtype))


def _pair(a: Any, b: Any) -> tuple[Expr, Expr]:
    if isinstance(a, Expr):
        return a, as_expr(b, a.dtype)
    if isinstance(b, Expr):
        return as_expr(a, b.dtype), b
    return as_expr(a), as_expr(b)


def _cast_to(e: Expr, dtype: str) -> Expr:
    if e.dtype == dtype:
        return e
    if isinstance(e, Const):
        return const(e.value, dtype)
    return Cast(e, dtype)


# Per node type: its children, and the node rebuilt with new ones (traversals ask per node).
_NODES: dict[type, tuple[Callable[[Any], tuple[Expr, ...]], Callable[[Any, tuple], Expr]]] = {
    Binary: (lambda e: (e.a, e.b), lambda e, n: Binary(e.op, n[0], n[1], e.dtype)),
    Compare: (lambda e: (e.a, e.b), lambda e, n: Compare(e.op, n[0], n[1])),
    Select: (
        lambda e: (e.cond, e.true_value, e.false_value),
        lambda e, n: Select(n[0], n[1], n[2], e.dtype),
    ),
    Call: (lambda e: e.args, lambda e, n: Call(e.func, n, e.dtype)),
    Cast: (lambda e: (e.value,), lambda e, n: Cast(n[0], e.dtype)),
    TensorRead: (lambda e: e.indices, lambda e, n: TensorRead(e.tensor, n)),
    Reduce: (lambda e: (e.source,), lambda e, n: Reduce(e.combiner, n[0], e.axes, e.dtype)),
}


def children(e: Expr) -> tuple[Expr, ...]:
    node = _NODES.get(type(e))
    return () if node is None else node[0](e)


def rebuild(e: Expr, new: tuple[Expr, ...]) -> Expr:
    """The same node with new children; returns ``e`` itself when nothing changed."""
    if all(x is y for x, y in zip(new, children(e), strict=True)):
        return e
    return _NODES[type(e)][1](e, new)


def walk(e: Expr) -> Iterator[Expr]:
    """Every node of ``e`` in pre-order (iterative: expressions may nest deeply)."""
    stack = [e]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(children(node)))


def rewrite(e: Expr, post: Callable[[Expr], Expr | None]) -> Expr:
    """Post-order rewrite: children first, then ``post`` on the rebuilt node (None keeps it).

    The one recursion over expression nodes a rewrite needs; a pass says only what it changes,
    and subtrees it leaves alone are shared, not copied.
    """
    kids = children(e)
    if kids:
        new = tuple([rewrite(k, post) for k in kids])
        if any(a is not b for a, b in zip(new, kids, strict=True)):
            e = _NODES[type(e)][1](e, new)
    out = post(e)
    return e if out is None else out


def substitute(e: Expr, mapping: dict[Var, Expr]) -> Expr:
    """``e`` with each variable in ``mapping`` replaced by its expression."""
    if not mapping:
        return e
    return rewrite(e, lambda n: mapping.get(n) if isinstance(n, Var) else None)


def free_vars(e: Expr) -> set[Var]:
    """The variables ``e`` depends on (the DSL has no binders, so every variable is free)."""
    return {n for n in walk(e) if isinstance(n, Var)}


def tensors_read(e: Expr) -> tuple[Tensor, ...]:
    """The tensors ``e`` reads, each once, in first-read (pre-)order: a compute's inputs.

    ``e`` is a compute body; the buffers a lowered expression reads are not tensors and are left
    out."""
    from .tensor import Tensor  # tensor.py builds on this module

    seen: dict[int, Tensor] = {}
    for node in walk(e):
        if isinstance(node, TensorRead) and isinstance(node.tensor, Tensor):
            seen.setdefault(id(node.tensor), node.tensor)
    return tuple(seen.values())
