"""Static memory planning: every intermediate value of a compiled model gets a place in one
arena, reusing the bytes of values no later step reads (liveness over the step order), so a
deep model's activations take a few buffers' worth of memory and stay warm in cache."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .fuse import Group
from .ir import Graph
from .lower import te_dtype
from .tasks import Lowered

ALIGN = 64
"""Byte alignment of every buffer: a cache line, and any vector load's natural alignment."""


@dataclass(frozen=True)
class MemoryPlan:
    """Arena offsets of the values kernels write, the arena's size, and the bytes the same
    values would take without reuse."""

    offsets: dict[str, int]
    size: int
    unplanned: int


def _nbytes(graph: Graph, name: str) -> int:
    info = graph.values[name]
    itemsize = np.dtype(te_dtype(info.dtype)).itemsize
    return -(-math.prod(info.shape) * itemsize // ALIGN) * ALIGN


def lifetimes(graph: Graph, plan: list[Lowered | Group]) -> dict[str, tuple[int, int, int]]:
    """(bytes, first step, last step reading it) of each value a kernel writes; a view's
    readers keep the value it views alive, the graph outputs live to the end."""
    root: dict[str, str] = {}
    life: dict[str, list[int]] = {}
    for k, step in enumerate(plan):
        if isinstance(step, Group):
            source = step.anchor.inputs[0]
            root[step.output] = root.get(source, source)
            continue
        for binding in step.bindings.values():
            value = root.get(binding.value, binding.value)
            if value in life:
                life[value][2] = max(life[value][2], k)
        life[step.group.output] = [_nbytes(graph, step.group.output), k, k]
    for out in graph.outputs:
        value = root.get(out.name, out.name)
        if value in life:
            life[value][2] = len(plan)
    return {name: (size, first, last) for name, (size, first, last) in life.items()}


def plan_memory(graph: Graph, plan: list[Lowered | Group]) -> MemoryPlan:
    """First fit in order of definition: each value takes the lowest offset not overlapping a
    value still live when it is written (its step's inputs included: kernels take restrict
    pointers, so an output never shares bytes with what its kernel reads)."""
    placed: list[tuple[int, int, int]] = []  # offset, bytes, last step
    offsets: dict[str, int] = {}
    life = lifetimes(graph, plan)
    for name, (size, first, last) in sorted(life.items(), key=lambda item: item[1][1]):
        offset = 0
        for start, length, _ in sorted(p for p in placed if p[2] >= first):
            if offset + size <= start:
                break
            offset = max(offset, start + length)
        placed.append((offset, size, last))
        offsets[name] = offset
    total = max((o + s for o, s, _ in placed), default=0)
    return MemoryPlan(offsets, total, sum(size for size, _, _ in life.values()))


def arena(size: int) -> np.ndarray:
    """``size`` bytes starting on an ``ALIGN``-byte boundary."""
    raw = np.empty(size + ALIGN, np.uint8)
    skip = -raw.ctypes.data % ALIGN
    return raw[skip : skip + size]


def place(buffer: np.ndarray, offset: int, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    """The array of ``shape`` and ``dtype`` at ``offset`` in the arena."""
    count = math.prod(shape)
    nbytes = count * np.dtype(dtype).itemsize
    return buffer[offset : offset + nbytes].view(dtype).reshape(shape)


__all__ = ["ALIGN", "MemoryPlan", "arena", "lifetimes", "place", "plan_memory"]
