"""Rewrites at import into the forms the rest of the graph stage handles: a 1-D Conv, MaxPool
or AveragePool (audio, causal convolutions) becomes the 2-D one over an inserted unit height,
between an Unsqueeze and a Squeeze, which are free views."""

from __future__ import annotations

import numpy as np

from .ir import Node

WINDOW_OPS = ("Conv", "MaxPool", "AveragePool")


def _is_1d(node: Node, ranks: dict[str, int]) -> bool:
    if node.op not in WINDOW_OPS:
        return False
    kernel = node.attr("kernel_shape")
    if kernel is not None:
        return len(kernel) == 1
    return node.op == "Conv" and (ranks.get(node.inputs[0]) == 3 or ranks.get(node.inputs[1]) == 3)


def _as_2d_attrs(node: Node) -> dict:
    """The 1-D window attributes with a unit leading spatial dimension."""
    attrs = dict(node.attrs)
    for key, unit in (("kernel_shape", 1), ("strides", 1), ("dilations", 1)):
        if key in attrs:
            attrs[key] = [unit, *attrs[key]]
    if "pads" in attrs:
        begin, end = attrs["pads"]
        attrs["pads"] = [0, begin, 0, end]
    return attrs


def windows_as_2d(
    nodes: list[Node], initializers: dict[str, np.ndarray], input_ranks: dict[str, int]
) -> list[Node]:
    """``nodes`` with every 1-D window op rewritten as its 2-D form (``initializers`` gains the
    reshaped weights and the axes constant); ranks come from attributes, initializers and the
    graph inputs' ranks."""
    ranks = {**input_ranks, **{k: v.ndim for k, v in initializers.items()}}
    out: list[Node] = []
    axes = "tt/axis2"
    for node in nodes:
        if not _is_1d(node, ranks):
            out.append(node)
            continue
        initializers[axes] = np.array([2], np.int64)
        x2 = f"{node.name}/in2d"
        out.append(Node("Unsqueeze", f"{node.name}/unsqueeze", (node.inputs[0], axes), (x2,)))
        inputs = [x2, *node.inputs[1:]]
        if node.op == "Conv":
            w = node.inputs[1]
            if w in initializers:
                initializers[f"{w}/2d"] = initializers[w][:, :, None, :]
                inputs[1] = f"{w}/2d"
            else:
                inputs[1] = f"{node.name}/w2d"
                out.append(Node("Unsqueeze", f"{node.name}/w_unsqueeze", (w, axes), (inputs[1],)))
        y2 = f"{node.name}/out2d"
        out.append(Node(node.op, node.name, tuple(inputs), (y2,), _as_2d_attrs(node)))
        out.append(Node("Squeeze", f"{node.name}/squeeze", (y2, axes), node.outputs[:1]))
    return out


__all__ = ["windows_as_2d"]
