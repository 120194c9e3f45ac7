"""How quiet the host was while a kernel was timed: CPU steal and involuntary context switches.

A parallel kernel waits for its slowest thread, so one thread descheduled by a neighbour stalls
it: beside another CPU-bound job a depthwise convolution timed 12.5 ms against 0.11 ms alone.
Such a measurement is not slow code but a disturbed host, and is repeated rather than recorded.
The kernel's own threads being switched out against their will (``nonvoluntary_ctxt_switches``
of the timing process's tasks) and the hypervisor running another guest on our vCPUs (the
``steal`` column of ``/proc/stat``) are what the host reports of it. Both read as zero where
``/proc`` is missing, so a non-Linux host is never called disturbed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")
STEAL_FIELD = 8  # user nice system idle iowait irq softirq steal: 1-based after "cpu"


@dataclass(frozen=True)
class HostSample:
    """Counters at one instant; subtract two with `disturbance`."""

    steal_ticks: int
    total_ticks: int
    involuntary_switches: int


@dataclass(frozen=True)
class Disturbance:
    """What happened to the host between two samples."""

    steal_share: float
    """Share of all CPU time that the hypervisor gave to others (0 to 1)."""
    involuntary_switches: int
    """Times the timing process's threads were preempted."""

    def disturbed(self, max_steal_share: float = 0.02, max_switches: int = 0) -> bool:
        return self.steal_share > max_steal_share or self.involuntary_switches > max_switches


def sample(pid: int | str = "self") -> HostSample:
    """Read the host's steal counters and `pid`'s involuntary context switches (all threads)."""
    steal, total = _cpu_ticks()
    return HostSample(steal, total, _involuntary_switches(pid))


def disturbance(before: HostSample, after: HostSample) -> Disturbance:
    ticks = after.total_ticks - before.total_ticks
    steal = after.steal_ticks - before.steal_ticks
    return Disturbance(
        steal_share=steal / ticks if ticks > 0 else 0.0,
        involuntary_switches=after.involuntary_switches - before.involuntary_switches,
    )


def _cpu_ticks() -> tuple[int, int]:
    try:
        first = (PROC / "stat").read_text().splitlines()[0].split()
    except (OSError, IndexError):
        return 0, 0
    ticks = [int(field) for field in first[1:]]
    # guest and guest_nice (fields 9-10) are already counted in user and nice
    counted = ticks[:STEAL_FIELD]
    return (counted[STEAL_FIELD - 1] if len(counted) >= STEAL_FIELD else 0), sum(counted)


def _involuntary_switches(pid: int | str) -> int:
    total = 0
    try:
        tasks = list((PROC / str(pid) / "task").iterdir())
    except OSError:
        return 0
    for task in tasks:
        try:
            status = (task / "status").read_text()
        except OSError:  # the thread ended between listing and reading
            continue
        for line in status.splitlines():
            if line.startswith("nonvoluntary_ctxt_switches:"):
                total += int(line.split()[1])
    return total
