"""Shape and dtype inference for every supported operator, with constant propagation: a value
computable at compile time (a ``Shape`` of a static tensor, arithmetic on initializers) is
known as an array, which the shape-valued inputs of Reshape, Slice or Expand need."""

from __future__ import annotations

import numpy as np

from .attributes import pool_geometry
from .errors import ModelError
from .ir import Graph, Node, ValueInfo
from .reference import REDUCTIONS, run_node

UNARY = frozenset(
    (
        *("Relu", "Clip", "Sigmoid", "Tanh", "Erf", "Gelu", "HardSigmoid", "HardSwish", "Sqrt"),
        *("Exp", "Neg", "Reciprocal", "Identity", "Dropout", "BatchNormalization", "Softmax"),
        *("LayerNormalization", "LogSoftmax", "Trilu"),
    )
)
BINARY = frozenset(["Add", "Sub", "Mul", "Div", "Pow"])
LOGICAL = frozenset(
    ["Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "Not", "And", "Or"]
)
"""Comparisons and logic: boolean results (masks for Where)."""
SHAPING_INPUTS = {
    "Reshape": (1,),
    "Expand": (1,),
    "Slice": (1, 2, 3, 4),
    "Squeeze": (1,),
    "Unsqueeze": (1,),
    **dict.fromkeys(REDUCTIONS, (1,)),
    "Split": (1,),
    "ConstantOfShape": (0,),
}
"""Inputs whose values decide the output's shape: tensortune compiles for static shapes."""
FOLD_LIMIT = 1 << 22
"""Most elements a propagated constant may hold (a folded Expand must not fill memory)."""

Known = dict[str, tuple[tuple[int, ...], str]]


def infer_shapes(graph: Graph) -> Graph:
    """``graph`` with ``values`` describing every value and the outputs' ValueInfos filled in."""
    values, _ = propagate(graph)
    missing = [o.name for o in graph.outputs if o.name not in values]
    if missing:
        raise ModelError(f"graph outputs {missing} are produced by no node, input or initializer")
    infos = {name: ValueInfo(name, shape, dtype) for name, (shape, dtype) in values.items()}
    return graph.replace(outputs=tuple(infos[o.name] for o in graph.outputs), values=infos)


def propagate(graph: Graph) -> tuple[Known, dict[str, np.ndarray]]:
    """(shape, dtype) of every value and the value itself of every one known at compile time."""
    consts: dict[str, np.ndarray] = dict(graph.initializers)
    known: Known = {name: (tuple(a.shape), a.dtype.name) for name, a in consts.items()}
    for v in graph.inputs:
        known[v.name] = (v.shape, v.dtype)
    for node in graph.nodes:
        for name in node.inputs:
            if name and name not in known:
                raise ModelError(
                    f"{node.op} node '{node.name}' reads '{name}', which no earlier node, input "
                    "or initializer defines (nodes must be in topological order)"
                )
        _validate(node, known, consts)
        args = [consts.get(i) if i else None for i in node.inputs]
        if node.op == "Shape":  # static shapes: known whatever the input's values
            outs = run_node(node, [np.broadcast_to(np.int8(0), known[node.inputs[0]][0])])
        elif all(a is not None for a, i in zip(args, node.inputs, strict=True) if i):
            outs = run_node(node, args)
        else:
            for name, info in zip(node.outputs, infer_node(node, known, consts), strict=False):
                if name:
                    known[name] = info
            continue
        for name, value in zip(node.outputs, outs, strict=False):
            if name:
                known[name] = (tuple(value.shape), value.dtype.name)
                if value.size <= FOLD_LIMIT:
                    consts[name] = value
    return known, consts


def _validate(node: Node, known: Known, consts: dict[str, np.ndarray]) -> None:
    """Attribute values and input forms tensortune does not handle, refused by name."""

    def bad(why: str) -> ModelError:
        return ModelError(f"unsupported {node.op} node '{node.name}': {why}")

    if node.op in ("Conv", "MaxPool", "AveragePool", "GlobalAveragePool"):
        rank = len(known[node.inputs[0]][0])
        if rank != 4:
            raise bad(f"only 2-D (NCHW) inputs are supported, got rank {rank}")
    if node.op == "BatchNormalization" and (node.attr("training_mode", 0) or len(node.outputs) > 1):
        raise bad("training mode (running statistics outputs) is not supported")
    if node.op == "MaxPool" and len([o for o in node.outputs if o]) > 1:
        raise bad("the Indices output is not supported")
    if node.op == "Dropout" and len(node.inputs) > 2 and node.inputs[2]:
        mode = consts.get(node.inputs[2])
        if mode is None or bool(np.asarray(mode).reshape(-1)[0]):
            raise bad("training mode (a training_mode input that is not a constant False)")
    if node.op == "Cast" and node.attr("to") is None:
        raise bad("missing attribute 'to'")


def _broadcast(node: Node, shapes: list[tuple[int, ...]]) -> tuple[int, ...]:
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        raise ModelError(
            f"{node.op} node '{node.name}': input shapes {shapes} do not broadcast"
        ) from None


def _window_shape(
    node: Node, x: tuple[int, ...], kernel: list[int], out_ch: int
) -> tuple[int, ...]:
    strides, dil, begin, end = pool_geometry(node, x, kernel)
    spatial: list[int] = []
    for d, k in enumerate(kernel):
        size = (x[2 + d] + begin[d] + end[d] - dil[d] * (k - 1) - 1) // strides[d] + 1
        if size <= 0:
            raise ModelError(f"{node.op} node '{node.name}': the window does not fit input {x}")
        spatial.append(size)
    return (x[0], out_ch, *spatial)


def _matmul_shape(node: Node, a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    a2, b2 = (1, *a) if len(a) == 1 else a, (*b, 1) if len(b) == 1 else b
    if a2[-1] != b2[-2]:
        raise ModelError(f"MatMul node '{node.name}': inner dimensions differ: {a} x {b}")
    out = (*_broadcast(node, [a2[:-2], b2[:-2]]), a2[-2], b2[-1])
    if len(a) == 1:
        out = out[:-2] + out[-1:]
    if len(b) == 1:
        out = out[:-1]
    return out


def _given(node: Node, shape: list[tuple[int, ...] | None], i: int) -> tuple[int, ...]:
    """The shape of input ``i``, which the op requires."""
    s = shape[i]
    if s is None:
        raise ModelError(f"{node.op} node '{node.name}': required input {i} is missing")
    return s


def infer_node(
    node: Node, known: Known, consts: dict[str, np.ndarray]
) -> list[tuple[tuple[int, ...], str]]:
    """[(shape, dtype)] of a node's outputs from its inputs' (shape, dtype)."""
    shape = [known[i][0] if i else None for i in node.inputs]
    dtype = known[node.inputs[0]][1]
    x = _given(node, shape, 0)
    op = node.op
    if op == "LayerNormalization":
        axis = node.attr("axis", -1) % len(x)
        stats = (*x[:axis], *[1] * (len(x) - axis))
        return [(x, dtype), (stats, "float32"), (stats, "float32")]
    if op == "Dropout":
        return [(x, dtype), (x, "bool")]
    if op in UNARY:
        return [(x, dtype)]
    if op == "Cast":
        from .onnx_import import onnx_dtype

        return [(x, onnx_dtype(node.attr("to")))]
    if op in BINARY:
        return [(_broadcast(node, [x, _given(node, shape, 1)]), dtype)]
    if op in LOGICAL:
        return [(_broadcast(node, [s for s in shape if s is not None]), "bool")]
    if op == "Where":
        return [
            (_broadcast(node, [_given(node, shape, k) for k in range(3)]), known[node.inputs[1]][1])
        ]
    if op == "Conv":
        w = _given(node, shape, 1)
        if x[1] != w[1] * node.attr("group", 1):
            raise ModelError(
                f"Conv node '{node.name}': input channels {x[1]} != weight channels "
                f"{w[1]} x group {node.attr('group', 1)}"
            )
        return [(_window_shape(node, x, list(w[2:]), w[0]), dtype)]
    if op in ("MaxPool", "AveragePool"):
        return [(_window_shape(node, x, node.attr("kernel_shape"), x[1]), dtype)]
    if op == "GlobalAveragePool":
        return [((*x[:2], 1, 1), dtype)]
    if op == "Gemm":
        a, b = x, _given(node, shape, 1)
        m = a[1] if node.attr("transA", 0) else a[0]
        ka = a[0] if node.attr("transA", 0) else a[1]
        kb, n = (b[1], b[0]) if node.attr("transB", 0) else b
        if ka != kb:
            raise ModelError(f"Gemm node '{node.name}': inner dimensions differ: {a} x {b}")
        return [((m, n), dtype)]
    if op == "MatMul":
        return [(_matmul_shape(node, x, _given(node, shape, 1)), dtype)]
    for pos in SHAPING_INPUTS.get(op, ()):
        if pos < len(node.inputs) and node.inputs[pos] and node.inputs[pos] not in consts:
            raise ModelError(
                f"unsupported {op} node '{node.name}': its input {pos} ('{node.inputs[pos]}') "
                "decides the output shape and must be known at compile time (a constant)"
            )
    # data movement and reductions: run the NumPy definition on zeros of the right shapes
    dummies = [
        None if not i else consts[i] if i in consts else np.zeros(known[i][0], known[i][1])
        for i in node.inputs
    ]
    return [(tuple(v.shape), v.dtype.name) for v in run_node(node, dummies)]


__all__ = ["BINARY", "UNARY", "infer_node", "infer_shapes", "propagate"]
