"""Rank candidates by their time relative to a reference timed beside them, not by absolute time.

On a shared 2-core VM the host's speed drifts by tens of percent over seconds and bursts when a
neighbour wakes: the same config measured 497 µs and 991 µs a minute apart, and a conv's tuned
winner and its template default moved together round by round (1.06/1.04, 1.53/1.57 ms). Two
kernels timed seconds apart are ranked by the host's mood as much as by their code. Timing the
candidate and a reference in short alternating blocks, in ABBA order so that drift which is linear
within a round cancels, and ranking by the per-round ratio removes what both share.

The ratio's uncertainty is the distribution-free confidence interval of the median of the
per-round ratios (order statistics of a binomial), which holds whatever the shape of the host's
noise, bursts included. Rounds go on until that interval decides the comparison at hand or is
narrow enough to say the two are equal, so clear cases cost five rounds and close ones more.

A round the host disturbed (see `measure.host`) is timed again; when the host stays busy, as
beside a CPU-bound neighbour, the round is kept with each block's time taken as a low quantile of
its groups of calls instead of their mean: most calls of a parallel kernel still run unstalled,
and a few wait a scheduler slice for a thread (a 1.2 ms matmul: fastest tenth of calls 1.21 ms
busy and 1.19 ms quiet, mean 6.2 ms busy). The mean would rank how well a kernel tolerates a
stalled thread; the quantile ranks the kernel.

The host's counters do not catch every stall: on a loaded host a parallel reference of 11 µs ran
whole blocks at 4-7 ms with no run-queue wait charged to the timing process, and serial
candidates beside it measured ratios of 0.0014. Drift moves a kernel by tens of percent, never
threefold, so a block whose fastest calls take `STALL_FACTOR` times the fastest block of the
same kernel seen so far (for the reference: across the whole run, `reference_floor`) is a stall
and its round is timed again while time allows. Nor do they catch every stalled call: a round
counts as disturbed too when a block's mean exceeds its low quantile by `SPREAD_LIMIT` (on a
quiet host a block's groups agree within a few percent; stalls are what spread them).
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Generic, TypeVar

K = TypeVar("K", bound=Hashable)

CANDIDATE, REFERENCE = 0, 1
LOW_QUANTILE = 0.1
STALL_FACTOR = 3.0
SPREAD_LIMIT = 1.25


@dataclass(frozen=True)
class Block:
    """One timed block: its mean seconds per call, and the low quantile of its groups of calls."""

    mean: float
    low: float

    @classmethod
    def of_groups(cls, mean: float, groups: Sequence[float]) -> Block:
        ordered = sorted(groups)
        return cls(mean, ordered[int(LOW_QUANTILE * (len(ordered) - 1))])


@dataclass(frozen=True)
class PairedTiming:
    """Per-round times of a candidate and its reference, and their ratio with its uncertainty."""

    candidate_seconds: tuple[float, ...]
    reference_seconds: tuple[float, ...]
    ratio: float
    """Median over rounds of candidate / reference: < 1 means the candidate is faster."""
    low: float
    high: float
    """Confidence interval of `ratio`."""
    disturbed: int = 0
    """Rounds thrown away and timed again because the host disturbed them."""
    filtered: int = 0
    """Disturbed rounds kept with each block's low quantile of calls instead of its mean."""
    stalled: int = 0
    """Rounds timed again because a block ran `STALL_FACTOR` times slower than its kernel can."""
    reference_floor: float = math.inf
    """The fastest low quantile of a reference block seen, this timing's and the run's before."""

    @property
    def seconds(self) -> float:
        """The candidate's median absolute time (recorded, never used to rank)."""
        return statistics.median(self.candidate_seconds)

    @property
    def reference(self) -> float:
        """The reference's median time in the same rounds: how fast the host was."""
        return statistics.median(self.reference_seconds)

    @property
    def rounds(self) -> int:
        return len(self.candidate_seconds)

    def decided(self, threshold: float) -> bool:
        """True once the interval lies wholly on one side of `threshold`."""
        return self.high < threshold or self.low > threshold


def median_interval(values: Sequence[float], confidence: float = 0.9) -> tuple[float, float]:
    """Distribution-free interval for the median: the widest-inside pair of order statistics.

    The median lies between the j-th smallest and j-th largest of n values with probability
    1 - 2·P(Binomial(n, ½) < j); j is the largest with that at least `confidence`. With fewer
    than 5 values no pair reaches 90%, and the interval is the full range.
    """
    if not values:
        raise ValueError("median_interval of no values")
    ordered = sorted(values)
    n = len(ordered)
    tail = (1.0 - confidence) / 2.0
    j, below = 0, 0.0  # below = P(Binomial(n, 1/2) <= j - 1)
    while j < n // 2:
        below_next = below + math.comb(n, j) / 2.0**n
        if below_next > tail:
            break
        j, below = j + 1, below_next
    j = max(j, 1)
    return ordered[j - 1], ordered[n - j]


