"""The machine a kernel is compiled for: ISA, vector width, threads, caches and compiler.

Everything that changes the generated code or the binary lives in one frozen `Target`, so a
tuning record or a cached `.so` is only reused on a target with the same `key()`. What is known
about each architecture (ISA levels, vector widths, cpu flags, compiler flags and names) is one
`Arch` table per architecture (`target/x86.py`, `target/aarch64.py`); `Target` only looks them up,
and `tensortune.backend` holds the code generator, toolchain and runtime of each.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import re
import shutil
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import BuildError, SpecError, TensorTuneError
from .aarch64 import AARCH64
from .arch import Arch
from .x86 import X86_64

ARCHS: tuple[Arch, ...] = (X86_64, AARCH64)
"""Every architecture tensortune generates code for; its tables live in `target/<arch>.py`."""

ISAS: tuple[str, ...] = tuple(isa for arch in ARCHS for isa in arch.isas)
"""Every ISA level, grouped by architecture, each architecture's best first."""

_ALIASES = {arch.name: arch.isas[0] for arch in ARCHS if len(arch.isas) == 1}
"""An architecture with one level may be named by its name: ``aarch64`` is ``neon``."""

COMMON_CFLAGS = (
    "-fPIC",
    "-shared",
    "-fopenmp",
    "-std=gnu11",
    "-ffp-contract=fast",
    "-fno-math-errno",
    "-fno-predictive-commoning",
)
"""Flags every target compiles with (position independent shared library with OpenMP).

GCC's predictive commoning (on at -O3, and at -O2 for the loops it vectorizes) drops a store
that a later iteration overwrites; when the loop runs fewer iterations than that distance (one
thread's share of a parallel loop) it loads such an element before the loop and stores it back
after, over what another thread wrote there meanwhile (tests/codegen/test_parallel_races.py)."""

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

        Raises TensorTuneError if `isa` is unknown or not supported by this CPU (use `cross`
        to build for another one), and BuildError if no C compiler can be found.
        """
        flags = _cpu_flags()
        supported = supported_isas(flags)
        if isa is None:
            if not supported:
                raise TensorTuneError(
                    f"tensortune has no code generator for this CPU ({platform.machine()}); "
                    f"known architectures: {', '.join(a.name for a in ARCHS)}"
                )
            isa = supported[0]
        elif isa in ISAS and isa not in supported:
            arch = arch_of(isa)
            if arch is not host_arch():
                raise TensorTuneError(
                    f"this CPU does not support isa {isa!r}: it is an {arch.name} level and this "
                    f"host is {platform.machine()}; use Target.cross({isa!r}) to build for it"
                )
            missing = sorted(arch.required_flags[isa] - flags)
            raise TensorTuneError(
                f"this CPU does not support isa {isa!r} (missing cpu flags: "
                f"{', '.join(missing)}); supported here: {', '.join(supported)}"
            )
        return cls.cross(isa, num_threads=num_threads, cc=cc)

    @classmethod
    def cross(cls, isa: str, num_threads: int | None = None, cc: str | None = None) -> Target:
        """A target for `isa` whether or not this CPU runs it.

        For generating, reading or shipping code for another machine. An x86 level this CPU
        lacks uses this machine's caches; its kernels compile and load here but must not be
        called. Another architecture (``"neon"``, alias ``"aarch64"``) uses that
        architecture's cross compiler (``aarch64-linux-gnu-gcc``) and typical caches; its
        kernels build here but load only on such a machine (or run under qemu, see
        `tensortune.backend.aarch64`).
        """
        isa = _ALIASES.get(isa, isa)
        if isa not in ISAS:
            raise TensorTuneError(f"unknown isa {isa!r}; expected one of {', '.join(ISAS)}")
        arch = arch_of(isa)
        native = arch is host_arch()
        compiler = find_compiler(cc, arch)
        return cls(
            name=_cpu_name() if native else f"{arch.name} (cross)",
            isa=isa,
            vector_bits=arch.vector_bits[isa],
            num_threads=num_threads if num_threads is not None else available_cpus(),
            cc=compiler,
            cflags=arch.isa_cflags(isa, compiler) + COMMON_CFLAGS,
            **(_cache_sizes() if native else _DEFAULT_CACHES),
        )

    @classmethod
    def from_string(cls, spec: str) -> Target:
        """Parse a target spec such as ``"avx2 threads=1"``; unspecified parts are detected.

        Grammar: whitespace-separated tokens. A bare token is the isa (``avx512``, ``avx2``,
        ``sse4``, ``generic``, ``neon`` or its alias ``aarch64``; ``native``/``host`` mean
        "best supported"); an isa of another architecture gives a cross target. ``key=value``
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
            elif token in ISAS or token in _ALIASES:
                isa = _ALIASES.get(token, token)
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
        if isa and arch_of(isa) is not host_arch():
            target = cls.cross(isa, num_threads=threads, cc=options.get("cc"))
        else:
            target = cls.detect(num_threads=threads, isa=isa or None, cc=options.get("cc"))

        def size(key: str, detected: int) -> int:
            return _parse_size(options[key], spec) if key in options else detected

        return replace(
            target,
            l1d_bytes=size("l1d", target.l1d_bytes),
            l2_bytes=size("l2", target.l2_bytes),
            l3_bytes=size("l3", target.l3_bytes),
        )

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

    @property
    def arch(self) -> str:
        """The architecture this target's code runs on (``x86_64``, ``aarch64``)."""
        return arch_of(self.isa).name

    @property
    def vector_registers(self) -> int:
        """Architectural vector registers: the budget of a register tile."""
        return arch_of(self.isa).vector_registers[self.isa]

    @property
    def masked_vectors(self) -> bool:
        """Whether a vector tail can run as one masked operation (see `Arch.masked_isas`)."""
        return self.isa in arch_of(self.isa).masked_isas

    @property
    def is_native(self) -> bool:
        """Whether this host's architecture runs the target's code (its kernels can be loaded
        here; an x86 level this CPU lacks still loads, but must not be called)."""
        return arch_of(self.isa) is host_arch()

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
    arch = host_arch()
    if arch is None:
        return ()
    return tuple(isa for isa in arch.isas if arch.required_flags[isa] <= flags)


