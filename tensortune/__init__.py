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
from .pipeline import compile as compile_with
from .schedule import Schedule
from .target import Target
from .tuning import compile_tuned, tune
from .version import __version__
from .workload import Workload, workload

_NO_DB = object()


def compile(program, schedule=None, target=None, db=_NO_DB) -> Kernel:
    """Compile a spec string, Workload or output Tensor(s) into a callable Kernel.

    With ``schedule`` that schedule is used; with ``db`` (a path, URL, or None for the default
    database) the best tuned schedule for this target, or the design space's default when the
    workload was never tuned; with neither, the plain loop nest.
    """
    if db is not _NO_DB and schedule is None:
        return compile_tuned(program, db, target)
    return compile_with(program, schedule, target)


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
