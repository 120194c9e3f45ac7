"""Which workloads the dataset measures, and which it must never train on.

Training workloads are the layers of the real networks in ``tensortune.workload.zoo`` whose
family is not held out, plus seeded random shapes of every op class the design spaces support
(so the model sees shapes no network happens to have). Whole model families are held out, by
workload key, so the evaluation measures transfer to networks the model has never seen a layer
of — TenSet's held-out-network protocol.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Callable, Iterable

from ..workload import Workload, workload
from ..workload.zoo import FAMILIES, layers
from .records import DatasetError

#: Whole networks never trained on: a CNN with depthwise convs, a transformer encoder and a
#: recommender's MLPs (dense and interaction GEMMs). The evaluation's held-out set.
HELD_OUT_FAMILIES = ("mobilenet_v2", "bert_base", "dlrm")

#: Every other catalogued network: its layers are training workloads.
TRAINING_FAMILIES = tuple(f for f in FAMILIES if f not in HELD_OUT_FAMILIES)

#: Random shapes per op class added to the training set by default.
RANDOM_PER_CLASS = 6

#: Op classes the dataset covers: the ops with a built-in design-space template.
OP_CLASSES = (
    "matmul",
    "batch_matmul",
    "dense",
    "conv2d",
    "depthwise_conv2d",
    "maxpool2d",
    "softmax",
    "layernorm",
)


def op_class(wl: Workload | str) -> str:
    """``Workload.op_class`` of a workload or its spec."""
    return (workload(wl) if isinstance(wl, str) else wl).op_class


_SMALL = (8, 16, 24, 32, 48, 64, 96, 128)
_MID = (32, 48, 64, 96, 128, 192, 256, 384, 512)
_CHANNELS = (16, 24, 32, 48, 64, 96, 128, 256)
_SPATIAL = (7, 14, 28, 56)


def _matmul(rng: random.Random) -> str:
    return f"matmul:M={rng.choice(_MID)},N={rng.choice(_MID)},K={rng.choice(_MID)}"


def _batch_matmul(rng: random.Random) -> str:
    b, m, n, k = rng.choice((2, 4, 8, 12)), rng.choice(_MID), rng.choice(_SMALL), rng.choice(_MID)
    return f"batch_matmul:B={b},M={m},N={n},K={k}"


def _dense(rng: random.Random) -> str:
    return f"dense:M={rng.choice((1, 4, 16, 32, 64))},N={rng.choice(_MID)},K={rng.choice(_MID)}"


def _conv2d(rng: random.Random) -> str:
    r = rng.choice((1, 3, 3, 5))
    stride = rng.choice((1, 1, 2))
    c, k, h = rng.choice(_CHANNELS), rng.choice(_CHANNELS), rng.choice(_SPATIAL)
    return f"conv2d:C={c},H={h},W={h},K={k},R={r},S={r},stride={stride},pad={r // 2}"


def _depthwise(rng: random.Random) -> str:
    r, h, c = rng.choice((3, 3, 5)), rng.choice(_SPATIAL), rng.choice(_CHANNELS)
    return (
        f"depthwise_conv2d:C={c},H={h},W={h},R={r},S={r},stride={rng.choice((1, 2))},pad={r // 2}"
    )


def _maxpool(rng: random.Random) -> str:
    r, h = rng.choice((2, 3)), rng.choice((14, 28, 56, 112))
    return f"maxpool2d:C={rng.choice(_CHANNELS)},H={h},W={h},R={r},S={r},stride=2"


def _rows_cols(op: str) -> Callable[[random.Random], str]:
    def make(rng: random.Random) -> str:
        return f"{op}:rows={rng.choice((16, 64, 128, 256, 512))},cols={rng.choice(_MID)}"

    return make


_RANDOM: dict[str, Callable[[random.Random], str]] = {
    "matmul": _matmul,
    "batch_matmul": _batch_matmul,
    "dense": _dense,
    "conv2d": _conv2d,
    "depthwise_conv2d": _depthwise,
    "maxpool2d": _maxpool,
    "softmax": _rows_cols("softmax"),
    "layernorm": _rows_cols("layernorm"),
}


def random_workloads(per_class: int, seed: int = 0) -> list[str]:
    """``per_class`` distinct seeded random shapes of every op class, as canonical specs."""
    rng = random.Random(seed)
    out: list[str] = []
    for cls in OP_CLASSES:
        names: dict[str, None] = {}
        for _ in range(per_class * 20):
            if len(names) == per_class:
                break
            names.setdefault(workload(_RANDOM[cls](rng)).name)
        out.extend(names)
    return out


def interleave(specs: Iterable[str]) -> list[str]:
    """Round-robin over op classes, so any prefix (a chunk of collection) covers them all."""
    by_class: dict[str, list[str]] = {}
    for spec in specs:
        by_class.setdefault(op_class(spec), []).append(spec)
    queues = list(by_class.values())
    out: list[str] = []
    while any(queues):
        for q in queues:
            if q:
                out.append(q.pop(0))
    return out


def _canonical(specs: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(workload(s).name for s in specs))


def held_out_workloads() -> list[str]:
    """Canonical specs of every layer of the held-out families (evaluation only)."""
    return _canonical(layer.spec for layer in layers(HELD_OUT_FAMILIES))


def training_workloads(random_per_class: int = RANDOM_PER_CLASS, seed: int = 0) -> list[str]:
    """Layers of the training families plus random shapes, minus every held-out key (a random
    shape or a shared layer that equals a held-out one is dropped, never trained on)."""
    held = set(held_out_workloads())
    specs = _canonical(
        [
            *(lay.spec for lay in layers(TRAINING_FAMILIES)),
            *random_workloads(random_per_class, seed),
        ]
    )
    return [s for s in specs if s not in held]


def collection_order(specs: Iterable[str]) -> list[str]:
    """Typical shapes first within each op class (nearest the class's median FLOPs, in log
    scale), classes interleaved: a short chunk of collection measures representative layers of
    every op class before it spends minutes on one huge layer or many toy ones."""
    flops = {s: max(workload(s).flops, 1.0) for s in specs}
    by_class: dict[str, list[str]] = {}
    for s in flops:
        by_class.setdefault(op_class(s), []).append(s)
    ordered: list[str] = []
    for group in by_class.values():
        center = math.log(statistics.median(flops[s] for s in group))
        ordered += sorted(group, key=lambda s: (abs(math.log(flops[s]) - center), s))
    return interleave(ordered)


def check_no_held_out(workloads: Iterable[str]) -> None:
    """Refuse a training set that holds any held-out workload key (it would leak the test)."""
    leaked = sorted(set(workloads) & set(held_out_workloads()))
    if leaked:
        raise DatasetError(
            f"{len(leaked)} held-out workload(s) in the training set, e.g. {leaked[0]}: "
            f"the families {', '.join(HELD_OUT_FAMILIES)} are for evaluation only"
        )
