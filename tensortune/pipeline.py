"""The compile pipeline: compute (or spec) + schedule → lowered loop nest → C → loaded Kernel."""

from __future__ import annotations

from collections.abc import Sequence

from .build.compiler import compile_library
from .build.kernel import ArgSpec, Kernel
from .codegen import generate_c
from .errors import TensorTuneError
from .ir.nodes import PrimFunc
from .lower import lower
from .schedule import Schedule
from .target import Target
from .te.tensor import Tensor, sanitize

OPT_FLAGS = {"O1": "-O1", "O2": "-O2", "O3": "-O3", "Ofast": "-Ofast"}


def as_outputs(program) -> tuple[Tensor, ...]:
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


def kernel_name(program, outputs: Sequence[Tensor]) -> str:
    if isinstance(program, str):
        return sanitize(program.split(":", 1)[0])
    name = getattr(program, "op", None)
    return sanitize(name) if isinstance(name, str) else outputs[0].name + "_kernel"


def build_source(sch: Schedule, name: str, target: Target) -> tuple[str, PrimFunc]:
    """C source for a schedule, with the trace that produced it in the header comment."""
    func = lower(sch, name, target.num_threads)
    steps = "\n".join(f"  {s['primitive']}({_args(s['args'])})" for s in sch.trace)
    header = f"kernel {name} for target {target}\nschedule:\n{steps or '  (none)'}"
    return generate_c(func, header), func


def _args(args: dict) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in args.items())


def schedule_flags(sch: Schedule) -> list[str]:
    flags = []
    if "opt_level" in sch.flags:
        flags.append(OPT_FLAGS[sch.flags["opt_level"]])
    if sch.flags.get("fast_math"):
        flags.append("-ffast-math")
    if "unroll_pragma" in sch.flags:  # let the C compiler unroll the remaining loops, this much
        flags += ["-funroll-loops", f"--param=max-unroll-times={sch.flags['unroll_pragma']}"]
    flags.extend(sch.flags.get("extra_cflags", ()))
    return flags


def arg_specs(func: PrimFunc) -> tuple[ArgSpec, ...]:
    outs = {id(b) for b in func.outputs}
    return tuple(
        ArgSpec(b.name, b.shape, b.dtype, "output" if id(b) in outs else "input")
        for b in func.params
    )


def compile(program, schedule: Schedule | None = None, target: Target | None = None) -> Kernel:
    """Compile a program with a schedule (default: the naive loop nest) into a callable Kernel."""
    outputs = as_outputs(program)
    target = target or Target.detect()
    sch = schedule if schedule is not None else Schedule(outputs)
    name = kernel_name(program, outputs)
    source, func = build_source(sch, name, target)
    path = compile_library(source, target, schedule_flags(sch))
    return Kernel(path, func.name, arg_specs(func), source, target)
