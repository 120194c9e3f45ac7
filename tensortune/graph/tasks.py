"""Tasks: each fused group lowered to one DSL program with a structural key, so identical
kernels (same computation, same shapes) are built and tuned once and weighed by how often
the model runs them."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass

import numpy as np

from .. import te
from ..errors import DSLError
from ..space.template import lanes_for
from ..target import Target
from ..te import Tensor
from ..workload import Workload
from .errors import ModelError
from .fold import optimize
from .fuse import ELEMENTWISE, Group, compute_shape, fuse
from .ir import Graph, Node
from .layout import plan_layout
from .lower import Arg, lower_anchor, lower_elementwise, te_dtype
from .reference import REDUCTIONS

STATIC_INPUTS = {
    "Slice": {1, 2, 3, 4},
    "Expand": {1},
    "Trilu": {1},
    **{op: {1} for op in REDUCTIONS},
}
"""Inputs whose (constant) values shape the computation itself instead of feeding it data."""
DESIGN_SPACE_OP = {
    "Conv": "conv2d",
    "MaxPool": "maxpool2d",
    "Softmax": "softmax",
    "LayerNormalization": "layernorm",
}


@dataclass(frozen=True)
class Binding:
    """A kernel argument: graph value ``value`` viewed with ``shape`` (a free reshape)."""

    value: str
    shape: tuple[int, ...]


@dataclass(frozen=True, eq=False)
class Lowered:
    """One group as a program: its workload (inputs in placeholder order) and what feeds it."""

    group: Group
    key: str
    workload: Workload
    bindings: dict[str, Binding]  # placeholder name -> value


@dataclass(frozen=True, eq=False)
class Task:
    """A unique kernel of a model and how many times one run of the model calls it: ``key`` is
    its structure's, ``workload.name`` adds its constant inputs (the tuning database's key)."""

    key: str
    workload: Workload
    weight: int

    @property
    def flops(self) -> float:
        return self.workload.flops


def _operand_shape(graph: Graph, group: Group, node: Node, pos: int, value: str) -> tuple[int, ...]:
    """The shape a group reads ``value`` in: its own, or reshaped into the anchor's space."""
    shape = graph.values[value].shape
    anchor = group.anchor
    full = graph.values[anchor.outputs[0]].shape
    computed = compute_shape(graph, anchor)
    if computed == full:
        return shape
    if node is anchor and node.op == "LayerNormalization":
        return computed if pos == 0 else (computed[-1],)
    if node is anchor:  # a MatMul over stacked rows or batches
        if pos == 0:
            return (
                (math.prod(shape[:-1]), shape[-1])
                if len(computed) == 2
                else (computed[0], *shape[-2:])
            )
        return shape if len(computed) == 2 else (computed[0], *shape[-2:])
    if math.prod(shape) == math.prod(full):
        return computed
    return (shape[-1],) if math.prod(shape) == shape[-1] else (1,)


def lower_group(graph: Graph, group: Group, weights: Collection[str] = ()) -> Lowered:
    """The DSL program computing ``group``, its structural key and its argument bindings; the
    placeholders bound to ``weights`` are its workload's constants."""
    consts = graph.initializers
    env: dict[str, Tensor] = {}
    bindings: dict[str, Binding] = {}
    by_binding: dict[Binding, Tensor] = {}
    described: list[object] = []
    anchor = group.anchor
    computed = compute_shape(graph, anchor)
    for k, node in enumerate(group.nodes):
        args: list[Arg | None] = []
        refs: list[object] = []
        for pos, value in enumerate(node.inputs):
            if not value:
                args.append(None)
                refs.append(None)
            elif value in env:
                args.append(env[value])
                refs.append(("node", [n.outputs[0] for n in group.nodes].index(value)))
            elif value in consts and (
                pos in STATIC_INPUTS.get(node.op, ())
                or (consts[value].size == 1 and (node.op in ELEMENTWISE or consts[value].ndim == 0))
            ):
                array = consts[value]
                args.append(float(array.reshape(-1)[0]) if array.size == 1 else None)
                refs.append(("const", array.dtype.name, array.tolist()))
            else:
                b = Binding(value, _operand_shape(graph, group, node, pos, value))
                if b not in by_binding:
                    info = graph.values[value]
                    name = f"a{len(bindings)}"
                    by_binding[b] = te.placeholder(b.shape, te_dtype(info.dtype), name)
                    bindings[name] = b
                t = by_binding[b]
                args.append(t)
                refs.append(("arg", t.name, t.shape, t.dtype))
        out = node.outputs[0]
        name = f"n{k}"
        if node.op in ELEMENTWISE:
            shape = computed if node is not anchor else graph.values[out].shape
            dtype = te_dtype(graph.values[out].dtype)
            env[out] = lower_elementwise(node, shape, args, dtype, name)
        else:
            env[out] = lower_anchor(graph, node, args, consts, name)
        attrs = sorted((a, repr(v)) for a, v in node.attrs.items())
        described.append((node.op, attrs, refs, graph.values[out].shape))
    result = env[group.output]
    key = hashlib.sha256(repr(described).encode()).hexdigest()[:16]
    ops = "+".join(n.op for n in group.nodes)
    dims = "x".join(map(str, graph.values[group.output].shape))
    inputs = tuple(by_binding[b] for b in bindings.values())
    workload = Workload(
        f"graph:{ops}:{dims}:{key}",
        _space_op(graph, anchor),
        (("key", key),),
        inputs,
        (result,),
        _flops(graph, group),
    ).with_constants(k for k, b in bindings.items() if b.value in weights)
    return Lowered(group, key, workload, bindings)


