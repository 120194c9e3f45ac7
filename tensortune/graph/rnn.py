"""LSTM at import: each ONNX LSTM node unrolled over its (static) sequence into the operators
the rest of the graph stage compiles: one MatMul of every step's input by the input weights
(the whole sequence at once), then per step a MatMul by the recurrent weights and the gates'
Slice, Sigmoid, Tanh, Mul and Add, which fusion groups into a few kernels per step."""

from __future__ import annotations

from typing import Any

import numpy as np

from .errors import ModelError
from .ir import Graph, Node

LSTM_ATTRIBUTES = {"hidden_size", "direction", "layout", "activations", "input_forget"}
DEFAULT_ACTIVATIONS = ["Sigmoid", "Tanh", "Tanh"]


def _check(node: Node) -> None:
    def refuse(why: str) -> ModelError:
        return ModelError(f"unsupported LSTM node '{node.name}': {why}")

    if node.attr("direction", "forward") not in ("forward", "reverse", "bidirectional"):
        raise refuse(f"direction {node.attr('direction')!r}")
    if node.attr("layout", 0) != 0 or node.attr("input_forget", 0) != 0:
        raise refuse("layout=1 or input_forget=1 (supported: the defaults, 0)")
    if node.attr("activations", DEFAULT_ACTIVATIONS) != DEFAULT_ACTIVATIONS:
        raise refuse(f"activations {node.attr('activations')} (supported: {DEFAULT_ACTIVATIONS})")
    inputs = list(node.inputs) + [""] * (8 - len(node.inputs))
    if inputs[4] or inputs[7]:
        raise refuse("sequence_lens or peepholes (P) are given (supported: neither)")


class _Emitter:
    """New nodes and constants, named after the LSTM node."""

    def __init__(self, node: Node, initializers: dict[str, np.ndarray]):
        self.node, self.inits, self.count = node, initializers, 0
        self.nodes: list[Node] = []

    def const(self, label: str, array: np.ndarray) -> str:
        name = f"{self.node.name}/{label}"
        self.inits[name] = array
        return name

    def op(
        self, op: str, inputs: list[str], label: str, out: str | None = None, **attrs: Any
    ) -> str:
        self.count += 1
        name = out or f"{self.node.name}/{label}"
        self.nodes.append(
            Node(op, f"{self.node.name}/{label}#{self.count}", tuple(inputs), (name,), attrs)
        )
        return name


