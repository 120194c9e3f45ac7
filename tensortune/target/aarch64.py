"""AArch64 with NEON (Advanced SIMD): 128-bit vectors, four float32 lanes, 32 registers.

NEON is part of every ARMv8-A core, so one level covers them all; the generated code uses GCC
vector extensions (and a few NEON intrinsics under ``__ARM_NEON``), never x86 intrinsics. On an
x86 host the kernels are built with Debian's ``aarch64-linux-gnu-gcc`` and run under
``qemu-aarch64`` for checking (see `tensortune.backend.aarch64`).
"""

from __future__ import annotations

from .arch import Arch

ISAS = ("neon",)


def isa_cflags(isa: str, cc: str) -> tuple[str, ...]:
    """``-march=armv8-a``: the baseline every AArch64 core runs (NEON included)."""
    del isa, cc  # one level, and gcc and clang spell it alike
    return ("-O3", "-march=armv8-a")


AARCH64 = Arch(
    name="aarch64",
    machines=frozenset({"aarch64", "arm64", "ARM64"}),
    isas=ISAS,
    vector_bits={"neon": 128},
    vector_registers={"neon": 32},
    required_flags={"neon": frozenset({"asimd"})},
    isa_cflags=isa_cflags,
    cross_compilers=("aarch64-linux-gnu-gcc",),
    cross_install="apt-get install gcc-aarch64-linux-gnu",
    emulators=("qemu-aarch64", "qemu-aarch64-static"),
    sysroots=("/usr/aarch64-linux-gnu",),
)
