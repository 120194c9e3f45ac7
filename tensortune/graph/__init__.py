"""Whole models: ONNX in, a typed graph IR, simplification and fusion passes, one tensortune
kernel per fused group, and a compiled model that runs them in order.

    from tensortune.graph import compile_model, from_onnx
    graph = from_onnx("model.onnx", shapes={"input": (1, 3, 224, 224)})
    model = compile_model(graph)          # or compile_model(graph, db="tuning.db")
    y = model(x)                          # single input; model.run({"input": x}) -> dict
"""

from .errors import ModelError
from .fold import optimize
from .fuse import Group, fuse
from .ir import Graph, Node, ValueInfo
from .model import CompiledModel, compile_model
from .onnx_import import SUPPORTED, from_onnx
from .tasks import Task, extract_tasks

__all__ = [
    "SUPPORTED",
    "CompiledModel",
    "Graph",
    "Group",
    "ModelError",
    "Node",
    "Task",
    "ValueInfo",
    "compile_model",
    "extract_tasks",
    "from_onnx",
    "fuse",
    "optimize",
]