def _space_op(graph: Graph, anchor: Node) -> str:
    """The op name choosing the design space (``tensortune.space.registry``)."""
    out_shape = graph.values[anchor.outputs[0]].shape
    if anchor.op == "Gemm" and not anchor.attr("transA", 0):
        return "dense" if anchor.attr("transB", 0) else "matmul"
    if anchor.op == "MatMul":
        return "matmul" if len(compute_shape(graph, anchor)) == 2 else "batch_matmul"
    if anchor.op == "Softmax" and anchor.attr("axis", -1) not in (-1, len(out_shape) - 1):
        return "graph"  # transposed around the softmax: not the row form norm_space schedules
    return DESIGN_SPACE_OP.get(anchor.op, "graph")


def _flops(graph: Graph, group: Group) -> float:
    """Useful arithmetic of one run: 2 per multiply-add of the anchor, 1 per other element."""
    anchor = group.anchor
    out = math.prod(graph.values[anchor.outputs[0]].shape)
    total = 0.0
    if anchor.op == "Conv":
        w = graph.values[anchor.inputs[1]].shape  # [K, C/g, R, S] or NHWC's [R, S, C/g, K]
        total = 2.0 * out * math.prod(w[1:] if anchor.attr("layout", "NCHW") == "NCHW" else w[:3])
    elif anchor.op in ("Gemm", "MatMul"):
        a = graph.values[anchor.inputs[0]].shape
        k = a[0] if anchor.op == "Gemm" and anchor.attr("transA", 0) else a[-1]
        total = 2.0 * out * k
    else:
        total = float(out)
    return total + float(out) * (len(group.nodes) - 1)


def weight_values(graph: Graph, groups: Sequence[Group]) -> set[str]:
    """The graph's weights: its initializers and the views of them. The one rule of what a
    compiled model packs once and a tuned task keeps out of its timed kernel."""
    weights = set(graph.initializers)
    for group in groups:
        if group.kind == "view" and group.anchor.inputs[0] in weights:
            weights.add(group.output)
    return weights


def lower_graph(
    graph: Graph, constants: bool = True, layout: str = "auto", target: Target | None = None
) -> tuple[Graph, list[Lowered | Group]]:
    """The optimized graph, its convs in ``layout`` (``graph.layout.plan_layout``; "auto"
    decides for ``target``, default this machine), and its steps: a Lowered per kernel group,
    its workload's inputs bound to weights constant (unless ``constants`` is False), the Group
    for a view."""
    graph = optimize(graph)
    if layout == "auto":
        target = target or Target.detect()
        graph = plan_layout(graph, layout, lanes_for(target), target.vector_registers)
    else:
        graph = plan_layout(graph, layout)
    groups = fuse(graph)
    weights = weight_values(graph, groups) if constants else set()
    steps: list[Lowered | Group] = []
    for group in groups:
        if group.kind == "view":
            steps.append(group)
            continue
        try:
            steps.append(lower_group(graph, group, weights))
        except DSLError as exc:  # an op the DSL refuses in this form: name the ONNX node
            node = group.anchor
            raise ModelError(f"cannot compile {node.op} node '{node.name}': {exc}") from exc
    return graph, steps


def extract_tasks(graph: Graph, layout: str = "auto", target: Target | None = None) -> list[Task]:
    """The unique kernels of a model (weights constant, convs in ``layout``, as
    ``compile_model`` builds them), each with its weight: how many times one run calls it."""
    _, steps = lower_graph(graph, layout=layout, target=target)
    first: dict[str, Lowered] = {}
    count: dict[str, int] = {}
    for step in steps:
        if isinstance(step, Lowered):
            first.setdefault(step.workload.name, step)
            count[step.workload.name] = count.get(step.workload.name, 0) + 1
    return [Task(s.key, s.workload, count[name]) for name, s in first.items()]


def as_kernel_array(array: np.ndarray) -> np.ndarray:
    """A constant or input as a kernel argument: its kernel dtype, C-contiguous."""
    return np.ascontiguousarray(array, dtype=te_dtype(array.dtype.name))


__all__ = [
    "Binding",
    "Lowered",
    "Task",
    "as_kernel_array",
    "extract_tasks",
    "lower_graph",
    "lower_group",
    "weight_values",
]
