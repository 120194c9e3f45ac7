"""Tuning a whole model: its distinct kernels tuned one after another within one time budget.

The budget is shared by a simple rule: each task's share is its part of the model's time (its
best latency in the database, else estimated from its FLOPs) times how often the model runs it,
divided by ``1 + trials already in the database / RESUME_TRIALS``, so a rerun spends its time
where the model spends it and where little was measured yet. Time a task leaves unused goes to
the tasks after it. Every measurement lands in the tuning database as it is taken, so a killed
run loses nothing and ``compile_model(db=)`` builds the winners.

A task is timed as the compiled model runs it: its weights are the workload's constants, packed
once before timing, so a kernel is not ranked by the repacking a model never does per call.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..database import Database, open_database
from ..space.registry import design_space
from ..target import Target
from ..tuning import TuneResult, TuneState, tune
from .ir import Graph
from .tasks import Task, extract_tasks

RESUME_TRIALS = 32
"""Trials already recorded that halve a task's share of a new budget."""
MIN_TASK_SECONDS = 2.0
"""A task whose share is shorter is skipped: a tuning run needs a baseline and a batch."""
SMALL_BATCH = 4
"""Configs built at a time for a task given under a minute: one batch must fit its share."""
MAX_TRIALS = 100_000
"""The trial cap passed to ``tune``: time, not trials, ends a task's search."""


@dataclass
class TaskReport:
    """One task's part of a model tuning run."""

    task: Task
    prior_trials: int
    allotted: float  # seconds the rule gave it
    seconds: float = 0.0  # seconds it took
    result: TuneResult | None = None  # None: skipped (share below MIN_TASK_SECONDS)


@dataclass
class ModelTuneResult:
    """What ``tune_model`` did: a report per task, in the order they were tuned."""

    model: str
    budget: float
    tasks: list[TaskReport] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def trials(self) -> int:
        return sum(r.result.trials for r in self.tasks if r.result is not None)


def _describe(task: Task) -> str:
    _, ops, shape, _ = ([*task.workload.name.split(":"), "", "", "", ""])[:4]
    return f"{ops} {shape}"


def _history(database: Database, task: Task, target: Target) -> tuple[int, float | None]:
    """Configs already measured for the task, and its best time so far (None: none ran)."""
    space = design_space(task.workload, target).name
    records = database.records(task.workload.name, str(target), space=space)
    times = [r.seconds for r in records if r.error is None and r.seconds]
    return len({r.config_key for r in records}), min(times, default=None)