def _direction(
    e: _Emitter, node: Node, d: int, seq: int, hidden: int, reverse: bool
) -> tuple[str, str, str]:
    """One direction ``d`` of the LSTM: (Y [seq, 1, batch, H], last h, last c) values."""
    x, w, r, b, _, h0, c0, _ = list(node.inputs) + [""] * (8 - len(node.inputs))
    inits = e.inits
    tag = f"d{d}"
    at = e.const(f"{tag}/index", np.array(d, np.int64))

    def transposed(name: str, label: str) -> str:  # [4H, K] of direction d as [K, 4H]
        if name in inits:
            return e.const(f"{tag}/{label}", np.ascontiguousarray(inits[name][d].T))
        one = e.op("Gather", [name, at], f"{tag}/{label}_d", axis=0)
        return e.op("Transpose", [one], f"{tag}/{label}", perm=[1, 0])

    wt, rt = transposed(w, "Wt"), transposed(r, "Rt")
    xw = e.op("MatMul", [x, wt], f"{tag}/xw")  # [seq, batch, 4H]: every step's input at once
    if b in inits:
        bias = inits[b][d]
        xw = e.op(
            "Add",
            [xw, e.const(f"{tag}/bias", bias[: 4 * hidden] + bias[4 * hidden :])],
            f"{tag}/xwb",
        )
    elif b:
        bd = e.op("Gather", [b, at], f"{tag}/b", axis=0)
        halves = [
            e.op(
                "Slice",
                [
                    bd,
                    e.const(f"at{k}", np.array([k * 4 * hidden], np.int64)),
                    e.const(f"at{k + 1}", np.array([(k + 1) * 4 * hidden], np.int64)),
                ],
                f"{tag}/b{k}",
            )
            for k in range(2)
        ]
        xw = e.op("Add", [xw, e.op("Add", halves, f"{tag}/bias")], f"{tag}/xwb")
    bounds = [e.const(f"gate{k}", np.array([k * hidden], np.int64)) for k in range(5)]
    last_axis = e.const("axis", np.array([1], np.int64))
    h = e.op("Gather", [h0, at], f"{tag}/h0", axis=0) if h0 else ""
    c = e.op("Gather", [c0, at], f"{tag}/c0", axis=0) if c0 else ""
    axis0 = e.const("axis0", np.array([0], np.int64))
    steps: dict[int, str] = {}
    for t in reversed(range(seq)) if reverse else range(seq):
        s = f"{tag}/t{t}"
        gates = e.op("Gather", [xw, e.const(f"t{t}", np.array(t, np.int64))], f"{s}/x", axis=0)
        if h:
            gates = e.op("Add", [gates, e.op("MatMul", [h, rt], f"{s}/hr")], f"{s}/gates")

        def gate(k: int, act: str, name: str, gates: str = gates, s: str = s) -> str:
            part = e.op("Slice", [gates, bounds[k], bounds[k + 1], last_axis], f"{s}/{name}_in")
            return e.op(act, [part], f"{s}/{name}")

        i, o = gate(0, "Sigmoid", "i"), gate(1, "Sigmoid", "o")
        f, g = gate(2, "Sigmoid", "f"), gate(3, "Tanh", "g")
        ig = e.op("Mul", [i, g], f"{s}/ig")
        c = e.op("Add", [e.op("Mul", [f, c], f"{s}/fc"), ig], f"{s}/c") if c else ig
        h = e.op("Mul", [o, e.op("Tanh", [c], f"{s}/tanh_c")], f"{s}/h")
        steps[t] = e.op("Unsqueeze", [h, axis0], f"{s}/h1")
    ordered = [steps[t] for t in range(seq)]
    y = e.op("Concat", ordered, f"{tag}/steps", axis=0) if seq > 1 else ordered[0]
    y = e.op("Unsqueeze", [y, e.const("axis1", np.array([1], np.int64))], f"{tag}/y")
    return (
        y,
        e.op("Unsqueeze", [h, axis0], f"{tag}/y_h"),
        e.op("Unsqueeze", [c, axis0], f"{tag}/y_c"),
    )


def unroll_lstm(
    node: Node, seq: int, initializers: dict[str, np.ndarray], hidden: int | None = None
) -> list[Node]:
    """The nodes computing ``node``'s outputs (Y, Y_h, Y_c) for a sequence of ``seq`` steps
    (``initializers`` gains the transposed constant weights and the index constants)."""
    _check(node)
    hidden = int(node.attr("hidden_size", hidden or 0))
    if hidden <= 0:
        raise ModelError(f"LSTM node '{node.name}': hidden_size is unknown")
    e = _Emitter(node, initializers)
    direction = node.attr("direction", "forward")
    if direction == "bidirectional":
        parts = [
            _direction(e, node, 0, seq, hidden, False),
            _direction(e, node, 1, seq, hidden, True),
        ]
    else:
        parts = [_direction(e, node, 0, seq, hidden, direction == "reverse")]
    for k, out in enumerate(list(node.outputs)[:3]):
        if out:
            axis = 1 if k == 0 else 0
            values = [p[k] for p in parts]
            e.op(
                "Concat" if len(values) > 1 else "Identity",
                values,
                f"out{k}",
                out=out,
                **({"axis": axis} if len(values) > 1 else {}),
            )
    return e.nodes


def unroll_rnns(graph: Graph) -> Graph:
    """``graph`` with every LSTM node unrolled (sequence lengths from shape inference of the
    nodes before it)."""
    from .shapes import propagate

    nodes = list(graph.nodes)
    initializers = dict(graph.initializers)
    k = 0
    while k < len(nodes):
        node = nodes[k]
        if node.op != "LSTM":
            k += 1
            continue
        known, _ = propagate(graph.replace(nodes=tuple(nodes[:k]), initializers=initializers))
        shape = known[node.inputs[0]][0]
        if len(shape) != 3:
            raise ModelError(f"LSTM node '{node.name}': X must be [seq, batch, input], got {shape}")
        hidden = known[node.inputs[2]][0][-1]
        unrolled = unroll_lstm(node, shape[0], initializers, hidden)
        nodes[k : k + 1] = unrolled
        k += len(unrolled)
    return graph.replace(nodes=tuple(nodes), initializers=initializers)


__all__ = ["LSTM_ATTRIBUTES", "unroll_lstm", "unroll_rnns"]
