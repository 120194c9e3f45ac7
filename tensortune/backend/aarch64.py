"""The AArch64 (NEON) backend: the same C, cross-compiled, checked under qemu on other hosts.

It proves the seam: nothing but this class and the table in `tensortune.target.aarch64` knows
about the architecture. On an AArch64 host it behaves like the x86 backend on x86 (kernels load
and are timed in process); elsewhere kernels build (``aarch64-linux-gnu-gcc``) but cannot load,
and `execute` runs them under ``qemu-aarch64`` for correctness only.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .base import Call
from .c import CBackend
from .qemu import run_emulated


class Aarch64Backend(CBackend):
    """NEON C kernels: 128-bit vectors, four float32 lanes."""

    arch = "aarch64"

    def execute(self, calls: Sequence[Call]) -> list[tuple[np.ndarray, ...]]:
        """In process on an AArch64 host, else every call in one qemu-aarch64 run."""
        if self.target.is_native:
            return super().execute(calls)
        return run_emulated(self.target, calls)
