"""Backends: one per architecture, each implementing the `Backend` seam (see `base`).

`backend_for(target)` picks the backend of a target's architecture; the pipeline, the batch
builder and the tuner go through it for source generation, flags, building and loading.
"""

from __future__ import annotations

import functools

from ..target import Target
from .aarch64 import Aarch64Backend
from .base import Artifact, Backend, Call, FeatureHints, ForeignTargetError
from .c import FAST_MATH_FLAGS, OPT_FLAGS, CBackend, arg_specs, schedule_flags
from .qemu import EmulationError, emulator, run_emulated
from .x86 import X86Backend

BACKENDS: dict[str, type[CBackend]] = {"x86_64": X86Backend, "aarch64": Aarch64Backend}
"""Backend class per architecture (`Target.arch`)."""


@functools.lru_cache(maxsize=64)
def backend_for(target: Target) -> Backend:
    """The backend for `target`'s architecture."""
    return BACKENDS[target.arch](target)


__all__ = [
    "BACKENDS",
    "FAST_MATH_FLAGS",
    "OPT_FLAGS",
    "Aarch64Backend",
    "Artifact",
    "Backend",
    "CBackend",
    "Call",
    "EmulationError",
    "FeatureHints",
    "ForeignTargetError",
    "X86Backend",
    "arg_specs",
    "backend_for",
    "emulator",
    "run_emulated",
    "schedule_flags",
]