def isa_cflags(isa: str, cc: str) -> tuple[str, ...]:
    """Optimisation and ISA flags (without COMMON_CFLAGS) for `isa` compiled by `cc`."""
    return arch_of(isa).isa_cflags(isa, cc)


def arch_of(isa: str) -> Arch:
    """The architecture an ISA level belongs to (``"avx2"`` -> x86_64, ``"neon"`` -> aarch64)."""
    isa = _ALIASES.get(isa, isa)
    for arch in ARCHS:
        if isa in arch.isas:
            return arch
    raise TensorTuneError(f"unknown isa {isa!r}; expected one of {', '.join(ISAS)}")


def host_arch() -> Arch | None:
    """The architecture of this machine, or None if tensortune has no tables for it."""
    machine = platform.machine()
    return next((arch for arch in ARCHS if machine in arch.machines), None)


def find_compiler(cc: str | None = None, arch: Arch | None = None) -> str:
    """Absolute path of the C compiler for `arch` (default: this host's).

    `cc` wins; for this host's architecture $CC comes next, then the first of gcc/clang/cc on
    PATH; for another architecture its cross compilers (``aarch64-linux-gnu-gcc``), never $CC,
    which builds for this host.
    """
    host = host_arch()
    foreign = arch if arch is not None and arch is not host else None
    requested = cc or (os.environ.get("CC") if foreign is None else None)
    if requested:
        path = shutil.which(requested)
        if path is None:
            source = "cc=" if cc else "the CC environment variable"
            raise BuildError(f"C compiler {requested!r} (from {source}) was not found")
        return path
    candidates = foreign.cross_compilers if foreign else (host or X86_64).compilers
    for candidate in candidates:
        path = shutil.which(candidate)
        if path is not None:
            return path
    if foreign is not None:
        raise BuildError(
            f"no {foreign.name} C compiler was found (tried {', '.join(candidates)} on PATH); "
            f"install one (`{foreign.cross_install}`) or pass cc="
        )
    raise BuildError(
        f"no C compiler was found (tried {', '.join(candidates)} on PATH); set the CC "
        "environment variable or install one (`apt-get install gcc` / `xcode-select --install`)"
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


def cpu_family_model() -> tuple[int, int] | None:
    """This CPU's family and model numbers (x86 ``/proc/cpuinfo``): they tell apart CPUs a VM
    names only by brand ("AMD EPYC" for a Zen 3, 4 or 5). None where they are not readable."""
    family, model = _cpuinfo_field("cpu family"), _cpuinfo_field("model")
    if family is None or model is None or not (family.isdigit() and model.isdigit()):
        return None
    return int(family), int(model)


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
