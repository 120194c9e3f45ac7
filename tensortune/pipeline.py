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
from .schedule.schedule import OPT_LEVELS, check_flag
from .target import Target
from .te.tensor import Tensor, sanitize

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
    """The compiler flags of a schedule's annotations, each checked again here (``flags`` is a
    plain dict anyone can write), so only allowlisted flags ever reach the command line."""
    for key, value in sch.flags.items():
        check_flag(key, value)
    flags = []
    if "opt_level" in sch.flags:
        flags.append(OPT_FLAGS[sch.flags["opt_level"]])
    if sch.flags.get("fast_math") or sch.flags.get("opt_level") == "Ofast":
        flags.extend(FAST_MATH_FLAGS)
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