def shares(
    tasks: Sequence[Task], prior: Sequence[int], latency: Sequence[float | None] | None = None
) -> list[float]:
    """Each task's fraction of the budget: its share of the model's time (its best measured
    latency, else its FLOPs at the median rate of the measured tasks, else its FLOPs) times
    how often it runs, discounted by the trials it already had."""
    latency = list(latency or [None] * len(tasks))
    rates = sorted(t.flops / s for t, s in zip(tasks, latency, strict=True) if s)
    rate = rates[len(rates) // 2] if rates else 1.0
    raw = [
        (s or max(t.flops, 1.0) / rate) * t.weight / (1 + n / RESUME_TRIALS)
        for t, n, s in zip(tasks, prior, latency, strict=True)
    ]
    total = sum(raw) or 1.0
    return [r / total for r in raw]


def tune_model(
    model: Graph | Any,
    budget: float,
    db: str | os.PathLike[str] | Database | None = None,
    target: Target | None = None,
    shapes: Mapping[str, Sequence[int]] | None = None,
    strategy: str = "model",
    seed: int | None = 0,
    verbose: bool = True,
    layout: str = "auto",
) -> ModelTuneResult:
    """Tune every distinct kernel of ``model`` (a Graph, an ONNX path or ModelProto) within
    ``budget`` seconds, recording into ``db``; rerunning continues where the database left off.

    Args:
        db: the tuning database (path, URL or Database; None: the default one).
        target: the CPU to tune for (default: this machine).
        shapes: concrete input shapes for an ONNX model with symbolic dimensions.
        strategy: the search strategy of each task (``tensortune.tune``'s).
        verbose: print a progress display and one line per task.
        layout: the convs' layout (``compile_model``'s): the kernels tuned are the ones a
            model compiled with the same layout runs.
    """
    if not isinstance(model, Graph):
        from .onnx_import import from_onnx

        model = from_onnx(model, shapes=shapes)
    target = target or Target.detect()
    tasks = extract_tasks(model, layout, target)
    database = open_database(db)
    try:
        history = [_history(database, t, target) for t in tasks]
        prior = [n for n, _ in history]
        fractions = shares(tasks, prior, [best for _, best in history])
        order = sorted(range(len(tasks)), key=lambda k: -fractions[k])
        result = ModelTuneResult(model.name, float(budget))
        reports = [TaskReport(tasks[k], prior[k], 0.0) for k in order]
        with _Display(verbose, budget, len(tasks)) as display:
            start = time.perf_counter()
            for n, (k, report) in enumerate(zip(order, reports, strict=True)):
                left = budget - (time.perf_counter() - start)
                rest = sum(fractions[j] for j in order[n:]) or 1.0
                report.allotted = max(0.0, left * fractions[k] / rest)
                result.tasks.append(report)
                if report.allotted < MIN_TASK_SECONDS:
                    display.line(n, report, "skipped (share of the budget too small)")
                    continue
                began = time.perf_counter()
                report.result = tune(
                    report.task.workload,
                    trials=report.prior_trials + MAX_TRIALS,
                    strategy=strategy,
                    db=database,
                    target=target,
                    seed=seed,
                    max_seconds=report.allotted,
                    batch_size=SMALL_BATCH if report.allotted < 60 else 8,
                    progress=display.update,
                )
                report.seconds = time.perf_counter() - began
                display.line(n, report, _summary(report))
                display.spent(time.perf_counter() - start)
            result.seconds = time.perf_counter() - start
    finally:
        if database is not db:
            database.close()
    return result


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3f} ms" if seconds >= 1e-4 else f"{seconds * 1e6:.2f} us"


def _summary(report: TaskReport) -> str:
    r = report.result
    assert r is not None
    best = f"best {_ms(r.best_seconds)}" if r.best_seconds else "no valid config"
    ratio = f", {r.ratio_to_default:.2f}x the default" if r.ratio_to_default else ""
    new = r.trials - report.prior_trials
    return f"{new} new trials ({r.trials} in all), {best}{ratio}, {report.seconds:.1f} s"


class _Display:
    """A rich progress bar for the budget and the current task, and a line per task."""

    def __init__(self, verbose: bool, budget: float, count: int):
        self.verbose, self.budget, self.count = verbose, budget, count
        self.progress: Any = None

    def __enter__(self) -> _Display:
        if self.verbose:
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

            self.progress = Progress(
                TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn()
            )
            self.progress.start()
            self.overall = self.progress.add_task(f"model ({self.count} tasks)", total=self.budget)
            self.current = self.progress.add_task("task", total=1)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.progress is not None:
            self.progress.stop()

    def update(self, state: TuneState) -> None:
        if self.progress is not None:
            best = f"best {_ms(state.best_seconds)}" if state.best_seconds else "..."
            self.progress.update(
                self.current,
                description=f"  {state.trials_done} trials, {best}",
                completed=min(state.trials_done, state.trials_total),
                total=state.trials_total,
            )

    def spent(self, seconds: float) -> None:
        if self.progress is not None:
            self.progress.update(self.overall, completed=min(seconds, self.budget))

    def line(self, n: int, report: TaskReport, text: str) -> None:
        if self.progress is not None:
            t = report.task
            self.progress.console.print(
                f"task {n + 1}/{self.count} {_describe(t)} x{t.weight} "
                f"({report.allotted:.0f} s allotted): {text}"
            )


__all__ = ["ModelTuneResult", "TaskReport", "shares", "tune_model"]
