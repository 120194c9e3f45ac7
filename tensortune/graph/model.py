"""Compiling a model: every fused group built once as a tensortune kernel (with the tuning
database's best schedule when one is given), all of them linked into one shared library with a
generated C entry point that runs them in order on one arena planned at compile time. The
result is a `CompiledModel` (`tensortune.graph.compiled`), re-exported here.
"""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from ..backend import arg_specs, backend_for
from ..codegen.scratch import WORKSPACE_FLAG
from ..errors import EnvironmentFailure, TensorTuneError
from ..schedule import Schedule
from ..space import DesignSpace
from ..space.registry import design_space
from ..space.template import generic_space
from ..target import Target
from ..tuning.apply import tuned_schedule
from ..workload import Workload
from .compiled import CompiledModel
from .entry import entry_source
from .errors import ModelError
from .fuse import Group
from .ir import Graph
from .library import (
    Call,
    KernelUnit,
    Place,
    Sizes,
    aligned,
    c_name,
    compile_object,
    kernel_c_name,
    link_library,
    pack_weights,
)
from .lower import te_dtype
from .memory import MemoryPlan, arena, plan_memory
from .tasks import Lowered, as_kernel_array, lower_graph

BUILD_WORKERS = 4
"""Kernels compiled at once: each is a C compiler process, Python only schedules them."""


def build_unit(wl: Workload, db: Any, target: Target, name: str) -> KernelUnit:
    """The workload's kernel as C function ``name`` compiled to an object: the database's best
    schedule (``db`` given; records of ``wl.name``, which names its constants) or the design
    space's default; if that cannot be built, the generic space's default, then the plain loop
    nest. The workload's constants are weights: what is computed from them alone goes into
    ``<name>_prepack``, run once."""

    def tuned() -> tuple[Schedule, bool]:
        record, schedule = tuned_schedule(wl, db, target)
        return schedule, record is not None

    def default(space: DesignSpace) -> tuple[Schedule, bool]:
        return space.schedule(space.default), False

    attempts = [tuned] if db is not None else [lambda: default(design_space(wl, target))]
    attempts += [lambda: default(generic_space(wl, target)), lambda: (Schedule(wl.outputs), False)]
    backend = backend_for(target)
    failure: Exception | None = None
    for attempt in attempts:
        try:
            schedule, from_db = attempt()
            source, split = backend.generate_prepacked(schedule, name, wl.constants)
            flags = (*backend.flags(schedule), WORKSPACE_FLAG)
            obj = compile_object(source, flags, target)
        except EnvironmentFailure:
            raise
        except TensorTuneError as exc:
            failure = exc
            continue
        if failure is not None:
            warnings.warn(f"{wl.name}: fell back to a simpler schedule ({failure})", stacklevel=3)
        prepack = arg_specs(split.prepack) if split.prepack is not None else ()
        return KernelUnit(name, source, arg_specs(split.run), flags, obj, from_db, prepack)
    raise ModelError(f"cannot build the kernel of {wl.name}: {failure}")


def compile_model(
    graph: Graph | Any,
    db: Any = None,
    target: Target | None = None,
    shapes: Mapping[str, Sequence[int]] | None = None,
    name: str | None = None,
    prepack: bool = True,
    layout: str = "auto",
) -> CompiledModel:
    """Compile a model (a Graph, an ONNX path or ModelProto) into a callable CompiledModel
    backed by one shared library.

    Args:
        db: a tuning database (path, URL or Database) to take each kernel's best schedule
            from (``tune_model``'s records, timed with the weights packed once; with
            ``prepack=False``, the records of the kernels that pack them per call); None: each
            kernel's design-space default schedule, no database read.
        target: the CPU to compile for (default: this machine).
        shapes: concrete input shapes for an ONNX model with symbolic dimensions.
        name: the C prefix of the library's symbols (default: the graph's name).
        prepack: pack the weights once, when the model is loaded (False: every kernel packs
            its weights on every call, as a kernel tuned alone does).
        layout: the convs' activation layout, "NCHW" (ONNX's), "NHWC" (channels innermost,
            weights transposed once here) or "auto" (``graph.layout.choose_layout``); tune with
            the same layout, since the kernels (and so the records) differ.
    """
    if not isinstance(graph, Graph):
        from .onnx_import import from_onnx

        graph = from_onnx(graph, shapes=shapes)
    target = target or Target.detect()
    graph, plan = lower_graph(graph, constants=prepack, layout=layout, target=target)
    prefix = c_name(name or graph.name)
    # calls share a kernel when they compute the same and the same inputs are weights: the
    # workload's name says both
    unique = {s.workload.name: s for s in plan if isinstance(s, Lowered)}
    names = {
        key: kernel_c_name(prefix, k, [n.op for n in s.group.nodes])
        for k, (key, s) in enumerate(unique.items())
    }
    workers = max(1, min(BUILD_WORKERS, os.cpu_count() or 1, len(unique)))
    with ThreadPoolExecutor(max_workers=workers) as pool:  # C compilers run in subprocesses
        built = pool.map(lambda k: build_unit(unique[k].workload, db, target, names[k]), unique)
        units = dict(zip(unique, built, strict=True))
    memory = plan_memory(graph, plan)
    places, arrays, calls, prepacks = _layout(graph, plan, lambda s: units[s.workload.name], memory)
    staging, end = {}, aligned(memory.size)
    for info in graph.inputs:
        if info.name in places and te_dtype(info.dtype) != info.dtype:
            staging[info.name] = end
            end += aligned(info.size * 4)
    offsets, blob = pack_weights(arrays)
    for value, offset in offsets.items():
        places[value] = Place("weights", offset, places[value].dtype)
    packed = len(blob)
    for call in prepacks:  # the packed copies follow the file's bytes
        for spec, value in zip(call.unit.prepack, call.values, strict=True):
            if spec.role == "output":
                places[value] = Place("weights", packed, spec.dtype)
                packed += aligned(math.prod(spec.shape) * np.dtype(spec.dtype).itemsize)
    sizes = Sizes(end, len(blob), packed - len(blob))
    entry = entry_source(prefix, graph, places, calls, staging, sizes, prepacks)
    library = link_library(entry, [u.obj for u in units.values()], target)
    buffer = arena(packed)
    buffer[: len(blob)] = np.frombuffer(blob, np.uint8)
    return CompiledModel(
        graph,
        prefix,
        calls,
        memory,
        places=places,
        library=library,
        entry=entry,
        weights=buffer,
        sizes=sizes,
    )


