"""tensortune: a compiler and ML-guided autotuner for tensor programs on CPUs.

import tensortune as tt
kernel = tt.compile("matmul:M=256,N=256,K=256")            # naive loop nest
result = tt.tune("matmul:M=256,N=256,K=256", trials=32)     # search, measure, record
kernel = tt.compile("matmul:M=256,N=256,K=256", db=None or path)  # best tuned schedule
"""

from . import te
from .build.kernel import Kernel
from .errors import (
    BuildError,
    DSLError,
    KernelArgumentError,
    LoweringError,
    ScheduleError,
    SpecError,
    TensorTuneError,
)
from .schedule import Schedule
from .target import Target
from .workload import Workload, workload

from .version import __version__

_NO_DB = object()


def compile(program, schedule=None, target=None, db=_NO_DB) -> Kernel:  # noqa: A001
    """Compile a spec string, Workload or output Tensor(s) into a callable Kernel.

    With ``schedule`` that schedule is used; with ``db`` (a path, URL, or None for the default
    database) the best tuned schedule for this target, or the design space's default when the
    workload was never tuned; with neither, the plain loop nest.
    """
    if db is not _NO_DB and schedule is None:
        from .tune import compile_tuned

        return compile_tuned(program, db, target)
    from .pipeline import compile as compile_with

    return compile_with(program, schedule, target)


def tune(workload, **kwargs):
    """See :func:`tensortune.tune.tune`."""
    from .tune import tune as run

    return run(workload, **kwargs)


__all__ = [
    "BuildError",
    "DSLError",
    "Kernel",
    "KernelArgumentError",
    "LoweringError",
    "Schedule",
    "ScheduleError",
    "SpecError",
    "Target",
    "TensorTuneError",
    "Workload",
    "__version__",
    "compile",
    "te",
    "tune",
    "workload",
]
