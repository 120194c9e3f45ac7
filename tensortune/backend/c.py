"""The C backend: readable C through `codegen`, built by gcc/clang into a shared library.

Every CPU backend shares it: the C is the same for every architecture (GCC vector extensions, with
an ISA's intrinsics only under its macro), and the architecture's table in `tensortune.target`
chooses the compiler and its flags. Subclasses decide where a kernel can run.
"""

from __future__ import annotations

import platform
from collections.abc import Collection, Sequence
from pathlib import Path

import numpy as np

from ..build.compiler import compile_library
from ..build.kernel import ArgSpec, Kernel
from ..codegen import generate_c
from ..ir.nodes import PrimFunc
from ..lower import Prepacked, lower_prepacked
from ..schedule import Schedule
from ..schedule.annotations import fast_math
from ..schedule.schedule import OPT_LEVELS, check_flag
from ..target import Target
from .base import Artifact, Call, FeatureHints, ForeignTargetError

OPT_FLAGS = {level: f"-{level}" for level in OPT_LEVELS} | {"Ofast": "-O3"}  # + FAST_MATH_FLAGS
FAST_MATH_FLAGS = (
    "-fassociative-math",
    "-fno-signed-zeros",
    "-fno-trapping-math",
    "-freciprocal-math",
)
"""What ``fast_math`` (and ``Ofast``) allow: reassociation and reciprocals. Never -ffast-math: it
assumes there is no NaN or infinity, and a library built with it sets flush-to-zero in the
floating-point state of the whole process that loads it, NumPy's included."""

FMA_UNITS = 2
"""FMA pipes per core assumed by peak estimates (true of recent x86 and Neoverse cores)."""


def schedule_flags(sch: Schedule) -> list[str]:
    """The compiler flags of a schedule's annotations, each checked again here (``flags`` is a
    plain dict anyone can write), so only allowlisted flags ever reach the command line."""
    for key, value in sch.flags.items():
        check_flag(key, value)
    flags = []
    if "opt_level" in sch.flags:
        flags.append(OPT_FLAGS[sch.flags["opt_level"]])
    if fast_math(sch.flags):
        flags.extend(FAST_MATH_FLAGS)
    if "unroll_pragma" in sch.flags:  # let the C compiler unroll the remaining loops, this much
        flags += ["-funroll-loops", f"--param=max-unroll-times={sch.flags['unroll_pragma']}"]
    flags.extend(sch.flags.get("extra_cflags", ()))
    return flags


def arg_specs(func: PrimFunc) -> tuple[ArgSpec, ...]:
    """The kernel's signature: one dense array per parameter, inputs then outputs."""
    outs = {id(b) for b in func.outputs}
    return tuple(
        ArgSpec(b.name, b.shape, b.dtype, "output" if id(b) in outs else "input")
        for b in func.params
    )


def _args(args: dict) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in args.items())


class CBackend:
    """C source, gcc/clang, ctypes: kernels run in this process when the target's architecture
    is this host's (see `Target.is_native`)."""

    arch = ""
    """The architecture this backend serves (`Target.arch`); empty serves any."""

    def __init__(self, target: Target):
        if self.arch and target.arch != self.arch:
            raise ValueError(f"{type(self).__name__} serves {self.arch}, not {target.arch}")
        self.target = target

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.target})"

    # -- source and flags --------------------------------------------------------------------
    def generate(self, sch: Schedule, name: str) -> tuple[str, PrimFunc]:
        """C source for a schedule, with the trace that produced it in the header comment."""
        source, program = self.generate_prepacked(sch, name)
        return source, program.run

    def generate_prepacked(
        self, sch: Schedule, name: str, constants: Collection[str] = ()
    ) -> tuple[str, Prepacked]:
        """``generate`` with the inputs named in ``constants`` fixed: the stages computed from
        them alone print as ``<name>_prepack``, run once (`lower.prepack`)."""
        program = lower_prepacked(
            sch, name, self.target.num_threads, constants, masked=self.target.masked_vectors
        )
        steps = "\n".join(f"  {s['primitive']}({_args(s['args'])})" for s in sch.trace)
        header = f"kernel {name} for target {self.target}\nschedule:\n{steps or '  (none)'}"
        if constants:
            header += f"\nconstant inputs: {', '.join(sorted(constants))}"
        return generate_c(program.run, header, program.prepack), program

    def flags(self, sch: Schedule) -> list[str]:
        """gcc/clang spellings of the schedule's annotations (`schedule_flags`)."""
        return schedule_flags(sch)

    # -- build and load ----------------------------------------------------------------------
    def build(self, source: str, extra_flags: Sequence[str] = ()) -> Path:
        """A shared library through the content-addressed cache (`build.compiler`)."""
        return compile_library(source, self.target, extra_flags)

    def load(self, artifact: Artifact) -> Kernel:
        """The kernel as a Python callable (ctypes), if this host runs the target's code."""
        self._require_native(f"load kernel {artifact.name!r}", artifact)
        return Kernel(
            artifact.library,
            artifact.name,
            artifact.args,
            artifact.source,
            self.target,
            prepack_args=artifact.prepack,
        )

    # -- running -----------------------------------------------------------------------------
    def timer_library(self, harness_source: str) -> Path:
        """The timing harness is a plain library of this target, loaded next to the kernels."""
        self._require_native("time kernels", None)
        return self.build(harness_source)

    def execute(self, calls: Sequence[Call]) -> list[tuple[np.ndarray, ...]]:
        """Run each kernel once in this process."""
        results = []
        for artifact, inputs in calls:
            out = self.load(artifact)(*inputs)
            results.append(out if isinstance(out, tuple) else (out,))
        return results

    def hints(self) -> FeatureHints:
        """The target's vector, register, core and cache facts, from its architecture table."""
        t = self.target
        return FeatureHints(
            arch=t.arch,
            isa=t.isa,
            vector_bits=t.vector_bits,
            vector_registers=t.vector_registers,
            fma_units=FMA_UNITS,
            num_threads=t.num_threads,
            l1d_bytes=t.l1d_bytes,
            l2_bytes=t.l2_bytes,
            l3_bytes=t.l3_bytes,
            can_time=t.is_native,
        )

    def _require_native(self, what: str, artifact: Artifact | None) -> None:
        if self.target.is_native:
            return
        built = f"; its library was built: {artifact.library}" if artifact is not None else ""
        raise ForeignTargetError(
            f"cannot {what} on this host: target {self.target} runs {self.target.arch} code and "
            f"this host is {platform.machine()}{built}. Use tensortune.pipeline.build(...) to "
            f"build without loading, and run the library on an {self.target.arch} machine "
            "(or check it under an emulator: tensortune.backend.backend_for(target).execute)",
            artifact,
        )
