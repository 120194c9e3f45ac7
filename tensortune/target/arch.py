"""What tensortune knows about one CPU architecture, as one table per architecture.

A new architecture is a new `Arch` row (its ISA levels, vector widths, the /proc/cpuinfo flags each
level needs, compiler flags and compiler names) plus a backend in `tensortune.backend`; nothing in
`Target` branches on an architecture.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class Arch:
    """One CPU architecture and its ISA levels (best first)."""

    name: str
    """Canonical name, as ``uname -m`` spells it on Linux (``x86_64``, ``aarch64``)."""
    machines: frozenset[str]
    """Every ``platform.machine()`` spelling of this architecture."""
    isas: tuple[str, ...]
    vector_bits: Mapping[str, int]
    vector_registers: Mapping[str, int]
    """Architectural vector registers per level: how big a register tile may grow."""
    required_flags: Mapping[str, frozenset[str]]
    """/proc/cpuinfo flags (``flags:`` on x86, ``Features:`` on Arm) each level needs."""
    isa_cflags: Callable[[str, str], tuple[str, ...]]
    """``isa_cflags(isa, cc)``: optimisation and ISA flags for `isa` compiled by `cc`."""
    compilers: tuple[str, ...] = ("gcc", "clang", "cc")
    """Compilers tried on a host of this architecture (after ``cc=`` and $CC)."""
    cross_compilers: tuple[str, ...]
    """Compilers tried when building for this architecture on another one."""
    cross_install: str
    """How to get a cross compiler, for the error that says none was found."""
    emulators: tuple[str, ...] = ()
    """User-mode emulators that run this architecture's programs elsewhere (qemu-user)."""
    sysroots: tuple[str, ...] = ()
    """Where the emulator finds this architecture's libc, libgomp and dynamic loader."""
    emulator_install: str = "apt-get install qemu-user"
    """How to get the emulator, for the error that says none was found."""
    masked_isas: frozenset[str] = frozenset()
    """Levels with masked vector loads and stores that never touch a masked-off lane's memory:
    a vector tail runs as one masked operation there, as scalar code elsewhere."""

    def __post_init__(self) -> None:
        # a level missing from a table fails here, at import, not deep inside a build
        for table in (self.vector_bits, self.vector_registers, self.required_flags):
            missing = set(self.isas) - set(table)
            if missing:
                raise ValueError(f"arch {self.name}: no entry for isa level(s) {sorted(missing)}")
