"""The machine a kernel is compiled for: ISA, vector width, threads, caches and compiler.

Everything that changes the generated code or the binary lives in one frozen `Target`, so a
tuning record or a cached `.so` is only reused on a target with the same `key()`.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from .errors import BuildError, SpecError, TensorTuneError

ISAS = ("avx512", "avx2", "sse4", "generic")
"""Supported ISA levels, best first."""

_VECTOR_BITS = {"avx512": 512, "avx2": 256, "sse4": 128, "generic": 128}

# /proc/cpuinfo flags each ISA level needs (the avx512 subset the codegen may use).
_REQUIRED_FLAGS = {
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
COMMON_CFLAGS = (
    "-fPIC",
    "-shared",
    "-fopenmp",
    "-std=gnu11",
    "-ffp-contract=fast",
    "-fno-math-errno",
)
"""Flags every target compiles with (position independent shared library with OpenMP)."""

_COMPILER_CANDIDATES = ("gcc", "clang", "cc")
_SYSFS_CACHE = Path("/sys/devices/system/cpu/cpu0/cache")
_DEFAULT_CACHES = {"l1d_bytes": 32 * 1024, "l2_bytes": 1024 * 1024, "l3_bytes": 8 * 1024 * 1024}
_SIZE_RE = re.compile(r"^\s*(\d+)\s*([KMG]?)(?:i?B)?\s*$", re.IGNORECASE)
_SIZE_UNITS = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3}


@dataclass(frozen=True)
class Target:
    """A compilation and tuning target; build one with `Target.detect()` or `from_string()`."""

    name: str
    isa: str
    vector_bits: int
    num_threads: int
    l1d_bytes: int
    l2_bytes: int
    l3_bytes: int
    cc: str
    cflags: tuple[str, ...]

    def __post_init__(self) -> None:
        if self.isa not in ISAS:
            raise TensorTuneError(f"unknown isa {self.isa!r}; expected one of {', '.join(ISAS)}")
        if self.num_threads < 1:
            raise TensorTuneError(f"num_threads must be >= 1, got {self.num_threads}")
        if self.vector_bits not in (128, 256, 512):
            raise TensorTuneError(f"vector_bits must be 128, 256 or 512, got {self.vector_bits}")
        object.__setattr__(self, "cflags", tuple(self.cflags))

    @classmethod
    def detect(
        cls, num_threads: int | None = None, isa: str | None = None, cc: str | None = None
    ) -> Target:
        """Describe this machine; `isa` downgrades it (e.g. act as an AVX2-only target).

        Raises TensorTuneError if `isa` is unknown or not supported by this CPU, and
        BuildError if no C compiler can be found.
        """
        flags = _cpu_flags()
        supported = supported_isas(flags)
        if isa is None:
            isa = supported[0]
        elif isa in ISAS and isa not in supported:
            missing = sorted(_REQUIRED_FLAGS[isa] - flags)
            raise TensorTuneError(
                f"this CPU does not support isa {isa!r} (missing cpu flags: "
                f"{', '.join(missing)}); supported here: {', '.join(supported)}"
            )
        return cls.cross(isa, num_threads=num_threads, cc=cc)

    @classmethod
    def cross(cls, isa: str, num_threads: int | None = None, cc: str | None = None) -> Target:
        """A target for `isa` whether or not this CPU runs it, with this machine's caches.

        For generating, reading or shipping code for another machine; a kernel built for an
        ISA this CPU lacks compiles and loads here but must not be called.
        """
        if isa not in ISAS:
            raise TensorTuneError(f"unknown isa {isa!r}; expected one of {', '.join(ISAS)}")
        compiler = find_compiler(cc)
        return cls(
            name=_cpu_name(),
            isa=isa,
            vector_bits=_VECTOR_BITS[isa],
            num_threads=num_threads if num_threads is not None else available_cpus(),
            cc=compiler,
            cflags=isa_cflags(isa, compiler) + COMMON_CFLAGS,
            **_cache_sizes(),
        )

    @classmethod
    def from_string(cls, spec: str) -> Target:
        """Parse a target spec such as ``"avx2 threads=1"``; unspecified parts are detected.

        Grammar: whitespace-separated tokens. A bare token is the isa (``avx512``, ``avx2``,
        ``sse4``, ``generic``; ``native``/``host`` mean "best supported"). ``key=value``
        tokens: ``threads=N``, ``cc=PATH``, ``l1d=SIZE``, ``l2=SIZE``, ``l3=SIZE`` where SIZE
        is bytes with an optional K/M/G suffix (``32K``, ``1M``). The empty string means
        ``Target.detect()``.
        """
        isa: str | None = None
        options: dict[str, str] = {}
        for token in spec.split():
            if "=" in token:
                key, _, value = token.partition("=")
                if key not in ("threads", "cc", "l1d", "l2", "l3"):
                    raise SpecError(
                        f"target spec {spec!r}: unknown option {key!r} "
                        "(expected threads, cc, l1d, l2 or l3)"
                    )
                if not value:
                    raise SpecError(f"target spec {spec!r}: option {key!r} has no value")
                options[key] = value
            elif isa is not None:
                raise SpecError(f"target spec {spec!r}: more than one isa given")
            elif token in ("native", "host"):
                isa = ""
            elif token in ISAS:
                isa = token
            else:
                raise SpecError(
                    f"target spec {spec!r}: unknown isa {token!r} "
                    f"(expected one of {', '.join(ISAS)}, native)"
                )
        threads = None
        if "threads" in options:
            if not options["threads"].isdigit() or int(options["threads"]) < 1:
                raise SpecError(f"target spec {spec!r}: threads must be a positive integer")
            threads = int(options["threads"])
        target = cls.detect(num_threads=threads, isa=isa or None, cc=options.get("cc"))
        sizes = {
            f"{key}_bytes": _parse_size(options[key], spec)
            for key in ("l1d", "l2", "l3")
            if key in options
        }
        return replace(target, **sizes) if sizes else target

    def key(self) -> str:
        """A stable 16-hex-digit hash of every field (they all affect the generated code)."""
        blob = json.dumps(self.to_dict(), sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:16]

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form, the inverse of `from_dict`."""
        data = asdict(self)
        data["cflags"] = list(self.cflags)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Target:
        """Rebuild a Target saved with `to_dict` (e.g. from a tuning database)."""
        return cls(**{**data, "cflags": tuple(data["cflags"])})

    def lanes(self, dtype: str | np.dtype) -> int:
        """How many elements of `dtype` fit in one vector register."""
        return max(1, self.vector_bits // (np.dtype(dtype).itemsize * 8))

    def peak_gflops(self, dtype: str = "float32", ghz: float | None = None) -> float:
        """Rough upper bound: 2 FMA pipes x lanes x 2 flops x clock x threads.

        Only meant for "fraction of peak" reports; real CPUs (e.g. Zen 4 running 512-bit
        ops on 256-bit pipes) may reach half of it.
        """
        clock = ghz if ghz is not None else _cpu_ghz()
        return 2 * self.lanes(dtype) * 2 * clock * self.num_threads

    def __str__(self) -> str:
        return f"{self.isa}-{self.num_threads}t"


def supported_isas(flags: frozenset[str] | None = None) -> tuple[str, ...]:
    """ISA levels this CPU (or the given /proc/cpuinfo flag set) can run, best first."""
    flags = _cpu_flags() if flags is None else flags
    return tuple(isa for isa in ISAS if _REQUIRED_FLAGS[isa] <= flags)


def isa_cflags(isa: str, cc: str) -> tuple[str, ...]:
    """Optimisation and ISA flags (without COMMON_CFLAGS) for `isa` compiled by `cc`."""
    if isa != "avx512":
        return _ISA_FLAGS[isa]
    base = ("-march=native",) if _native_has_avx512(cc) else _AVX512_EXPLICIT
    return ("-O3", *base, "-mprefer-vector-width=512")


def find_compiler(cc: str | None = None) -> str:
    """Absolute path of the C compiler: `cc`, else $CC, else the first of gcc/clang/cc."""
    requested = cc or os.environ.get("CC")
    if requested:
        path = shutil.which(requested)
        if path is None:
            source = "cc=" if cc else "the CC environment variable"
            raise BuildError(f"C compiler {requested!r} (from {source}) was not found")
        return path
    for candidate in _COMPILER_CANDIDATES:
        path = shutil.which(candidate)
        if path is not None:
            return path
    raise BuildError(
        "no C compiler was found (tried gcc, clang, cc on PATH); set the CC environment "
        "variable or install one (`apt-get install gcc` / `xcode-select --install`)"
    )


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


@functools.cache
def _cpuinfo() -> str:
    try:
        return Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return ""


def _cpuinfo_field(name: str) -> str | None:
    match = re.search(rf"^{name}\s*:\s*(.*)$", _cpuinfo(), re.MULTILINE)
    return match.group(1).strip() if match else None


def _cpu_flags() -> frozenset[str]:
    flags = _cpuinfo_field("flags") or _cpuinfo_field("Features") or ""
    return frozenset(flags.split())


def _cpu_name() -> str:
    return _cpuinfo_field("model name") or os.uname().machine or "unknown"


def _cpu_ghz() -> float:
    mhz = _cpuinfo_field("cpu MHz")
    try:
        return float(mhz) / 1000 if mhz else 3.0
    except ValueError:
        return 3.0


def available_cpus() -> int:
    """CPUs this process may run on (its affinity mask), the default thread count."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _cache_sizes(root: Path = _SYSFS_CACHE) -> dict[str, int]:
    """L1d/L2/L3 sizes in bytes from sysfs, falling back to typical values."""
    sizes = dict(_DEFAULT_CACHES)
    for index in sorted(root.glob("index*")):
        try:
            level = (index / "level").read_text().strip()
            kind = (index / "type").read_text().strip()
            size = _parse_size((index / "size").read_text().strip(), str(index))
        except (OSError, SpecError):
            continue
        if level == "1" and kind == "Data":
            sizes["l1d_bytes"] = size
        elif level in ("2", "3") and kind in ("Unified", "Data"):
            sizes[f"l{level}_bytes"] = size
    return sizes


def _parse_size(text: str, context: str) -> int:
    match = _SIZE_RE.match(text)
    if match is None:
        raise SpecError(f"{context}: cannot parse size {text!r} (expected e.g. 32K, 1M, 4096)")
    return int(match.group(1)) * _SIZE_UNITS[match.group(2).upper()]
