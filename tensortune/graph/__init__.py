"""Whole models: ONNX in, a typed graph IR, simplification and fusion passes, one tensortune
kernel per fused group, all linked into one shared library with a generated C entry point.

    from tensortune.graph import compile_model, from_onnx, tune_model
    graph = from_onnx("model.onnx", shapes={"input": (1, 3, 224, 224)})
    tune_model(graph, budget=600, db="tuning.db")  # optional: tune its kernels
    model = compile_model(graph, db="tuning.db")   # db=None: untuned defaults
    y = model(x)                          # single input; model.run({"input": x}) -> dict
    model.export("out/")                  # lib<name>.so, <name>.h, <name>.weights
"""

from .compiled import CompiledModel
from .errors import ModelError
from .fold import optimize
from .fuse import Group, fuse
from .ir import Graph, Node, ValueInfo
from .model import compile_model
from .onnx_import import SUPPORTED, from_onnx
from .tasks import Task, extract_tasks
from .tune import ModelTuneResult, tune_model

__all__ = [
    "SUPPORTED",
    "CompiledModel",
    "Graph",
    "Group",
    "ModelError",
    "ModelTuneResult",
    "Node",
    "Task",
    "ValueInfo",
    "compile_model",
    "extract_tasks",
    "from_onnx",
    "fuse",
    "optimize",
    "tune_model",
]
