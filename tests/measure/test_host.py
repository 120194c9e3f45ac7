"""Disturbance counters: a competitor on the timing CPU is seen, a quiet interval is not."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tensortune.measure import host

pytestmark = pytest.mark.skipif(
    not hasattr(os, "sched_setaffinity") or not Path("/proc/self/task").exists(),
    reason="needs Linux /proc and CPU affinity",
)


def spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def test_a_competitor_on_the_same_cpu_preempts_the_timing_thread() -> None:
    cpu = min(os.sched_getaffinity(0))
    before_affinity = os.sched_getaffinity(0)
    competitor = subprocess.Popen(
        [sys.executable, "-c", f"import os; os.sched_setaffinity(0, {{{cpu}}})\nwhile True: pass"]
    )
    try:
        os.sched_setaffinity(0, {cpu})
        time.sleep(0.2)  # let the competitor start spinning
        before = host.sample()
        spin(0.5)
        seen = host.disturbance(before, host.sample())
    finally:
        competitor.kill()
        competitor.wait()
        os.sched_setaffinity(0, before_affinity)
    assert seen.involuntary_switches > 0
    assert seen.wait_share > 0.2  # about half the time, sharing the CPU with a spinner
    assert seen.disturbed()


def test_counters_are_monotonic_and_shares_are_fractions() -> None:
    before = host.sample()
    spin(0.05)
    after = host.sample()
    seen = host.disturbance(before, after)
    assert after.total_ticks >= before.total_ticks
    assert 0.0 <= seen.steal_share <= 1.0
    assert seen.involuntary_switches >= 0 and seen.wait_share >= 0


def test_missing_proc_reads_as_quiet(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(host, "PROC", tmp_path)
    quiet = host.disturbance(host.sample(), host.sample())
    assert (quiet.steal_share, quiet.involuntary_switches, quiet.wait_share) == (0.0, 0, 0.0)
    assert not quiet.disturbed()
