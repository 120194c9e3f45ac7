"""ONNX models in, graph IR out: every operator and attribute checked against what tensortune
supports, so a model that cannot be compiled fails here with one clear error, not later."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any, TypeGuard

import numpy as np

from ..errors import MissingDependency
from .errors import ModelError
from .ir import Graph, Node, ValueInfo
from .reference import REDUCTIONS
from .rnn import LSTM_ATTRIBUTES, unroll_rnns

MIN_OPSET, MAX_OPSET = 13, 21
_POOL = {"auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads", "strides"}
ATTRIBUTES: dict[str, set[str]] = {
    "Conv": {"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"},
    "Gemm": {"alpha", "beta", "transA", "transB"},
    "MatMul": set(),
    **{op: set() for op in ("Add", "Sub", "Mul", "Div", "Pow", "Where", "Expand", "Identity")},
    **{op: set() for op in ("Relu", "Sigmoid", "Tanh", "Erf", "Sqrt", "Exp", "Neg")},
    "Reciprocal": set(),
    **{op: set() for op in ("Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual")},
    **{op: set() for op in ("Not", "And", "Or")},
    "Clip": set(),
    "Gelu": {"approximate"},
    "HardSigmoid": {"alpha", "beta"},
    "HardSwish": set(),
    "Cast": {"to", "saturate"},
    "Dropout": {"seed"},
    "BatchNormalization": {"epsilon", "momentum", "training_mode"},
    "MaxPool": _POOL | {"storage_order"},
    "AveragePool": _POOL | {"count_include_pad"},
    "GlobalAveragePool": set(),
    **{op: {"axes", "keepdims", "noop_with_empty_axes"} for op in REDUCTIONS},
    "Flatten": {"axis"},
    "Reshape": {"allowzero"},
    "Transpose": {"perm"},
    "Softmax": {"axis"},
    "LogSoftmax": {"axis"},
    "LayerNormalization": {"axis", "epsilon", "stash_type"},
    "Concat": {"axis"},
    "Split": {"axis", "split", "num_outputs"},
    "Slice": set(),
    "Squeeze": {"axes"},
    "Unsqueeze": {"axes"},
    "Gather": {"axis"},
    "Shape": {"start", "end"},
    "ConstantOfShape": {"value"},
    "Trilu": {"upper"},
    "LSTM": LSTM_ATTRIBUTES,
}
SUPPORTED = frozenset(ATTRIBUTES) | {"Constant"}
"""Every ONNX operator (default domain) ``from_onnx`` accepts."""


def _onnx() -> Any:  # the onnx module (untyped)
    try:
        import onnx
    except ImportError as exc:
        raise MissingDependency(
            "importing ONNX models needs the onnx package: pip install onnx"
        ) from exc
    return onnx


def onnx_dtype(elem_type: int) -> str:
    """The NumPy dtype name of an ONNX TensorProto element type."""
    onnx = _onnx()
    try:
        return np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem_type)).name
    except Exception as exc:
        raise ModelError(f"unsupported ONNX element type {elem_type}") from exc


def from_onnx(
    model: str | os.PathLike[str] | bytes | Any,
    shapes: Mapping[str, Sequence[int]] | None = None,
) -> Graph:
    """Import an ONNX model (a path, the file's bytes or a ``ModelProto``) as a Graph with every
    value's shape and dtype inferred.

    Args:
        shapes: concrete shapes for inputs with symbolic (named or unknown) dimensions, e.g.
            ``{"input": (1, 3, 224, 224)}``; tensortune compiles for fixed shapes.

    Raises:
        ModelError: a corrupt or truncated file, an opset outside 13-21, an unsupported operator
            or attribute (naming the node and the supported set), or symbolic dimensions
            without ``shapes``.
        MissingDependency: the onnx package is not installed.
    """
    onnx = _onnx()
    proto = _load(onnx, model)
    _check_opset(proto)
    g = proto.graph
    initializers = {t.name: _array(onnx, t) for t in g.initializer}
    nodes: list[Node] = []
    for index, n in enumerate(g.node):
        name = n.name or f"{n.op_type}_{index}"
        if n.domain not in ("", "ai.onnx"):
            raise _unsupported(f"operator {n.domain}.{n.op_type}", n.op_type, name)
        attrs = {a.name: _attr(onnx, a) for a in n.attribute}
        if n.op_type == "Constant":
            initializers[n.output[0]] = _constant(attrs, name)
            continue
        if n.op_type not in ATTRIBUTES:
            raise _unsupported(f"operator {n.op_type}", n.op_type, name)
        extra = sorted(set(attrs) - ATTRIBUTES[n.op_type])
        if extra:
            allowed = ", ".join(sorted(ATTRIBUTES[n.op_type])) or "none"
            raise ModelError(
                f"unsupported attribute {', '.join(extra)} of {n.op_type} node '{name}' "
                f"(supported attributes of {n.op_type}: {allowed})"
            )
        nodes.append(Node(n.op_type, name, tuple(n.input), tuple(n.output), attrs))
    graph_inputs = [v for v in g.input if v.name not in initializers]
    unknown = sorted(set(shapes or {}) - {v.name for v in graph_inputs})
    if unknown:
        names = ", ".join(v.name for v in graph_inputs)
        raise ModelError(
            f"shapes names no input of the model: {', '.join(unknown)} (inputs: {names})"
        )
    inputs = tuple(_input_info(onnx, v, shapes or {}) for v in graph_inputs)
    from .canonical import windows_as_2d
    from .shapes import infer_shapes

    raw = Graph(
        g.name or "model",
        inputs,
        tuple(ValueInfo(o.name, (), "float32") for o in g.output),
        initializers,
        tuple(windows_as_2d(nodes, initializers, {v.name: len(v.shape) for v in inputs})),
        {},
    )
    return infer_shapes(unroll_rnns(raw) if any(n.op == "LSTM" for n in nodes) else raw)


def _unsupported(what: str, op: str, name: str) -> ModelError:
    return ModelError(
        f"unsupported {what} in node '{name}'; supported operators: {', '.join(sorted(SUPPORTED))}"
    )


def _load(onnx: Any, model: Any) -> Any:  # an onnx.ModelProto
    if isinstance(model, onnx.ModelProto):
        proto = model
    else:
        where = "the given bytes" if isinstance(model, bytes) else f"'{os.fspath(model)}'"
        try:
            if isinstance(model, bytes):
                proto = onnx.load_model_from_string(model)
            else:
                proto = onnx.load(os.fspath(model))
        except FileNotFoundError:
            raise ModelError(f"no ONNX model file {where}") from None
        except Exception as exc:
            raise ModelError(
                f"cannot read an ONNX model from {where}: the file is corrupt or truncated "
                f"({type(exc).__name__}: {str(exc)[:200]})"
            ) from None
    if not proto.HasField("graph") or not proto.graph.output:
        raise ModelError("invalid ONNX model: it has no graph or the graph has no outputs")
    return proto


def _check_opset(proto: Any) -> None:
    for opset in proto.opset_import:
        if opset.domain in ("", "ai.onnx") and not MIN_OPSET <= opset.version <= MAX_OPSET:
            raise ModelError(
                f"unsupported ONNX opset {opset.version}: tensortune reads opsets "
                f"{MIN_OPSET} to {MAX_OPSET} (re-export with opset_version in that range)"
            )


def _array(onnx: Any, tensor: Any) -> np.ndarray:
    try:
        return np.array(onnx.numpy_helper.to_array(tensor))
    except Exception as exc:
        raise ModelError(f"cannot read initializer '{tensor.name}': {exc}") from None


def _attr(onnx: Any, attribute: Any) -> Any:
    value = onnx.helper.get_attribute_value(attribute)
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, onnx.TensorProto):
        return _array(onnx, value)
    if isinstance(value, list):
        return [v.decode() if isinstance(v, bytes) else v for v in value]
    return value


def _constant(attrs: dict[str, Any], name: str) -> np.ndarray:
    forms = {
        "value": lambda v: v,
        "value_float": lambda v: np.array(v, np.float32),
        "value_floats": lambda v: np.array(v, np.float32),
        "value_int": lambda v: np.array(v, np.int64),
        "value_ints": lambda v: np.array(v, np.int64),
    }
    for key, convert in forms.items():
        if key in attrs:
            return np.asarray(convert(attrs[key]))
    raise ModelError(
        f"unsupported Constant node '{name}': attributes {sorted(attrs)} "
        f"(supported: {', '.join(forms)})"
    )


def _input_info(onnx: Any, value: Any, shapes: Mapping[str, Sequence[int]]) -> ValueInfo:
    tensor = value.type.tensor_type
    dtype = onnx_dtype(tensor.elem_type)
    dims = [
        d.dim_value if d.HasField("dim_value") else d.dim_param or "?" for d in tensor.shape.dim
    ]
    if value.name in shapes:
        given = tuple(int(d) for d in shapes[value.name])
        fits = len(given) == len(dims) and all(
            not isinstance(d, int) or d == g for d, g in zip(dims, given, strict=True)
        )
        if not fits or min(given, default=0) < 0:
            raise ModelError(
                f"shapes['{value.name}'] = {given} does not fit the model's input shape {dims}"
            )
        return ValueInfo(value.name, given, dtype)
    if tensor.HasField("shape") and _concrete(dims):
        return ValueInfo(value.name, tuple(dims), dtype)
    shown = dims if tensor.HasField("shape") else "unknown"
    raise ModelError(
        f"input '{value.name}' has symbolic dimensions {shown}: give concrete shapes, "
        f"e.g. from_onnx(path, shapes={{'{value.name}': (1, ...)}})"
    )


def _concrete(dims: list[int | str]) -> TypeGuard[list[int]]:
    """Whether every dimension is a number (not a symbolic name)."""
    return all(isinstance(d, int) for d in dims)


__all__ = ["MAX_OPSET", "MIN_OPSET", "SUPPORTED", "from_onnx", "onnx_dtype"]
