"""What a tuning run hands back."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class TuneResult:
    workload: str
    target: str
    best_config: dict[str, Any] | None
    best_seconds: float | None
    gflops: float | None
    trials: int
    errors: int
    tuning_seconds: float
    errors_by_kind: dict[str, int] = field(default_factory=dict)
    ratio_to_default: float | None = None
    """The winner's median time relative to the template default, timed side by side."""
    ratio_interval: tuple[float, float] | None = None
    """Confidence interval of that ratio in the final re-measurement."""
    disturbed_rounds: int = 0
    """Timing rounds the host disturbed (steal, preemption) and that were timed again."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