def time_paired(
    time_block: Callable[[int], float | Block],
    *,
    min_rounds: int = 5,
    max_rounds: int = 15,
    threshold: float = 1.0,
    rel_width: float = 0.02,
    confidence: float = 0.9,
    watch: Callable[[], Callable[[], bool]] | None = None,
    max_retries: int = 2,
    max_seconds: float = math.inf,
    reference_floor: float = math.inf,
    place: Callable[[], None] | None = None,
) -> PairedTiming:
    """Time CANDIDATE and REFERENCE in alternating blocks until their ratio is known well enough.

    `time_block(which)` runs one block of `which` (CANDIDATE or REFERENCE) and returns its mean
    seconds per call (a float, or a `Block` that also carries the low quantile). Stops after
    `min_rounds` once the ratio's interval excludes `threshold` (the comparison is decided) or
    is narrower than `rel_width` of the ratio (the two are equal within what matters), and
    after `max_rounds` in any case.

    `watch()` is called as a round starts and returns a check that says, as it ends, whether
    the host disturbed it (see `measure.host`); a disturbed round is timed again, up to
    `max_retries` times in a row; a host still busy after that stays busy, and from then on
    disturbed rounds are kept with their blocks' low quantiles. A stalled round (a block
    `STALL_FACTOR` times slower than its kernel's fastest, the reference's compared with
    `reference_floor` too) is timed again however many times it takes. Past `max_seconds` of
    wall time, rounds are no longer timed again and the timing ends at `min_rounds`, or at the
    first stalled round with the rounds kept before it.

    `place()`, when given, is called as each round starts, before `watch()`, to put the
    kernels' operands on memory of their own for that round: a small kernel's time moves by
    10-15% with where its operands land relative to its scratch buffers (a conv of 80 us: its
    ratio to the default 0.80 in one process's placement, 0.89-0.95 in others), so the ratio is
    a median over placements, as a re-timing in another process is.
    """
    if min_rounds < 1 or max_rounds < min_rounds:
        raise ValueError(f"need 1 <= min_rounds <= max_rounds, got {min_rounds}, {max_rounds}")
    cand: list[float] = []
    ref: list[float] = []
    disturbed = filtered = stalled = streak = 0
    floors = {CANDIDATE: math.inf, REFERENCE: reference_floor}
    timing: PairedTiming | None = None
    deadline = time.monotonic() + max_seconds
    while True:
        order = (CANDIDATE, REFERENCE) if len(cand) % 2 == 0 else (REFERENCE, CANDIDATE)
        if place is not None:
            place()
        check = watch() if watch is not None else None
        blocks = {which: _as_block(time_block(which)) for which in order}
        spread = any(block.mean > SPREAD_LIMIT * block.low for block in blocks.values())
        busy = spread or (check is not None and check())
        for which, block in blocks.items():
            floors[which] = min(floors[which], block.low)
        stall = any(block.low > STALL_FACTOR * floors[w] for w, block in blocks.items())
        late = time.monotonic() >= deadline
        if stall and late and timing is not None:
            return timing  # what was kept so far: a stalled round would only mislead
        if not late and (stall or (busy and not filtered and streak < max_retries)):
            stalled, disturbed, streak = stalled + stall, disturbed + 1, streak + 1
            continue
        filtered, streak = filtered + busy, 0
        cand.append(blocks[CANDIDATE].low if busy else blocks[CANDIDATE].mean)
        ref.append(blocks[REFERENCE].low if busy else blocks[REFERENCE].mean)
        counts = (disturbed, filtered, stalled, floors[REFERENCE])
        timing = _summarise(cand, ref, confidence, *counts)
        if len(cand) >= max_rounds:
            return timing
        narrow = timing.high - timing.low <= rel_width * timing.ratio
        late = time.monotonic() > deadline
        if len(cand) >= min_rounds and (timing.decided(threshold) or narrow or late):
            return timing


def _head_to_head(time_block: Callable[[K], float], key: K, default: K, which: int) -> float:
    return time_block(key if which == CANDIDATE else default)


def _as_block(seconds: float | Block) -> Block:
    return seconds if isinstance(seconds, Block) else Block(seconds, seconds)


def _summarise(
    cand: list[float],
    ref: list[float],
    confidence: float,
    disturbed: int,
    filtered: int,
    stalled: int,
    reference_floor: float,
) -> PairedTiming:
    ratios = [c / r for c, r in zip(cand, ref, strict=True)]
    low, high = median_interval(ratios, confidence)
    median = statistics.median(ratios)
    return PairedTiming(
        tuple(cand), tuple(ref), median, low, high, disturbed, filtered, stalled, reference_floor
    )


@dataclass(frozen=True)
class Final(Generic[K]):
    """The head-to-head final: its winner and every finalist's ratio to the default."""

    winner: K
    default: K
    against_default: dict[K, PairedTiming]

    @property
    def margin(self) -> PairedTiming | None:
        """The winner's time relative to the default (None when the default itself won)."""
        return self.against_default.get(self.winner)


def final(
    finalists: Sequence[K],
    default: K,
    time_block: Callable[[K], float],
    **paired: Any,
) -> Final[K]:
    """Re-time the finalists head-to-head against the template default; the fastest wins.

    The default is always in the final, and a finalist beats it only with a median ratio below
    1, so a tune never ends on a config that measured slower than where its search began.
    `paired` passes through to `time_paired`.
    """
    against: dict[K, PairedTiming] = {}
    for key in dict.fromkeys(finalists):
        if key == default:
            continue
        against[key] = time_paired(partial(_head_to_head, time_block, key, default), **paired)
    faster = {key: t for key, t in against.items() if t.ratio < 1.0}
    winner = min(faster, key=lambda key: faster[key].ratio) if faster else default
    return Final(winner, default, against)
