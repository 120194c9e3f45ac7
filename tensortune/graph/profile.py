"""Where a compiled model's time goes: every kernel call timed inside the model's own run.

``CompiledModel.profile(feeds)`` calls the library's ``<model>_run_timed``, the entry point's
timed twin: the same kernels in the same order on the same arena, each fed what the previous
ones computed, with a clock read around every call. Rounds alternate with plain runs, so the
profile's sum can be checked against the latency a user sees.

    prof = model.profile(rounds=50)
    for row in prof.rows: print(row.kernel, row.op, row.us, f"{row.share:.1%}")
    prof.by_op()  # {"Conv 3x3 depthwise s1": (calls, us), ...}
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .fuse import Group
from .ir import Graph, ValueInfo


@dataclass(frozen=True)
class ProfileRow:
    """One kernel call of the run: which kernel, what it computes and its median time."""

    step: int
    kernel: str  # the C function called
    ops: str  # the fused operators, "Conv+Clip"
    op: str  # the anchor's class, "Conv 3x3 depthwise s2"
    nodes: tuple[str, ...]  # the graph's node names the kernel computes
    shape: tuple[int, ...]  # of the output
    us: float  # median microseconds per call over the rounds
    share: float  # of the sum over all calls


@dataclass(frozen=True)
class ModelProfile:
    """The rows in run order, and the median whole-model call (``model.run``) timed in the
    same rounds: the rows' sum falls short of it by the Python call and the output copies (and,
    on a busy machine, by far more: a whole run waits on every call another process stalls,
    while each call's median skips the stalled rounds)."""

    rows: tuple[ProfileRow, ...]
    whole_us: float
    rounds: int

    @property
    def total_us(self) -> float:
        return sum(r.us for r in self.rows)

    def by_op(self) -> dict[str, tuple[int, float]]:
        """Operator class -> (calls, microseconds), the most expensive first."""
        found: dict[str, tuple[int, float]] = {}
        for r in self.rows:
            calls, us = found.get(r.op, (0, 0.0))
            found[r.op] = (calls + 1, us + r.us)
        return dict(sorted(found.items(), key=lambda kv: -kv[1][1]))


def op_class(graph: Graph, group: Group) -> str:
    """The anchor operator with what decides its kernel's speed: a convolution's window,
    whether it is depthwise or grouped, and its stride."""
    node = group.anchor
    if node.op != "Conv":
        return node.op
    nhwc = node.attr("layout") == "NHWC"  # the layout planner's form: weights [R, S, C, K]
    weight = graph.values[node.inputs[1]].shape
    window = "x".join(map(str, weight[:2] if nhwc else weight[2:]))
    groups = int(node.attr("group", 1))
    channels = graph.values[node.inputs[0]].shape[3 if nhwc else 1]
    kind = " depthwise" if groups > 1 and groups == channels else " grouped" if groups > 1 else ""
    strides = set(node.attr("strides", None) or (1,))
    stride = f" s{max(strides)}" if strides != {1} else " s1"
    return f"Conv {window}{kind}{stride}"


def random_feeds(inputs: tuple[ValueInfo, ...], seed: int = 0) -> dict[str, np.ndarray]:
    """Standard-normal floats, zeros for integer inputs (indices valid in any embedding)."""
    rng = np.random.default_rng(seed)
    return {
        v.name: (
            rng.standard_normal(v.shape).astype(v.dtype)
            if np.dtype(v.dtype).kind == "f"
            else np.zeros(v.shape, v.dtype)
        )
        for v in inputs
    }


def collect(
    graph: Graph,
    groups: list[Group | None],
    kernels: list[str],
    timed: Callable[[np.ndarray], object],
    whole: Callable[[], float],
    rounds: int,
) -> ModelProfile:
    """``rounds`` rounds of one timed run (``timed`` fills seconds per call) and one plain
    run (``whole`` returns its seconds), after one warm-up of each."""
    seconds = np.zeros(len(kernels))
    timed(seconds)
    whole()
    per_call: list[list[float]] = [[] for _ in kernels]
    wholes = []
    for _ in range(max(1, rounds)):
        timed(seconds)
        for k, s in enumerate(seconds):
            per_call[k].append(float(s))
        wholes.append(whole())
    medians = [statistics.median(t) * 1e6 for t in per_call]
    total = sum(medians) or 1.0
    rows = []
    for k, (group, name, us) in enumerate(zip(groups, kernels, medians, strict=True)):
        nodes = group.nodes if group is not None else ()
        rows.append(
            ProfileRow(
                step=k,
                kernel=name,
                ops="+".join(n.op for n in nodes),
                op=op_class(graph, group) if group is not None else "?",
                nodes=tuple(n.name for n in nodes),
                shape=graph.values[group.output].shape if group is not None else (),
                us=us,
                share=us / total,
            )
        )
    return ModelProfile(tuple(rows), statistics.median(wholes) * 1e6, max(1, rounds))


def profile_table(profile: ModelProfile, top: int | None = None) -> list[list[str]]:
    """Rows of text (header first) for a table: the calls in run order, or the ``top`` most
    expensive."""
    rows = list(profile.rows)
    if top is not None:
        rows = sorted(rows, key=lambda r: -r.us)[:top]
    out = [["step", "kernel", "ops", "class", "output", "us", "share", "nodes"]]
    for r in rows:
        nodes = r.nodes[0] + (f" (+{len(r.nodes) - 1})" if len(r.nodes) > 1 else "")
        shape = "x".join(map(str, r.shape))
        out.append(
            [str(r.step), r.kernel, r.ops, r.op, shape, f"{r.us:.1f}", f"{r.share:.1%}", nodes]
        )
    return out


def summary_lines(profile: ModelProfile) -> list[str]:
    """Per operator class: calls, microseconds and share; then the sum against a whole run."""
    total = profile.total_us or 1.0
    out = [f"{'class':28} {'calls':>5} {'us':>10} {'share':>7}"]
    for op, (calls, us) in profile.by_op().items():
        out.append(f"{op:28} {calls:5d} {us:10.1f} {us / total:7.1%}")
    out.append(
        f"sum of kernel calls {profile.total_us:.1f} us; whole model.run {profile.whole_us:.1f} us"
        f" (medians of {profile.rounds} rounds)"
    )
    return out


__all__ = [
    "ModelProfile",
    "ProfileRow",
    "collect",
    "op_class",
    "profile_table",
    "random_feeds",
    "summary_lines",
]
