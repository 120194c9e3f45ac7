"""A compiled model: every fused group built once as a tensortune kernel (with the tuning
database's best schedule when one is given), run in order on one arena planned at compile time.

A call copies the inputs into their buffers and makes one C call per group through pointer
arrays prepared at compile time, so Python does no per-call allocation or argument checking.
"""

from __future__ import annotations

import ctypes
import os
import time
import warnings
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..build.kernel import Kernel, pointer_array
from ..errors import TensorTuneError
from ..pipeline import compile as compile_with
from ..space.registry import design_space
from ..space.template import generic_space
from ..target import Target
from ..tuning.apply import tuned_schedule
from ..workload import Workload
from .errors import ModelError
from .fuse import Group
from .ir import Graph, ValueInfo
from .lower import te_dtype
from .memory import MemoryPlan, arena, place, plan_memory
from .tasks import Lowered, as_kernel_array, lower_graph

BUILD_WORKERS = 4
"""Kernels compiled at once: each is a C compiler process, Python only schedules them."""
_PACKED = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_void_p))


def build_kernel(wl: Workload, db: Any, target: Target) -> Kernel:
    """The workload's kernel: the database's best schedule (``db`` given) or the design space's
    default; if that cannot be built, the generic space's default, then the plain loop nest."""
    attempts = []
    if db is not None:
        attempts.append(lambda: tuned_schedule(wl, db, target)[1])
    else:
        attempts.append(lambda: _default(design_space(wl, target)))
    attempts += [lambda: _default(generic_space(wl, target)), lambda: None]
    failure: Exception | None = None
    for schedule in attempts:
        try:
            kernel = compile_with(wl, schedule(), target)
        except TensorTuneError as exc:
            failure = exc
            continue
        if failure is not None:
            warnings.warn(f"{wl.name}: fell back to a simpler schedule ({failure})", stacklevel=3)
        return kernel
    raise ModelError(f"cannot build the kernel of {wl.name}: {failure}")


def _default(ds):
    return ds.schedule(ds.default)


@dataclass(frozen=True)
class _Step:
    name: str
    call: Any  # the kernel's packed entry point
    pointers: Any  # void*[] of its arguments, built once
    kernel: Kernel
    arrays: tuple[np.ndarray, ...]  # the views the pointers point into, kept alive


