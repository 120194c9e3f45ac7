"""The backend seam: what turns a schedule into something that runs on one architecture.

A backend owns every step after scheduling that depends on the machine: source generation, the
compiler and its flags, building, loading, the timing harness, and the facts a cost model may use
about the machine (`FeatureHints`). The pipeline, the batch builder and the tuner call these
steps and nothing architecture-specific, so a new architecture (or a GPU) is a new backend class
registered in `tensortune.backend.BACKENDS`, not edits across the package.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

from ..build.kernel import ArgSpec, Kernel
from ..errors import TensorTuneError
from ..ir.nodes import PrimFunc
from ..lower import Prepacked
from ..schedule import Schedule
from ..target import Target


@dataclass(frozen=True)
class Artifact:
    """A built kernel that need not be loadable here: its library, entry point and signature,
    the source it was built from and the flags added to the target's."""

    library: Path
    name: str
    args: tuple[ArgSpec, ...]
    source: str
    target: Target
    flags: tuple[str, ...] = ()
    prepack: tuple[ArgSpec, ...] | None = None
    """The signature of ``<name>_prepack`` (run once on the constant inputs), if there is one."""


@dataclass(frozen=True)
class FeatureHints:
    """What a cost model or a design space may know about the machine, from its backend."""

    arch: str
    isa: str
    vector_bits: int
    vector_registers: int
    fma_units: int
    num_threads: int
    l1d_bytes: int
    l2_bytes: int
    l3_bytes: int
    can_time: bool
    """False where timings mean nothing (a foreign architecture, run under an emulator)."""

    def lanes(self, dtype: str = "float32") -> int:
        """Elements of `dtype` in one vector register."""
        return max(1, self.vector_bits // (np.dtype(dtype).itemsize * 8))


Call = tuple[Artifact, Sequence[np.ndarray]]
"""One kernel run for correctness: a built kernel and its input arrays."""


class ForeignTargetError(TensorTuneError):
    """A kernel built for another architecture was asked to load or be timed on this host.

    Its source and library were built; `.artifact` holds them."""

    def __init__(self, message: str, artifact: Artifact | None = None):
        super().__init__(message)
        self.artifact = artifact


@runtime_checkable
class Backend(Protocol):
    """One code generator + toolchain + runtime for one architecture (see the module doc)."""

    target: Target

    def generate(self, sch: Schedule, name: str) -> tuple[str, PrimFunc]:
        """The source of `sch` as a kernel named `name`, and the lowered function it prints."""
        ...

    def generate_prepacked(
        self, sch: Schedule, name: str, constants: Collection[str] = ()
    ) -> tuple[str, Prepacked]:
        """`generate` with the inputs named in `constants` fixed: what is computed from them
        alone becomes a second function, `<name>_prepack`, run once."""
        ...

    def flags(self, sch: Schedule) -> list[str]:
        """Compiler flags the schedule's annotations ask for (added to the target's)."""
        ...

    def build(self, source: str, extra_flags: Sequence[str] = ()) -> Path:
        """Compile `source` into a library for the target (cached); raises BuildError."""
        ...

    def load(self, artifact: Artifact) -> Kernel:
        """A callable kernel; raises ForeignTargetError where this host cannot run it."""
        ...

    def timer_library(self, harness_source: str) -> Path:
        """The timing harness built for the target; raises ForeignTargetError where timings
        would mean nothing."""
        ...

    def execute(self, calls: Sequence[Call]) -> list[tuple[np.ndarray, ...]]:
        """Run each kernel once on its inputs (in this process, or under an emulator) and
        return its outputs: correctness, never timing."""
        ...

    def hints(self) -> FeatureHints:
        """Facts about the machine for cost models and design spaces."""
        ...
