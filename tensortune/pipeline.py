"""The compile pipeline: compute (or spec) + schedule → lowered loop nest → source → library →
loaded Kernel, every step after scheduling done by the target's backend (`tensortune.backend`)."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from .backend import (
    FAST_MATH_FLAGS,
    OPT_FLAGS,
    Artifact,
    arg_specs,
    backend_for,
    schedule_flags,
)
from .build.kernel import Kernel
from .errors import TensorTuneError
from .ir.nodes import PrimFunc
from .lower import Prepacked
from .schedule import Schedule
from .target import Target
from .te.tensor import Tensor, sanitize

__all__ = [
    "FAST_MATH_FLAGS",
    "OPT_FLAGS",
    "arg_specs",
    "as_outputs",
    "build",
    "build_source",
    "compile",
    "constants_of",
    "kernel_name",
    "schedule_flags",
    "split_source",
]


def as_outputs(program: object) -> tuple[Tensor, ...]:
    """The output tensors of a spec string, a Workload, a Tensor or a sequence of Tensors."""
    if isinstance(program, str):
        from .workload import workload

        return workload(program).outputs
    if isinstance(program, Tensor):
        return (program,)
    outputs = getattr(program, "outputs", program)
    if isinstance(outputs, Sequence) and outputs and all(isinstance(t, Tensor) for t in outputs):
        return tuple(outputs)
    raise TensorTuneError(
        f"cannot compile {type(program).__name__}: pass a workload spec string such as "
        "'matmul:M=64,N=64,K=64', a Workload, or the output Tensor(s) of a compute"
    )


def kernel_name(program: object, outputs: Sequence[Tensor]) -> str:
    """The C name of a program's kernel: the op of a spec, else the first output's name."""
    if isinstance(program, str):
        return sanitize(program.split(":", 1)[0])
    name = getattr(program, "op", None)
    return sanitize(name) if isinstance(name, str) else outputs[0].name + "_kernel"


def build_source(sch: Schedule, name: str, target: Target) -> tuple[str, PrimFunc]:
    """Source for a schedule on `target` (its backend's `generate`), and the lowered function."""
    return backend_for(target).generate(sch, name)


def split_source(
    sch: Schedule, name: str, target: Target, constants: Collection[str]
) -> tuple[str, Prepacked]:
    """`build_source` for a kernel whose inputs in `constants` never change: the source and the
    lowered functions, what depends on the constants alone in ``<name>_prepack``."""
    return backend_for(target).generate_prepacked(sch, name, constants)


def constants_of(program: object, constants: Collection[str] | None) -> Collection[str]:
    """`constants` when given, else the program's own: a Workload's, none for anything else
    (read by attribute: the pipeline sits below the workload stage and never imports it)."""
    if constants is not None:
        return constants
    own: Collection[str] = getattr(program, "constants", ())
    return own


def build(
    program: object,
    schedule: Schedule | None = None,
    target: Target | None = None,
    constants: Collection[str] | None = None,
) -> Artifact:
    """Generate and build a program's kernel for `target` without loading it: works for any
    target whose compiler is installed, e.g. ``Target.cross("neon")`` on an x86 host.

    `constants` names inputs that never change between calls (weights): what is computed from
    them alone goes into ``<kernel>_prepack``, run once, whose outputs the kernel then takes.
    Default: a Workload's own ``constants``, none for anything else."""
    outputs = as_outputs(program)
    target = target or Target.detect()
    backend = backend_for(target)
    sch = schedule if schedule is not None else Schedule(outputs)
    name = kernel_name(program, outputs)
    source, split = split_source(sch, name, target, constants_of(program, constants))
    flags = backend.flags(sch)
    library = backend.build(source, flags)
    prepack = arg_specs(split.prepack) if split.prepack is not None else None
    return Artifact(
        library, split.run.name, arg_specs(split.run), source, target, tuple(flags), prepack
    )


def compile(
    program: object,
    schedule: Schedule | None = None,
    target: Target | None = None,
    constants: Collection[str] | None = None,
) -> Kernel:
    """Compile a program with a schedule (default: the naive loop nest) into a callable Kernel;
    with `constants` (default: a Workload's own), ``kernel.prepack(*constants)`` gives the
    packed inputs the kernel takes after its other inputs (`build`).

    Raises ForeignTargetError (with the built `.artifact`) for a target this host cannot run.
    """
    artifact = build(program, schedule, target, constants)
    return backend_for(artifact.target).load(artifact)
