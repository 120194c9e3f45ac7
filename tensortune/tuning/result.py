"""What a tuning run hands back, and the one GFLOP/s formula every report uses."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from ..fleet.accounting import NodeReport


def gflops(flops: float, seconds: float | None) -> float | None:
    """Billions of floating-point operations per second, or None without a (non-zero) time.

    One definition, so the tuner's progress, its result and every CLI table agree."""
    return None if not seconds else flops / seconds / 1e9


@dataclass(frozen=True)
class TuneResult:
    """The outcome of ``tune``: the winner, and how the search went.

    The winner is the config with the best median ratio to the template default among the
    records of this workload, target and design space in the database (earlier runs included),
    after the final re-measurement; the fields are None when no candidate ran successfully.
    """

    workload: str
    """The workload's canonical name (its key in the database)."""
    target: str
    """The target key the measurements were taken (and are stored) under."""
    best_config: dict[str, Any] | None
    """The winner's knob values: ``compile(..., db=)`` rebuilds its schedule from them."""
    best_seconds: float | None
    """The winner's median time per call, in seconds."""
    gflops: float | None
    """The winner's throughput (the workload's flops over ``best_seconds``)."""
    trials: int
    """Measured candidates counted against the budget, earlier runs' included."""
    errors: int
    """How many of those failed (compile error, crash, timeout, wrong result)."""
    tuning_seconds: float
    """Wall-clock time of this call."""
    errors_by_kind: dict[str, int] = field(default_factory=dict)
    """``errors`` by kind: ``compile``, ``crash``, ``timeout``, ``wrong_result``, ``runtime``."""
    ratio_to_default: float | None = None
    """The winner's median time relative to the template default, timed side by side."""
    ratio_interval: tuple[float, float] | None = None
    """From the lowest to the highest end of that ratio's confidence intervals over the winner's
    re-measurements in this run."""
    disturbed_rounds: int = 0
    """Timing rounds the host disturbed (steal, run-queue wait) and that were timed again."""
    busy_rounds: int = 0
    """Rounds kept from each block's fastest calls because the host stayed busy."""
    stop_reason: str | None = None
    """Why the search stopped: the trial, time or patience budget, or an exhausted space."""
    trials_per_minute: float | None = None
    """End-to-end rate: the trials this call measured per minute of its wall-clock time."""
    nodes: tuple[NodeReport, ...] = ()
    """On a fleet, each node's accounts (built, measured, idle share; refused and dropped
    nodes say why); empty for a run on this machine."""

    def to_dict(self) -> dict[str, Any]:
        """Plain, JSON-serialisable fields."""
        return asdict(self)
