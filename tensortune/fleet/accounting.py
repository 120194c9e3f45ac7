"""The run's accounts per node, and the end-to-end rate, for the run summary."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class NodeReport:
    """What one node did in a run; ``state`` is ``ok``, ``died``, ``hung``, ``failed`` or
    ``refused`` (its target key differs from the run's), and ``reason`` says why."""

    node: str
    host: str
    target: str
    state: str = "ok"
    reason: str = ""
    built: int = 0
    """Candidates compiled on the node."""
    measured: int = 0
    """Candidates timed on the node and answered for (re-measurements included)."""
    idle_share: float | None = None
    """Share of the node's time in the run with nothing to build or time (None: never up)."""

    @classmethod
    def from_stats(cls, stats: dict[str, Any] | None, **fields: Any) -> NodeReport:
        """A report from the node's last accounts (None when it never answered a task)."""
        if not stats:
            return cls(**fields)
        up = float(stats["up_seconds"])
        idle = max(0.0, 1.0 - float(stats["busy_seconds"]) / up) if up > 0 else None
        return cls(
            built=int(stats["built"]), measured=int(stats["measured"]), idle_share=idle, **fields
        )


def trials_per_minute(trials: int, seconds: float) -> float | None:
    """End-to-end rate of a run: trials it measured per minute of wall-clock time."""
    return trials * 60.0 / seconds if seconds > 0 and trials else None
