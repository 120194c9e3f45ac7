"""tensortune: a compiler and ML-guided autotuner for tensor programs on CPUs.

    import tensortune as tt
    kernel = tt.compile("matmul:M=256,N=256,K=256")            # naive loop nest
    result = tt.tune("matmul:M=256,N=256,K=256", trials=32)     # search, measure, record
    kernel = tt.compile("matmul:M=256,N=256,K=256", db=None)    # best tuned schedule
    kernel = tt.compile("matmul:M=200,N=300,K=64", db=None)     # untuned: zero-shot choice

Start with ``help(tt.workload)`` (spec strings), ``help(tt.compile)``, ``help(tt.tune)`` and
``help(tt.Schedule)``. Every error tensortune raises on purpose is a ``TensorTuneError``; the
subclasses exported here say what went wrong (``SpecError``, ``ScheduleError``, ``BuildError``,
``EnvironmentFailure``...).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import te
from .build.kernel import Kernel
from .errors import (
    BuildError,
    ConfigError,
    DatabaseError,
    DSLError,
    EnvironmentFailure,
    KernelArgumentError,
    LoweringError,
    MeasurementWarning,
    MissingDependency,
    RecordWarning,
    ScheduleError,
    SpecError,
    StrategyError,
    TensorTuneError,
)
from .graph import CompiledModel, ModelError, compile_model, from_onnx, tune_model
from .pipeline import compile as compile_with
from .schedule import Schedule
from .target import Target
from .tuning import compile_tuned, tune
from .version import __version__
from .workload import Workload, workload

if TYPE_CHECKING:
    import os
    from collections.abc import Collection, Sequence

    from .database import Database


class _NotGiven:
    """``db``'s default: no database lookup (``None`` already means the default database)."""

    def __repr__(self) -> str:
        return "<not given>"


_NO_DB = _NotGiven()


def compile(
    program: str | Workload | te.Tensor | Sequence[te.Tensor],
    schedule: Schedule | None = None,
    target: Target | None = None,
    db: str | os.PathLike[str] | Database | _NotGiven | None = _NO_DB,
    constants: Collection[str] | None = None,
) -> Kernel:
    """Compile a program into a Kernel you call with NumPy arrays.

    Args:
        program: a workload spec string (``"matmul:M=256,N=256,K=256"``), a ``Workload``, or
            the output Tensor(s) of a ``te.compute``.
        schedule: the ``Schedule`` to use. Default: none, see ``db``.
        target: the CPU to compile for. Default: ``Target.detect()``, this machine with every
            CPU this process may use.
        db: look the schedule up in a tuning database: a SQLite path, a SQLAlchemy URL, an
            open ``Database``, or ``None`` for the default one (``$TENSORTUNE_DB``, else
            ``tuning.db`` in the user cache directory). It picks the best valid record for
            ``target``; for a workload never tuned there, the zero-shot config: the one the
            pretrained cost model ranks first among the default, a sample of the design space
            and the best configs of similar tuned workloads, chosen without measuring (about
            a second) and recorded in an existing database as a prediction, never as a
            measurement, so the next compile reuses it (``tensortune best`` shows it marked).
            Without a pretrained model, the design space's default. Not given (and no
            ``schedule``): the plain, unoptimised loop nest. A ``schedule`` wins over ``db``.
        constants: names of inputs that never change between calls (weights). What the
            kernel computes from them alone (a packed copy) moves into ``kernel.prepack``, run
            once: ``packed = kernel.prepack(*weights)``, then each call passes the other inputs
            followed by the packed ones (``kernel.args`` lists them). With ``db``, the records
            tuned with those inputs constant are used (``Workload.with_constants``: the
            constants are part of the database key). Default: a Workload's own ``constants``
            (none for a spec string or a compute).

    Returns:
        A ``Kernel``: ``kernel(*inputs)`` returns the output array(s); ``kernel.source`` is the
        generated C and ``kernel.library_path`` the shared library, cached by content hash in
        ``$TENSORTUNE_CACHE_DIR`` (default: the user cache directory).

    Raises:
        SpecError: a malformed spec string (also for ``db=`` lookups), or, with ``db``,
            ``constants`` naming something that is not an input.
        ScheduleError, LoweringError: a schedule that cannot be turned into a loop nest, or
            ``constants`` naming something that is not an input.
        BuildError: no C compiler, or it rejected the source (``CompileError.log`` has why).
        EnvironmentFailure: the kernel cache cannot be created or written.
        DatabaseError: ``db`` names a database that cannot be read.
        TensorTuneError: ``db`` given with a program that is not a spec or a Workload.
    """
    if not isinstance(db, _NotGiven) and schedule is None:
        if not isinstance(program, str | Workload):
            raise TensorTuneError(
                "compile(db=...) looks a tuned schedule up by workload: pass a spec string or "
                "a Workload (or pass schedule= for a compute of your own)"
            )
        wl = program if isinstance(program, Workload) else workload(program)
        if constants is not None:
            wl = wl.with_constants(constants)
        return compile_tuned(wl, db, target)
    return compile_with(program, schedule, target, constants)


__all__ = [
    "BuildError",
    "CompiledModel",
    "ConfigError",
    "DSLError",
    "DatabaseError",
    "EnvironmentFailure",
    "Kernel",
    "KernelArgumentError",
    "LoweringError",
    "MeasurementWarning",
    "MissingDependency",
    "ModelError",
    "RecordWarning",
    "Schedule",
    "ScheduleError",
    "SpecError",
    "StrategyError",
    "Target",
    "TensorTuneError",
    "Workload",
    "__version__",
    "compile",
    "compile_model",
    "from_onnx",
    "te",
    "tune",
    "tune_model",
    "workload",
]
