"""Compile a workload with the best schedule the database holds for it on this target."""

from __future__ import annotations

from ..build.kernel import Kernel
from ..database import open_database
from ..pipeline import compile as compile_with
from ..schedule import Schedule
from ..space.registry import design_space
from ..target import Target
from ..workload import Workload
from ..workload import workload as parse_workload


def compile_tuned(program, db=None, target: Target | None = None) -> Kernel:
    """Best record's schedule, or the design space's default when none was tuned."""
    wl = program if isinstance(program, Workload) else parse_workload(program)
    target = target or Target.detect()
    with open_database(db) as database:
        best = database.best(wl.name, str(target))
    if best is not None and best.trace:
        sch = Schedule.from_trace(wl.outputs, best.trace)
    else:
        ds = design_space(wl, target)
        sch = ds.schedule(best.config if best is not None else ds.default)
    return compile_with(wl, sch, target)
