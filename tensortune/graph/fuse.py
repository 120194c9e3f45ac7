"""Operator fusion: the graph partitioned into groups, each compiled as one kernel.

A group is an anchor (conv, gemm, matmul, pooling, a reduction, softmax, layernorm, a data
movement, or an elementwise op with no fusable producer) plus the elementwise ops that follow
it: bias, activation, residual add, and whole elementwise chains (an erf-form GELU, a
HardSwish) inlined into their producer, so the intermediates never reach memory. Softmax and
layernorm stay whole, with nothing fused after them. Reshape-like ops are views: no kernel.

An elementwise op reading several injective groups (a Slice, Gather or elementwise anchor and
its chain) of its own shape that nothing else reads pulls them into one kernel: an LSTM cell's
four gate slices, their activations and the state update are two kernels, not seven.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .ir import Graph, Node

ELEMENTWISE = frozenset(
    (
        *("Add", "Sub", "Mul", "Div", "Pow", "Relu", "Clip", "Sigmoid", "Tanh", "Erf", "Gelu"),
        *("HardSigmoid", "HardSwish", "Sqrt", "Exp", "Neg", "Reciprocal", "Where", "Cast"),
        *("Identity", "Dropout", "Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"),
        *("Not", "And", "Or"),
    )
)
VIEWS = frozenset({"Reshape", "Flatten", "Squeeze", "Unsqueeze"})
CLOSED = frozenset({"Softmax", "LogSoftmax", "LayerNormalization"})
READS = frozenset({"Slice", "Gather"})
"""Data movements an elementwise consumer's kernel can do as indexed reads (no kernel of their
own when that consumer is their only reader)."""


@dataclass(frozen=True, eq=False)
class Group:
    """Nodes compiled as one kernel (or one view); ``output`` is the one value it produces."""

    nodes: tuple[Node, ...]

    @property
    def anchor(self) -> Node:
        return self.nodes[0]

    @property
    def kind(self) -> str:
        op = self.anchor.op
        return "view" if op in VIEWS else "elementwise" if op in ELEMENTWISE else op

    @property
    def output(self) -> str:
        return self.nodes[-1].outputs[0]

    @property
    def inputs(self) -> tuple[str, ...]:
        """Values read from outside the group, in first-read order."""
        inside = {n.outputs[0] for n in self.nodes}
        seen = dict.fromkeys(i for n in self.nodes for i in n.inputs if i and i not in inside)
        return tuple(seen)

    def __repr__(self) -> str:
        return f"Group({'+'.join(n.op for n in self.nodes)} -> {self.output})"


def compute_shape(graph: Graph, anchor: Node) -> tuple[int, ...]:
    """The shape a group's kernel computes in: its output's, except a MatMul over stacked rows
    (``[..., M, K] x [K, N]`` computes ``[prod(...) * M, N]``) or stacked batches, and a
    LayerNormalization over several trailing axes (rows x the product of those axes)."""
    out = graph.values[anchor.outputs[0]].shape
    if anchor.op == "LayerNormalization" and anchor.attr("axis", -1) % len(out) != len(out) - 1:
        axis = anchor.attr("axis", -1) % len(out)  # normalised over several axes: one row each
        return (math.prod(out[:axis]), math.prod(out[axis:]))
    if anchor.op == "MatMul" and len(out) > 2:
        if len(graph.values[anchor.inputs[1]].shape) == 2:
            return (math.prod(out[:-1]), out[-1])
        return (math.prod(out[:-2]), out[-2], out[-1])
    return out


def adaptable(shape: tuple[int, ...], full: tuple[int, ...], computed: tuple[int, ...]) -> bool:
    """Whether an operand of ``shape`` broadcast against ``full`` can be read in ``computed``
    (a reshape of ``full``): same shape, a scalar, or a vector along the last axis."""
    if computed == full or math.prod(shape) == 1:
        return True
    trimmed = tuple(shape[len(shape) - len(full) :]) if len(shape) >= len(full) else shape
    padded = (1,) * (len(full) - len(trimmed)) + tuple(trimmed)
    if padded == full:
        return True
    return all(d == 1 for d in padded[:-1]) and padded[-1] == full[-1] == computed[-1]


def fuse(graph: Graph) -> list[Group]:
    """Groups in an order where every group's inputs are computed by earlier groups."""
    owner: dict[str, int] = {}
    groups: list[list[Node]] = []
    readers = graph.consumers()
    for node in graph.nodes:
        target = _target(graph, node, owner, groups)
        absorbed = _absorbed(graph, node, target, owner, groups, readers)
        if absorbed:  # the target (if any), then the absorbed groups, then the node: at the end
            taken = ([] if target is None else [target]) + absorbed
            merged = [n for k in taken for n in groups[k]]
            for k in taken:
                groups[k] = []
            groups.append([*merged, node])
            target = len(groups) - 1
            owner.update({out: target for n in merged for out in n.outputs})
        elif target is None:
            groups.append([node])
            target = len(groups) - 1
        else:
            groups[target].append(node)
        for out in node.outputs:
            owner[out] = target
    return _split_escapes(graph, [Group(tuple(g)) for g in groups if g])


