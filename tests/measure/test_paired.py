"""Paired timing on a simulated host whose speed drifts and bursts as this project's VMs do."""

from __future__ import annotations

import math
import random
import statistics

import pytest

from tensortune.measure.paired import CANDIDATE, Block, final, median_interval, time_paired

BLOCK_SECONDS = 0.05


class SimulatedHost:
    """A host whose slowdown drifts slowly (±35%), bursts 1.5-3x for up to 1.5 s at random, and
    adds 2% noise to each block; the clock advances by one block per measurement."""

    def __init__(self, seed: int):
        self.rng = random.Random(seed)
        self.now = 0.0
        self.phase = self.rng.uniform(0, 2 * math.pi)
        self.bursts: list[tuple[float, float, float]] = []
        t = 0.0
        while t < 3600:
            t += self.rng.expovariate(0.3)
            self.bursts.append((t, t + self.rng.uniform(0.2, 1.5), self.rng.uniform(1.5, 3.0)))
            t = self.bursts[-1][1]

    def slowdown(self, t: float) -> float:
        drift = 1 + 0.25 * math.sin(2 * math.pi * t / 7 + self.phase) + 0.1 * math.sin(t / 0.9)
        burst = next((f for start, end, f in self.bursts if start <= t < end), 1.0)
        return drift * burst

    def block(self, true_seconds: float) -> float:
        measured = true_seconds * self.slowdown(self.now) * self.rng.lognormvariate(0, 0.02)
        self.now += BLOCK_SECONDS
        return measured

    def idle(self, seconds: float) -> None:
        """Time spent building and timing other candidates between two measurements."""
        self.now += seconds


def unpaired_faster(host: SimulatedHost, fast: float, slow: float) -> bool:
    """Today's ranking: each kernel's median of 5 repeats, taken seconds apart."""
    first = statistics.median(host.block(slow) for _ in range(5))
    host.idle(host.rng.uniform(1, 10))
    second = statistics.median(host.block(fast) for _ in range(5))
    return second < first


def paired_faster(host: SimulatedHost, fast: float, slow: float) -> bool:
    timing = time_paired(lambda which: host.block(fast if which == CANDIDATE else slow))
    return timing.ratio < 1.0


def test_paired_ranking_finds_the_faster_kernel_where_unpaired_ranking_does_not() -> None:
    seeds = range(200)
    paired = sum(paired_faster(SimulatedHost(s), 0.95, 1.0) for s in seeds) / len(seeds)
    unpaired = sum(unpaired_faster(SimulatedHost(s), 0.95, 1.0) for s in seeds) / len(seeds)
    assert paired >= 0.97, paired
    assert unpaired <= 0.8, unpaired


def test_paired_ratio_recovers_the_true_ratio_despite_drift() -> None:
    for seed in range(20):
        host = SimulatedHost(seed)
        timing = time_paired(lambda which, host=host: host.block(0.8 if which == CANDIDATE else 1))
        assert timing.ratio == pytest.approx(0.8, rel=0.05)
        assert timing.low <= timing.ratio <= timing.high


def test_rounds_adapt_to_how_close_the_comparison_is() -> None:
    clear = time_paired(lambda which: 0.5 if which == CANDIDATE else 1.0)
    host = SimulatedHost(7)
    close = time_paired(lambda which: host.block(0.995 if which == CANDIDATE else 1.0))
    assert clear.rounds == 5
    assert close.rounds > clear.rounds


def test_the_default_is_always_a_finalist_and_a_tune_never_ends_slower_than_it() -> None:
    # "lucky" was recorded fastest by a burst-free draw but is truly 10% slower than the default.
    true = {"default": 1.0, "lucky": 1.1, "better": 0.97, "worse": 1.3}
    for seed in range(50):
        host = SimulatedHost(seed)
        result = final(["lucky", "worse"], "default", lambda key, h=host: h.block(true[key]))
        assert result.winner == "default"
        assert set(result.against_default) == {"lucky", "worse"}
        host = SimulatedHost(seed)
        result = final(["lucky", "better"], "default", lambda key, h=host: h.block(true[key]))
        assert result.winner == "better"
        assert result.margin is not None and result.margin.ratio == pytest.approx(0.97, rel=0.05)


def test_median_interval_covers_the_median_and_narrows_with_more_values() -> None:
    rng = random.Random(0)
    few = [rng.gauss(1, 0.1) for _ in range(5)]
    many = [rng.gauss(1, 0.1) for _ in range(60)]
    assert median_interval(few) == (min(few), max(few))
    low, high = median_interval(many)
    assert low <= statistics.median(many) <= high
    assert high - low < max(many) - min(many)
    misses = 0
    for _ in range(400):
        sample = [rng.gauss(0, 1) for _ in range(15)]
        low, high = median_interval(sample)
        misses += not low <= 0 <= high
    assert misses / 400 <= 0.12


