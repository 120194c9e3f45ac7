"""A stage: one compute tensor and the loop structure chosen for it.

A stage starts with one root loop per axis (spatial axes, then reduce axes). ``split`` and ``fuse``
relate loops; the current ``leaves`` are the loops that will exist in the generated nest, outermost
first. Extents of non-root loops derive from the root extents, so a stage computed inside another
can re-derive them from the region it is asked for.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from ..te.expr import Expr, IterVar, Var
from ..te.tensor import Tensor


class Attach(tuple):
    """Where a stage is computed: ``Root()``, ``Inline()`` or ``At(stage, loop)``.

    Match on the type (``isinstance(st.attach, At)``, ``st.attach.loop``). Each is also the
    tuple it replaces (``("root",)``, ``("inline",)``, ``("at", stage, loop)``), so code that
    compares or unpacks the tuples keeps working.
    """

    __slots__ = ()

    @property
    def kind(self) -> str:
        """``"root"``, ``"inline"`` or ``"at"``."""
        return self[0]


class _Placed(Attach):
    """An attach point with no arguments: the tuple of its kind alone."""

    __slots__ = ()
    KIND: ClassVar[str]

    def __new__(cls) -> _Placed:
        return tuple.__new__(cls, (cls.KIND,))

    def __getnewargs__(self) -> tuple[()]:
        return ()

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class Root(_Placed):
    """Computed in its own loop nest at the top level, into a buffer of its full shape."""

    __slots__ = ()
    KIND = "root"


class Inline(_Placed):
    """Substituted into its readers: no buffer and no loops of its own."""

    __slots__ = ()
    KIND = "inline"


class At(Attach):
    """Computed inside ``stage``'s loop ``loop``: the region one iteration of it reads."""

    __slots__ = ()
    __match_args__ = ("stage", "loop")

    def __new__(cls, stage: str, loop: str) -> At:
        return tuple.__new__(cls, ("at", stage, loop))

    def __getnewargs__(self) -> tuple[str, str]:
        return (self[1], self[2])

    @property
    def stage(self) -> str:
        return self[1]

    @property
    def loop(self) -> str:
        return self[2]

    def __repr__(self) -> str:
        return f"At({self[1]!r}, {self[2]!r})"


ROOT = Root()
INLINE = Inline()


@dataclass(frozen=True)
class Loop:
    name: str
    kind: str  # spatial | reduce
    var: Var


@dataclass(frozen=True)
class Split:
    parent: Loop
    outer: Loop
    inner: Loop
    factor: int


@dataclass(frozen=True)
class Fuse:
    outer: Loop
    inner: Loop
    fused: Loop


@dataclass
class Stage:
    """Mutable while a schedule is built; lowering only reads it."""

    name: str
    tensor: Tensor  # identity of the stage's output; its body may be rewritten below
    axes: tuple[IterVar, ...]
    reduce_axes: tuple[IterVar, ...]
    body: Expr
    roots: tuple[Loop, ...]
    leaves: list[Loop]
    relations: list[Split | Fuse] = field(default_factory=list)
    annotations: dict[str, str] = field(default_factory=dict)  # loop name -> loop kind
    attach: Attach = ROOT
    scope: str = "global"
    is_output: bool = False

    @classmethod
    def from_tensor(cls, tensor: Tensor, is_output: bool) -> Stage:
        from ..te.expr import Reduce

        if tensor.body is None:
            raise TypeError(f"'{tensor.name}' is a placeholder: it has no stage")
        reduce_axes = tensor.body.axes if isinstance(tensor.body, Reduce) else ()
        roots = tuple(Loop(a.name, a.kind, a.var) for a in (*tensor.axes, *reduce_axes))
        return cls(
            tensor.name,
            tensor,
            tensor.axes,
            reduce_axes,
            tensor.body,
            roots,
            list(roots),
            is_output=is_output,
        )

    @property
    def root_extents(self) -> dict[str, int]:
        return {a.name: a.extent for a in (*self.axes, *self.reduce_axes)}

    @property
    def is_reduction(self) -> bool:
        return bool(self.reduce_axes)

    def loop(self, name: str) -> Loop | None:
        for lp in self.leaves:
            if lp.name == name:
                return lp
        return None

    def all_loop_names(self) -> set[str]:
        names = {r.name for r in self.roots}
        for rel in self.relations:
            if isinstance(rel, Split):
                names |= {rel.outer.name, rel.inner.name}
            else:
                names.add(rel.fused.name)
        return names

    def extents(self, root_extents: dict[str, int] | None = None) -> dict[str, int]:
        """Extent of every loop, derived from the root extents through the relations."""
        ext = dict(root_extents or self.root_extents)
        for rel in self.relations:
            if isinstance(rel, Split):
                p = ext[rel.parent.name]
                ext[rel.outer.name] = -(-p // rel.factor)
                ext[rel.inner.name] = rel.factor
            else:
                ext[rel.fused.name] = ext[rel.outer.name] * ext[rel.inner.name]
        return ext

    def fresh_name(self, base: str) -> str:
        taken = self.all_loop_names()
        if base not in taken:
            return base
        n = 1
        while f"{base}{n}" in taken:
            n += 1
        return f"{base}{n}"