def _layout(
    graph: Graph,
    plan: list[Lowered | Group],
    unit_of: Callable[[Lowered], KernelUnit],
    memory: MemoryPlan,
) -> tuple[dict[str, Place], dict[str, np.ndarray], list[Call], list[Call]]:
    """Where each value lives, the weights the kernels read (in first-use order), the kernel
    calls in order and the prepack calls (once per kernel and weights; their outputs are
    placed later, after the weights)."""
    places: dict[str, Place] = {
        v.name: Place("input", k, te_dtype(v.dtype)) for k, v in enumerate(graph.inputs)
    }
    weights: dict[str, np.ndarray] = {}

    def place_of(value: str) -> Place:
        if value not in places and value in graph.initializers:
            weights[value] = as_kernel_array(graph.initializers[value])
            places[value] = Place("weights", -1, weights[value].dtype.name)  # offset: packed
        if value not in places:
            raise ModelError(f"internal: value '{value}' is computed by no earlier step")
        return places[value]

    calls: list[Call] = []
    prepacks: dict[tuple[str, tuple[str, ...]], Call] = {}
    for step in plan:
        if isinstance(step, Group):  # a view: the output is the input, reshaped
            places[step.output] = place_of(step.anchor.inputs[0])
            continue
        unit = unit_of(step)
        bound = {name: b.value for name, b in step.bindings.items()}
        if unit.prepack:
            consts = [a.name for a in unit.prepack if a.role == "input"]
            key = (unit.name, tuple(bound[c] for c in consts))
            if key not in prepacks:
                for value in key[1]:
                    place_of(value)
                packed = tuple(f"{p}:{len(prepacks)}" for p in unit.packed)
                note = f"{unit.name}: {', '.join(key[1])} packed once"
                prepacks[key] = Call(unit, (*key[1], *packed), note, prepack=True)
            bound |= dict(zip(unit.packed, prepacks[key].values[len(consts) :], strict=True))
        values = []
        for spec in unit.inputs:
            if spec.name in unit.packed:
                values.append(bound[spec.name])
                continue
            have = place_of(bound[spec.name])
            size = graph.values[bound[spec.name]].size
            if have.dtype != spec.dtype or size != math.prod(spec.shape):
                raise ModelError(
                    f"internal: {step.workload.name} argument {spec.name} is {bound[spec.name]} "
                    f"({size} x {have.dtype}), the kernel wants {spec.describe()}"
                )
            values.append(bound[spec.name])
        out = graph.values[step.group.output]
        places[out.name] = Place("arena", memory.offsets[out.name], te_dtype(out.dtype))
        ops = "+".join(n.op for n in step.group.nodes)
        shape = "x".join(map(str, out.shape))
        note = f"{ops} '{step.group.anchor.name}' -> {out.name!r} {out.dtype}[{shape}]"
        calls.append(Call(unit, (*values, out.name), note, group=step.group))
    for v in graph.outputs:
        try:
            place_of(v.name)
        except ModelError:
            raise ModelError(f"output '{v.name}' is computed by no step") from None
    return places, weights, calls, list(prepacks.values())


__all__ = ["CompiledModel", "build_unit", "compile_model"]
