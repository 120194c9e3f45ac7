"""x86-64: AVX-512, AVX2, SSE4.2 and a baseline level, and the gcc/clang flags of each."""

from __future__ import annotations

import functools
import os
import subprocess

from .arch import Arch

ISAS = ("avx512", "avx2", "sse4", "generic")

# /proc/cpuinfo flags each ISA level needs (the avx512 subset the codegen may use).
REQUIRED_FLAGS = {
    "avx512": frozenset({"avx512f", "avx512vl", "avx512bw", "avx512dq", "avx2", "fma"}),
    "avx2": frozenset({"avx2", "fma"}),
    "sse4": frozenset({"sse4_2"}),
    "generic": frozenset(),
}
# Macros `cc -march=native` must define for the native flags to cover the avx512 level.
_AVX512_MACROS = ("__AVX512F__", "__AVX512VL__", "__AVX512BW__", "__AVX512DQ__", "__FMA__")

# -mprefer-vector-width=512: gcc tunes many CPUs (gcc 12 sees Zen 4 as znver3) for 256-bit
# vectors; an avx512 target promises 512-bit lanes, so auto-vectorised loops use them too
# (measured neutral on Zen 4, which splits 512-bit ops into two 256-bit halves).
_AVX512_EXPLICIT = ("-mavx512f", "-mavx512vl", "-mavx512bw", "-mavx512dq", "-mfma", "-mavx2")
_ISA_FLAGS = {
    "avx2": ("-O3", "-mavx2", "-mfma", "-mno-avx512f"),
    "sse4": ("-O3", "-msse4.2"),
    "generic": ("-O3",),
}


def isa_cflags(isa: str, cc: str) -> tuple[str, ...]:
    """Optimisation and ISA flags for `isa`; avx512 uses ``-march=native`` where that covers it
    (it also tunes for this CPU), else the explicit feature flags."""
    if isa != "avx512":
        return _ISA_FLAGS[isa]
    base = ("-march=native",) if _native_has_avx512(cc) else _AVX512_EXPLICIT
    return ("-O3", *base, "-mprefer-vector-width=512")


@functools.cache
def _native_has_avx512(cc: str) -> bool:
    """Whether `cc -march=native` enables every avx512 feature the avx512 level uses."""
    try:
        proc = subprocess.run(
            [cc, "-march=native", "-dM", "-E", "-x", "c", os.devnull],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return proc.returncode == 0 and all(
        f"#define {macro} " in proc.stdout for macro in _AVX512_MACROS
    )


X86_64 = Arch(
    name="x86_64",
    machines=frozenset({"x86_64", "amd64", "AMD64", "x64"}),
    isas=ISAS,
    vector_bits={"avx512": 512, "avx2": 256, "sse4": 128, "generic": 128},
    vector_registers={"avx512": 32, "avx2": 16, "sse4": 16, "generic": 16},
    required_flags=REQUIRED_FLAGS,
    isa_cflags=isa_cflags,
    cross_compilers=("x86_64-linux-gnu-gcc",),
    cross_install="apt-get install gcc-x86-64-linux-gnu",
    emulators=("qemu-x86_64", "qemu-x86_64-static"),
    sysroots=("/usr/x86_64-linux-gnu",),
    masked_isas=frozenset({"avx512", "avx2"}),  # AVX-512 mask registers, AVX vmaskmov
)
