"""Graph simplification before fusion: constant folding (torch's Shape -> Gather -> Concat ->
Reshape chains become constants), Identity/Dropout removal, batch-norm folding into the
preceding Conv/Gemm weights (elsewhere a per-channel multiply-add), Split as Slices, and
a Gemm's constant weights stored once in the layout its kernel reads fastest."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from .errors import ModelError
from .ir import Graph, Node
from .shapes import infer_shapes, propagate


def optimize(graph: Graph) -> Graph:
    """Every simplification, in an order where each one enables the next."""
    graph = fold_constants(graph)
    graph = remove_identities(graph)
    graph = fold_batchnorm(graph)
    graph = split_to_slices(graph)
    graph = layernorm_bias(graph)
    graph = pretranspose_gemm_weights(graph)
    return prune(infer_shapes(graph))


def fold_constants(graph: Graph) -> Graph:
    """Nodes whose outputs are all known at compile time become initializers."""
    _, consts = propagate(graph)
    graph_inputs = {v.name for v in graph.inputs}
    keep, inits = [], dict(graph.initializers)
    for node in graph.nodes:
        outs = [o for o in node.outputs if o]
        if outs and all(o in consts and o not in graph_inputs for o in outs):
            inits.update({o: consts[o] for o in outs})
        else:
            keep.append(node)
    return prune(graph.replace(nodes=tuple(keep), initializers=inits))


def prune(graph: Graph) -> Graph:
    """Drop nodes and initializers nothing reads (walking back from the outputs)."""
    needed = {v.name for v in graph.outputs}
    kept: list[Node] = []
    for node in reversed(graph.nodes):
        if any(o in needed for o in node.outputs):
            kept.append(node)
            needed.update(i for i in node.inputs if i)
    inits = {k: v for k, v in graph.initializers.items() if k in needed}
    values = {k: v for k, v in graph.values.items() if k in needed or k in inits}
    return graph.replace(nodes=tuple(reversed(kept)), initializers=inits, values=values or {})


def rename(graph: Graph, old: str, new: str) -> Graph:
    """Every mention of value ``old`` (produced or read) called ``new`` instead."""

    def sub(names: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(new if n == old else n for n in names)

    nodes = tuple(replace(n, inputs=sub(n.inputs), outputs=sub(n.outputs)) for n in graph.nodes)
    return graph.replace(nodes=nodes)


def remove_identities(graph: Graph) -> Graph:
    """Identity and inference-mode Dropout pass their input through: drop them."""
    for node in graph.nodes:
        if node.op not in ("Identity", "Dropout"):
            continue
        consumers = graph.consumers()
        if node.op == "Dropout" and len(node.outputs) > 1 and node.outputs[1] in consumers:
            raise ModelError(f"Dropout node '{node.name}': its mask output is used (training?)")
        src, dst = node.inputs[0], node.outputs[0]
        outputs = {v.name for v in graph.outputs}
        produced = graph.producers()
        if dst in outputs and (src in outputs or src not in produced):
            continue  # an output that is an input, initializer or another output: keep a copy
        rest = graph.replace(nodes=tuple(n for n in graph.nodes if n is not node))
        graph = rename(rest, src, dst) if dst in outputs else rename(rest, dst, src)
        return remove_identities(graph)
    return graph


def fold_batchnorm(graph: Graph) -> Graph:
    """BatchNormalization after a Conv/Gemm with constant weights (and no other reader) is
    folded into them; any other one becomes ``x * scale + shift`` with constant per-channel
    factors, which fusion then inlines into its producer."""
    inits = dict(graph.initializers)
    producers, consumers = graph.producers(), graph.consumers()
    nodes: list[Node | None] = list(graph.nodes)
    for index, node in enumerate(graph.nodes):  # ``nodes`` changes only just before returning
        if node.op != "BatchNormalization":
            continue
        if not all(i in inits for i in node.inputs[1:5]):
            continue  # statistics given at run time: compiled as its own elementwise kernel
        x = node.inputs[0]
        gamma, beta, mean, var = (inits[i].astype(np.float64) for i in node.inputs[1:5])
        scale = gamma / np.sqrt(var + node.attr("epsilon", 1e-5))
        shift = beta - mean * scale
        prev = producers.get(x)
        if prev is not None and len(consumers.get(x, [])) == 1 and _foldable(prev, inits):
            w = inits[prev.inputs[1]].astype(np.float64)
            dtype = inits[prev.inputs[1]].dtype
            has_bias = len(prev.inputs) > 2 and prev.inputs[2]
            if prev.op == "Conv":
                w = w * scale.reshape(-1, *[1] * (w.ndim - 1))
            else:  # Gemm: output columns are weight columns (rows with transB)
                w = w * (scale.reshape(-1, 1) if prev.attr("transB", 0) else scale.reshape(1, -1))
            bias: np.ndarray | float
            if prev.op == "Gemm" and has_bias:
                beta_c = prev.attr("beta", 1.0)
                bias = np.broadcast_to(inits[prev.inputs[2]] * beta_c, (scale.size,))
                prev_attrs = {**prev.attrs, "beta": 1.0}
            else:
                bias = inits[prev.inputs[2]].astype(np.float64) if has_bias else 0.0
                prev_attrs = dict(prev.attrs)
            w_name, b_name = f"{node.name}/folded_w", f"{node.name}/folded_b"
            inits[w_name] = w.astype(dtype)
            inits[b_name] = (bias * scale + shift).astype(dtype)
            folded = replace(
                prev,
                inputs=(prev.inputs[0], w_name, b_name),
                outputs=node.outputs[:1],
                attrs=prev_attrs,
            )
            nodes[nodes.index(prev)] = folded
            nodes[index] = None
            return fold_batchnorm(
                graph.replace(nodes=tuple(n for n in nodes if n), initializers=inits)
            )
        rank = len(graph.values[x].shape) if x in graph.values else 4
        shape = (-1, *[1] * (rank - 2))
        x_dtype = graph.values[x].dtype if x in graph.values else "float32"
        s_name, t_name, mid = f"{node.name}/scale", f"{node.name}/shift", f"{node.name}/scaled"
        inits[s_name] = scale.reshape(shape).astype(x_dtype)
        inits[t_name] = shift.reshape(shape).astype(x_dtype)
        mul = Node("Mul", f"{node.name}/mul", (x, s_name), (mid,))
        add = Node("Add", f"{node.name}/add", (mid, t_name), node.outputs[:1])
        nodes[index : index + 1] = [mul, add]
        return fold_batchnorm(graph.replace(nodes=tuple(nodes), initializers=inits))
    return graph


def _foldable(prev: Node, inits: dict[str, np.ndarray]) -> bool:
    if prev.op not in ("Conv", "Gemm") or prev.inputs[1] not in inits:
        return False
    if prev.op == "Gemm" and prev.attr("alpha", 1.0) != 1.0:
        return False
    return len(prev.inputs) < 3 or not prev.inputs[2] or prev.inputs[2] in inits


def split_to_slices(graph: Graph) -> Graph:
    """Each output of a Split as its own Slice, so every node has one output to compile."""
    inits, nodes = dict(graph.initializers), []
    for node in graph.nodes:
        if node.op != "Split":
            nodes.append(node)
            continue
        x = node.inputs[0]
        axis = node.attr("axis", 0) % len(graph.values[x].shape)
        start = 0
        for k, out in enumerate(node.outputs):
            size = graph.values[out].shape[axis]
            names = [f"{node.name}/slice{k}_{p}" for p in ("starts", "ends", "axes")]
            for name, v in zip(names, (start, start + size, axis), strict=True):
                inits[name] = np.array([v], np.int64)
            start += size
            if out:
                nodes.append(Node("Slice", f"{node.name}/slice{k}", (x, *names), (out,)))
    return graph.replace(nodes=tuple(nodes), initializers=inits)


def layernorm_bias(graph: Graph) -> Graph:
    """A LayerNormalization without its optional bias gets a zero one: one kernel form."""
    inits, nodes = dict(graph.initializers), []
    for node in graph.nodes:
        if node.op == "LayerNormalization" and (len(node.inputs) < 3 or not node.inputs[2]):
            cols = graph.values[node.inputs[1]].shape
            name = f"{node.name}/zero_bias"
            inits[name] = np.zeros(cols, graph.values[node.inputs[1]].dtype)
            node = replace(node, inputs=(*node.inputs[:2], name))
        nodes.append(node)
    return graph.replace(nodes=tuple(nodes), initializers=inits)


def pretranspose_gemm_weights(graph: Graph) -> Graph:
    """A Gemm's constant ``B`` given as [N, K] (``transB=1``, torch's Linear) stored as [K, N]:
    each output row then accumulates whole contiguous weight rows, where the [N, K] form
    gathers every output vector across N rows (3-7x slower at batch 1)."""
    inits, nodes = dict(graph.initializers), []
    for node in graph.nodes:
        w = node.inputs[1] if node.op == "Gemm" else ""
        if node.attr("transB", 0) and w in inits and inits[w].ndim == 2:
            inits[f"{w}/T"] = np.ascontiguousarray(inits[w].T)
            attrs = {**node.attrs, "transB": 0}
            node = replace(node, inputs=(node.inputs[0], f"{w}/T", *node.inputs[2:]), attrs=attrs)
        nodes.append(node)
    return graph.replace(nodes=tuple(nodes), initializers=inits)


__all__ = [
    "fold_batchnorm",
    "fold_constants",
    "optimize",
    "pretranspose_gemm_weights",
    "prune",
    "remove_identities",
]
