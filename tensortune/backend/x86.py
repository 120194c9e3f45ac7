"""The x86-64 backend: the C backend, run in this process on an x86-64 host."""

from __future__ import annotations

from .c import CBackend


class X86Backend(CBackend):
    """AVX-512 / AVX2 / SSE4.2 / baseline C kernels (tables in `tensortune.target.x86`)."""

    arch = "x86_64"
