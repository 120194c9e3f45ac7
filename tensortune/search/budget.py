"""When to stop tuning: a trial cap, a wall-clock cap and patience, checked by the tuner."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Budget:
    """Limits for one tuning run; ``None`` disables a limit.

    ``early_stop`` is patience: stop after that many trials without a new best.
    """

    max_trials: int
    max_seconds: float | None = None
    early_stop: int | None = None

    def __post_init__(self) -> None:
        if self.max_trials < 1:
            raise ValueError(f"max_trials must be >= 1, got {self.max_trials}")
        if self.max_seconds is not None and self.max_seconds <= 0:
            raise ValueError(f"max_seconds must be > 0, got {self.max_seconds}")
        if self.early_stop is not None and self.early_stop < 1:
            raise ValueError(f"early_stop must be >= 1, got {self.early_stop}")

    def exhausted(
        self, trials_done: int, elapsed: float, trials_since_improvement: int
    ) -> str | None:
        """Why tuning should stop now (a human-readable reason), or None to go on."""
        if trials_done >= self.max_trials:
            return f"trial budget reached ({trials_done}/{self.max_trials} trials)"
        if self.max_seconds is not None and elapsed >= self.max_seconds:
            return f"time budget reached ({elapsed:.1f}s of {self.max_seconds:g}s)"
        if self.early_stop is not None and trials_since_improvement >= self.early_stop:
            return f"early stop: no improvement in the last {trials_since_improvement} trials"
        return None
