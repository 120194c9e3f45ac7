"""The graph IR: a typed, immutable dataflow graph of ONNX-style operators.

Values are named; every value (input, initializer, node output) has a ``ValueInfo`` with a
concrete shape and a NumPy dtype name, so later passes never guess. Passes return new Graphs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np


@dataclass(frozen=True)
class ValueInfo:
    """A value's name, concrete shape and NumPy dtype name (``"float32"``, ``"int64"``...)."""

    name: str
    shape: tuple[int, ...]
    dtype: str

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))


@dataclass(frozen=True, eq=False)
class Node:
    """One operator application; ``inputs`` may hold ``""`` for an omitted optional input."""

    op: str
    name: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    attrs: Mapping[str, Any] = field(default_factory=dict)

    def attr(self, key: str, default: Any = None) -> Any:
        return self.attrs.get(key, default)


@dataclass(frozen=True, eq=False)
class Graph:
    """Inputs, outputs, constant initializers and nodes in topological order.

    ``values`` describes every value the graph names (inputs, initializers, node outputs).
    """

    name: str
    inputs: tuple[ValueInfo, ...]
    outputs: tuple[ValueInfo, ...]
    initializers: Mapping[str, np.ndarray]
    nodes: tuple[Node, ...]
    values: Mapping[str, ValueInfo]

    def replace(self, **changes: Any) -> Graph:
        return replace(self, **changes)

    def producers(self) -> dict[str, Node]:
        """The node producing each node output."""
        return {out: n for n in self.nodes for out in n.outputs if out}

    def consumers(self) -> dict[str, list[Node]]:
        """The nodes reading each value (a node reading a value twice is listed once)."""
        found: dict[str, list[Node]] = {}
        for n in self.nodes:
            for name in dict.fromkeys(n.inputs):
                if name:
                    found.setdefault(name, []).append(n)
        return found

    def reference(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Run the graph with NumPy, op by op: the oracle every compiled model is checked
        against."""
        from .reference import run_graph

        return run_graph(self, inputs)

    def __repr__(self) -> str:
        ins = ", ".join(f"{v.name}{list(v.shape)}" for v in self.inputs)
        outs = ", ".join(f"{v.name}{list(v.shape)}" for v in self.outputs)
        return f"Graph({self.name!r}: ({ins}) -> ({outs}), {len(self.nodes)} nodes)"


__all__ = ["Graph", "Node", "ValueInfo"]