def _target(
    graph: Graph, node: Node, owner: dict[str, int], groups: list[list[Node]]
) -> int | None:
    """The group an elementwise node joins, or None to start its own."""
    if node.op not in ELEMENTWISE:
        return None
    sources = [owner[i] for i in node.inputs if i and i in owner]
    if not sources:
        return None
    index = max(sources)
    anchor = groups[index][0]
    if anchor.op in VIEWS or anchor.op in CLOSED:
        return None
    full = graph.values[node.outputs[0]].shape
    group_full = graph.values[anchor.outputs[0]].shape
    computed = compute_shape(graph, anchor)
    for i in node.inputs:
        if not i:
            continue
        shape = graph.values[i].shape
        if owner.get(i) == index and shape != full:
            return None  # the group's own value would be broadcast up: a new iteration space
        if full != group_full or not adaptable(shape, full, computed):
            return None
    return index


def _injective(group: list[Node]) -> bool:
    return group[0].op in READS or group[0].op in ELEMENTWISE


def _absorbed(
    graph: Graph,
    node: Node,
    target: int | None,
    owner: dict[str, int],
    groups: list[list[Node]],
    readers: dict[str, list[Node]],
) -> list[int]:
    """The groups an elementwise ``node`` pulls into its own (or into ``target``, which then
    moves to the end with them): injective groups computing a value of the node's shape that
    only ``node`` reads, when the target is injective too and read by no earlier group."""
    if node.op not in ELEMENTWISE or (target is not None and not _injective(groups[target])):
        return []
    full = graph.values[node.outputs[0]].shape
    outputs = {v.name for v in graph.outputs}

    def only_node_reads(group: list[Node]) -> bool:
        return all(
            out not in outputs and all(r is node or r in group for r in readers.get(out, []))
            for n in group
            for out in n.outputs
        )

    found: list[int] = []
    for value in dict.fromkeys(i for i in node.inputs if i in owner):
        k = owner[value]
        group = groups[k]
        fits = graph.values[value].shape == full and _injective(group)
        if fits and k != target and k not in found and only_node_reads(group):
            found.append(k)
    if found and target is not None:
        inside = groups[target]
        early = any(  # a reader grouped elsewhere already: moving the target after it breaks order
            r is not node and r not in inside and r.outputs[0] in owner
            for n in inside
            for out in n.outputs
            for r in readers.get(out, [])
        )
        if early:
            return []
    return found


def _split_escapes(graph: Graph, groups: list[Group]) -> list[Group]:
    """Cut groups so that only their last value is read outside them."""
    readers = graph.consumers()
    outputs = {v.name for v in graph.outputs}
    result: list[Group] = []
    pending = list(groups)
    while pending:
        group = pending.pop(0)
        members = set(group.nodes)
        cut = next(
            (
                k
                for k, n in enumerate(group.nodes[:-1])
                if n.outputs[0] in outputs
                or any(r not in members for r in readers.get(n.outputs[0], []))
            ),
            None,
        )
        if cut is None:
            result.append(group)
        else:
            pending[:0] = [Group(group.nodes[: cut + 1]), Group(group.nodes[cut + 1 :])]
    return result


__all__ = ["CLOSED", "ELEMENTWISE", "VIEWS", "Group", "adaptable", "compute_shape", "fuse"]
