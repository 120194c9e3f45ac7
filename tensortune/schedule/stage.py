"""A stage: one compute tensor and the loop structure chosen for it.

A stage starts with one root loop per axis (spatial axes, then reduce axes). ``split`` and ``fuse``
relate loops; the current ``leaves`` are the loops that will exist in the generated nest, outermost
first. Extents of non-root loops derive from the root extents, so a stage computed inside another
can re-derive them from the region it is asked for.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..te.expr import Expr, IterVar, Var
from ..te.tensor import Tensor


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
    attach: tuple = ("root",)  # ("root",) | ("inline",) | ("at", stage name, loop name)
    scope: str = "global"
    is_output: bool = False

    @classmethod
    def from_tensor(cls, tensor: Tensor, is_output: bool) -> Stage:
        from ..te.expr import Reduce

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
