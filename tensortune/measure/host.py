"""How quiet the host was while a kernel was timed: CPU steal and involuntary context switches.

A parallel kernel waits for its slowest thread, so one thread descheduled by a neighbour stalls
it: beside another CPU-bound job a depthwise convolution timed 12.5 ms against 0.11 ms alone.
Such a measurement is not slow code but a disturbed host, and is repeated rather than recorded.
The time the kernel's own threads spent runnable but waiting for a CPU (the run-queue wait of
``/proc/<pid>/task/*/schedstat``) and the hypervisor running another guest on our vCPUs (the
``steal`` column of ``/proc/stat``) are what the host reports of it. A count of involuntary
context switches is no measure: on a 2-vCPU VM almost every 0.1 s round has one (a timer tick
or a kernel thread), which costs microseconds; the wait time says how much it cost. All read as
zero where ``/proc`` is missing, so a non-Linux host is never called disturbed.
"""

from __future__ import annotations

import time
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
    wait_ns: int
    """Run-queue wait of the process's threads, summed."""
    wall_ns: int


@dataclass(frozen=True)
class Disturbance:
    """What happened to the host between two samples."""

    steal_share: float
    """Share of all CPU time that the hypervisor gave to others (0 to 1)."""
    involuntary_switches: int
    """Times the timing process's threads were preempted."""
    wait_share: float = 0.0
    """Run-queue wait of the timing threads, relative to the wall time between the samples."""

    def disturbed(self, max_wait_share: float = 0.05, max_steal_share: float = 0.1) -> bool:
        """Whether the threads waited for a CPU, or the hypervisor took one, long enough to
        move a time: steal is counted in 10 ms ticks, so its bar allows one tick in a round."""
        return self.wait_share > max_wait_share or self.steal_share > max_steal_share


def sample(pid: int | str = "self") -> HostSample:
    """Read the host's steal counters and `pid`'s involuntary context switches (all threads)."""
    steal, total = _cpu_ticks()
    switches, wait = _task_counters(pid)
    return HostSample(steal, total, switches, wait, time.monotonic_ns())


def disturbance(before: HostSample, after: HostSample) -> Disturbance:
    ticks = after.total_ticks - before.total_ticks
    steal = after.steal_ticks - before.steal_ticks
    wall = after.wall_ns - before.wall_ns
    return Disturbance(
        steal_share=steal / ticks if ticks > 0 else 0.0,
        involuntary_switches=after.involuntary_switches - before.involuntary_switches,
        wait_share=(after.wait_ns - before.wait_ns) / wall if wall > 0 else 0.0,
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


def _task_counters(pid: int | str) -> tuple[int, int]:
    """(involuntary context switches, run-queue wait in ns) summed over `pid`'s threads."""
    switches = wait = 0
    try:
        tasks = list((PROC / str(pid) / "task").iterdir())
    except OSError:
        return 0, 0
    for task in tasks:
        try:
            status = (task / "status").read_text()
            schedstat = (task / "schedstat").read_text().split()
        except OSError:  # the thread ended between listing and reading
            continue
        wait += int(schedstat[1]) if len(schedstat) > 1 else 0
        for line in status.splitlines():
            if line.startswith("nonvoluntary_ctxt_switches:"):
                switches += int(line.split()[1])
    return switches, wait
