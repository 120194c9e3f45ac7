"""The compiled model as one shared library: every kernel compiled to an object file with its own
schedule's flags, linked with the generated C entry point (``entry.py``) that runs them in order
on the planned arena.

The weights buffer is the weights file's bytes followed by the packed copies of the weights
(``W_pack`` of a convolution, ``B_pack`` of a GEMM): ``<model>_prepack(weights)`` fills them
once, calling each kernel's ``_prepack`` function, so no inference repacks a constant.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..build.compiler import compile_program
from ..build.kernel import ArgSpec
from ..lower import PREPACK_SUFFIX
from ..target import Target
from ..te.tensor import sanitize
from .fuse import Group
from .ir import ValueInfo

STATUS = {
    0: "success",
    2: "an int64 input holds a value beyond int32",
    3: "not initialised (call <model>_init first)",
    4: "cannot read the weights file, or its size is wrong",
}
"""The entry point's return codes; a kernel's own nonzero status (-1: out of memory) passes
through."""


@dataclass(frozen=True)
class KernelUnit:
    """One kernel of the model: its C function, source, signature and object file."""

    name: str
    source: str
    args: tuple[ArgSpec, ...]
    flags: tuple[str, ...]
    obj: Path
    tuned: bool  # built from a tuning database record, not a default schedule
    prepack: tuple[ArgSpec, ...] = ()
    """The signature of ``<name>_prepack`` (constant inputs, then the packed buffers the kernel
    reads), or empty: the kernel packs nothing once."""

    @property
    def inputs(self) -> tuple[ArgSpec, ...]:
        return tuple(a for a in self.args if a.role == "input")

    @property
    def packed(self) -> tuple[str, ...]:
        """Names of the kernel's inputs that ``<name>_prepack`` fills."""
        return tuple(a.name for a in self.prepack if a.role == "output")

    @property
    def outputs(self) -> tuple[ArgSpec, ...]:
        return tuple(a for a in self.args if a.role == "output")


@dataclass(frozen=True)
class Place:
    """Where a value lives at run time: ``input`` (index), ``weights`` or ``arena`` (offset)."""

    region: str
    offset: int
    dtype: str  # the kernels' dtype of the value


@dataclass(frozen=True)
class Call:
    """One kernel call of the run (or, ``prepack``, of ``<model>_prepack``): the unit, its
    argument values and a comment."""

    unit: KernelUnit
    values: tuple[str, ...]  # graph values, inputs then the output (prepack: packed values)
    note: str
    prepack: bool = False
    group: Group | None = None  # the graph nodes the call computes (None: a prepack call)

    @property
    def function(self) -> str:
        """The C function called: the kernel, or its ``_prepack``."""
        return self.unit.name + (PREPACK_SUFFIX if self.prepack else "")


def compile_object(source: str, flags: Sequence[str], target: Target) -> Path:
    """A kernel's C compiled (through the verified cache) into a position-independent object
    file, with the target's flags and the schedule's own."""
    base = [f for f in target.cflags if f != "-shared"]
    return compile_program(source, target, [*base, *flags, "-c"], libraries=())


def link_library(entry: str, objects: Sequence[Path], target: Target) -> Path:
    """The entry point and every kernel object linked into one shared library (cached)."""
    return compile_program(entry, target, list(target.cflags), [*map(str, objects), "-lm"])


def c_name(name: str) -> str:
    """The model's name as a C identifier prefix."""
    return sanitize(name).lower()


@dataclass(frozen=True)
class Sizes:
    """Bytes of a model's arena, of its weights file and of the packed weights after them."""

    arena: int
    weights: int
    packed: int = 0


def pack_weights(arrays: dict[str, np.ndarray]) -> tuple[dict[str, int], bytes]:
    """Each array's offset in one buffer (64-byte aligned, in the given order) and the bytes."""
    offsets: dict[str, int] = {}
    chunks: list[bytes] = []
    size = 0
    for name, array in arrays.items():
        offsets[name] = size
        data = np.ascontiguousarray(array).tobytes()
        padded = -(-len(data) // 64) * 64 if data else 0
        chunks.append(data + bytes(padded - len(data)))
        size += padded
    return offsets, b"".join(chunks)


def kernel_c_name(model: str, index: int, ops: Sequence[str]) -> str:
    """A kernel's C function: the model prefix, its index and its ops (``m_03_conv_add_relu``)."""
    words = [re.sub(r"[^a-z0-9]", "", op.lower())[:12] for op in ops[:4]]
    return f"{model}_{index:02d}_{'_'.join(words)}"


def aligned(n: int, to: int = 64) -> int:
    return -(-n // to) * to if n else 0


def nbytes(info: ValueInfo, dtype: str) -> int:
    return math.prod(info.shape) * np.dtype(dtype).itemsize


__all__ = [
    "STATUS",
    "Call",
    "KernelUnit",
    "Place",
    "Sizes",
    "compile_object",
    "kernel_c_name",
    "link_library",
    "pack_weights",
]