class CompiledModel:
    """``model(x)`` for a single-input model (or ``model(x, y, ...)`` in input order) returns
    the output array (a tuple for several); ``model.run({name: array})`` returns a dict."""

    def __init__(
        self, graph: Graph, steps: list[_Step], buffers: dict[str, np.ndarray], memory: MemoryPlan
    ):
        self.graph = graph
        self.memory = memory  # arena bytes (memory.size) against no reuse (memory.unplanned)
        self.steps = steps
        self.kernels = {s.name: s.kernel for s in steps}
        self._buffers = buffers

    @property
    def inputs(self) -> tuple[ValueInfo, ...]:
        return self.graph.inputs

    @property
    def outputs(self) -> tuple[ValueInfo, ...]:
        return self.graph.outputs

    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Run once; every output by name (fresh arrays, not the model's buffers)."""
        expected = {v.name for v in self.inputs}
        extra = sorted(set(feeds) - expected)
        missing = sorted(expected - set(feeds))
        if extra or missing:
            raise ModelError(
                f"model inputs are {sorted(expected)}; missing {missing}, unknown {extra}"
            )
        for info in self.inputs:
            self._feed(info, feeds[info.name])
        for step in self.steps:
            status = step.call(step.pointers)
            if status != 0:
                raise ModelError(f"kernel of {step.name} returned error status {status}")
        return {
            v.name: self._buffers[v.name].reshape(v.shape).astype(v.dtype, copy=True)
            for v in self.outputs
        }

    def __call__(self, *arrays: Any) -> Any:
        """Arrays in input order -> the output (a tuple for several); one mapping of input
        names to arrays -> ``run``'s dict."""
        if len(arrays) == 1 and isinstance(arrays[0], Mapping):
            return self.run(arrays[0])
        if len(arrays) != len(self.inputs):
            names = ", ".join(f"{v.name} {v.shape} {v.dtype}" for v in self.inputs)
            raise ModelError(
                f"the model takes {len(self.inputs)} input(s) ({names}), got {len(arrays)}"
            )
        out = self.run({v.name: a for v, a in zip(self.inputs, arrays, strict=True)})
        values = tuple(out[v.name] for v in self.outputs)
        return values[0] if len(values) == 1 else values

    def _feed(self, info: ValueInfo, array: Any) -> None:
        array = np.asarray(array)
        if array.shape != info.shape or array.dtype != np.dtype(info.dtype):
            raise ModelError(
                f"input '{info.name}' must be {info.shape} {info.dtype}, "
                f"got {array.shape} {array.dtype}"
            )
        buffer = self._buffers[info.name]
        wide = buffer.dtype != array.dtype and array.size
        if wide and (array.min() < -(2**31) or array.max() >= 2**31):
            raise ModelError(f"input '{info.name}' holds values beyond int32")
        np.copyto(buffer, array, casting="unsafe")

    def benchmark(self, feeds: Mapping[str, np.ndarray], repeat: int = 10) -> float:
        """Median seconds of ``repeat`` runs after one warm-up."""
        self.run(feeds)
        times = []
        for _ in range(repeat):
            start = time.perf_counter()
            self.run(feeds)
            times.append(time.perf_counter() - start)
        return float(np.median(times))

    def __repr__(self) -> str:
        calls, kernels = len(self.steps), len(self.kernels)
        return f"CompiledModel({self.graph.name!r}: {calls} kernel calls, {kernels} kernels)"


def compile_model(
    graph: Graph | Any,
    db: Any = None,
    target: Target | None = None,
    shapes: Mapping[str, Sequence[int]] | None = None,
) -> CompiledModel:
    """Compile a model (a Graph, an ONNX path or ModelProto) into a callable CompiledModel.

    Args:
        db: a tuning database (path, URL or Database) to take each kernel's best schedule
            from; None: each kernel's design-space default schedule, no database read.
        target: the CPU to compile for (default: this machine).
        shapes: concrete input shapes for an ONNX model with symbolic dimensions.
    """
    if not isinstance(graph, Graph):
        from .onnx_import import from_onnx

        graph = from_onnx(graph, shapes=shapes)
    target = target or Target.detect()
    graph, plan = lower_graph(graph)
    unique = {s.key: s.workload for s in plan if isinstance(s, Lowered)}
    workers = max(1, min(BUILD_WORKERS, os.cpu_count() or 1, len(unique)))
    with ThreadPoolExecutor(max_workers=workers) as pool:  # C compilers run in subprocesses
        built = pool.map(lambda wl: build_kernel(wl, db, target), unique.values())
        kernels: dict[str, Kernel] = dict(zip(unique, built, strict=True))
    memory = plan_memory(graph, plan)
    space = arena(memory.size)
    buffers: dict[str, np.ndarray] = {}
    for name, array in graph.initializers.items():
        buffers[name] = as_kernel_array(array)
    for info in graph.inputs:
        buffers[info.name] = np.empty(info.shape, te_dtype(info.dtype))
    steps: list[_Step] = []
    for step in plan:
        if isinstance(step, Group):  # a view: the output is the input, reshaped
            buffers[step.output] = buffers[step.anchor.inputs[0]].reshape(
                graph.values[step.output].shape
            )
            continue
        kernel = kernels[step.key]
        out = graph.values[step.group.output]
        buffers[out.name] = place(space, memory.offsets[out.name], out.shape, te_dtype(out.dtype))
        args = [
            buffers[b.value].reshape(b.shape)
            for b in (step.bindings[a.name] for a in kernel.inputs)
        ]
        args.append(buffers[out.name].reshape(kernel.outputs[0].shape))
        for spec, array in zip(kernel.args, args, strict=True):
            if array.shape != spec.shape or array.dtype != np.dtype(spec.dtype):
                raise ModelError(
                    f"internal: {step.workload.name} argument {spec.name} is "
                    f"{array.shape} {array.dtype}, the kernel wants {spec.describe()}"
                )
        call = _PACKED(kernel.packed_address)
        steps.append(_Step(step.workload.name, call, pointer_array(args), kernel, tuple(args)))
    for v in graph.outputs:
        if v.name not in buffers:
            raise ModelError(f"output '{v.name}' is computed by no step")
    return CompiledModel(graph, steps, buffers, memory)


__all__ = ["CompiledModel", "build_kernel", "compile_model"]
