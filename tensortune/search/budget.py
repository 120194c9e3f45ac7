"""When to stop tuning: a trial cap, a wall-clock cap and patience, checked by the tuner
before each batch (``tuning.loop.tune``), so every stop has one reason it can report.

The wall-clock cap is kept, not merely checked: a measurement costs seconds (a build, a
correctness run, paired timing), so "stop starting batches once time is up" overran a 4 s share
of a model's budget by 48 s on a busy host. ``Pace`` learns what one measurement costs in this
run, and the tuner starts only the measurements that fit in the time left.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Budget:
    """Limits for one tuning run; ``None`` disables a limit.

    ``early_stop`` is patience: stop after that many trials without a new best. A
    ``max_trials`` of 0 measures nothing (a tune that only reports what is recorded).
    """

    max_trials: int
    max_seconds: float | None = None
    early_stop: int | None = None

    def __post_init__(self) -> None:
        trials = self.max_trials
        if isinstance(trials, bool) or not isinstance(trials, int) or trials < 0:
            raise ValueError(f"trials must be a non-negative integer, got {trials!r}")
        if self.max_seconds is not None and not self.max_seconds > 0:
            raise ValueError(f"max_seconds must be > 0, got {self.max_seconds!r}")
        if self.early_stop is not None and not self.early_stop >= 1:
            raise ValueError(f"early_stop must be >= 1, got {self.early_stop!r}")

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

    def room(self, elapsed: float) -> float:
        """Seconds left of the wall-clock cap (infinite without one)."""
        return math.inf if self.max_seconds is None else self.max_seconds - elapsed


@dataclass
class Pace:
    """Wall seconds one measurement has taken in this run, on average, so a time budget can be
    planned: ``fitting`` says how many more measurements the time left holds."""

    seconds: float = 0.0
    count: int = 0

    def add(self, seconds: float, count: int) -> None:
        self.seconds += seconds
        self.count += count

    @property
    def per_measurement(self) -> float | None:
        """The mean so far (None before the first measurement)."""
        return self.seconds / self.count if self.count else None

    def fitting(self, wanted: int, room: float) -> int:
        """How many of ``wanted`` measurements fit in ``room`` seconds: all of them while
        nothing is known yet or there is no cap."""
        per = self.per_measurement
        if per is None or math.isinf(room):
            return wanted
        return max(0, min(wanted, int(room / max(per, 1e-9))))