def test_disturbed_rounds_are_timed_again_not_kept() -> None:
    rng = random.Random(3)
    bursty = {"now": False}

    def block(which: int) -> float:
        slowdown = rng.uniform(3.0, 6.0) if bursty["now"] else rng.lognormvariate(0, 0.02)
        return (0.9 if which == CANDIDATE else 1.0) * slowdown

    def watch():
        bursty["now"] = rng.random() < 0.3  # a third of the rounds see a neighbour
        return lambda: bursty["now"]

    timing = time_paired(block, watch=watch)
    assert timing.disturbed > 0
    assert max(timing.reference_seconds) < 2.0  # no kept round ran beside the neighbour
    assert timing.ratio == pytest.approx(0.9, rel=0.05)


def test_a_time_budget_ends_the_rounds() -> None:
    host = SimulatedHost(5)
    timing = time_paired(
        lambda which: host.block(1.0), max_seconds=0.0, rel_width=0.0, watch=lambda: lambda: True
    )
    assert (timing.rounds, timing.disturbed, timing.filtered) == (5, 0, 5)


def test_a_host_that_stays_busy_is_ranked_by_the_unstalled_calls() -> None:
    """Beside a CPU-bound neighbour every round is disturbed and block means carry stalls of a
    scheduler slice that hit two kernels unequally; the low quantile of their groups does not."""
    rng = random.Random(11)

    def block(which: int) -> Block:
        true = 0.9 if which == CANDIDATE else 1.0
        stall = 4.0 if which == CANDIDATE else 1.5  # the candidate tolerates a stalled thread worse
        groups = [
            true * (stall if rng.random() < 0.4 else rng.lognormvariate(0, 0.01)) for _ in range(64)
        ]
        return Block.of_groups(statistics.mean(groups), groups)

    timing = time_paired(block, watch=lambda: lambda: True)
    assert timing.disturbed == 2  # timed again twice, then kept filtered
    assert timing.filtered == timing.rounds
    assert timing.ratio == pytest.approx(0.9, rel=0.03)
    means = time_paired(lambda which: block(which).mean)
    assert means.ratio > 1.0  # ranking by the mean would pick the wrong kernel


def test_a_stalled_reference_the_host_counters_missed_is_timed_again() -> None:
    """A loaded host ran a parallel 11 µs reference at 4-7 ms in whole blocks while charging no
    run-queue wait to the timing process; a serial candidate beside it measured a ratio of 0.0014.
    Blocks that slow against the run's fastest reference block are stalls, not drift."""
    rng = random.Random(13)
    stalls = iter([True, True, False, True] + [False] * 100)

    def block(which: int) -> Block:
        if which == CANDIDATE:
            return Block(2.0, 2.0)
        seconds = (400.0 if next(stalls) else 1.0) * rng.lognormvariate(0, 0.02)
        return Block(seconds, seconds)

    timing = time_paired(block, watch=lambda: lambda: False, reference_floor=1.0)
    assert timing.stalled == 3
    assert max(timing.reference_seconds) < 2.0
    assert timing.ratio == pytest.approx(2.0, rel=0.05)
    assert timing.reference_floor == pytest.approx(1.0, rel=0.1)
    unguarded = time_paired(lambda which: 2.0 if which == CANDIDATE else 400.0)
    assert unguarded.ratio < 0.01  # what the run saw without its floor


def test_stalls_the_host_counters_missed_are_seen_in_the_spread_of_a_block() -> None:
    """A serial kernel beside a stalling parallel reference: block means say the serial one is
    faster; the spread of each block's groups marks the rounds, and their low quantiles rank."""
    rng = random.Random(17)

    def block(which: int) -> Block:
        if which == CANDIDATE:  # serial, 1.5x slower, and never stalls
            groups = [1.5 * rng.lognormvariate(0, 0.01) for _ in range(64)]
        else:
            groups = [(8.0 if rng.random() < 0.5 else 1.0) * rng.lognormvariate(0, 0.01)]
            groups += [(8.0 if rng.random() < 0.5 else 1.0) for _ in range(63)]
        return Block.of_groups(statistics.mean(groups), groups)

    timing = time_paired(block, watch=lambda: lambda: False)
    assert timing.filtered == timing.rounds
    assert timing.ratio == pytest.approx(1.5, rel=0.03)
    assert time_paired(lambda which: block(which).mean).ratio < 1.0


def test_each_round_is_timed_on_a_placement_of_its_own() -> None:
    """A reference whose speed depends on where its operands land (0.85-1.15 of its mean): on
    one placement the ratio is that placement's accident; placed afresh each round, it is the
    median over placements, as a re-timing in another process measures it."""
    rng = random.Random(3)
    factor = [1.15]  # the placement a process happened to get first
    events: list[str] = []

    def block(which: int) -> float:
        events.append("C" if which == CANDIDATE else "R")
        return 0.9 if which == CANDIDATE else factor[0]

    def place() -> None:
        events.append("place")
        factor[0] = rng.uniform(0.85, 1.15)

    fixed = time_paired(block, min_rounds=15)
    assert fixed.ratio == pytest.approx(0.9 / 1.15)
    events.clear()
    placed = time_paired(block, min_rounds=15, place=place)
    assert placed.ratio == pytest.approx(0.9, rel=0.06)
    assert events[:3] == ["place", "C", "R"] and events[3:6] == ["place", "R", "C"]
    assert events.count("place") == placed.rounds
