"""Layer shapes of real networks as workload specs: what kernels must be fast on beyond round sizes.

Benchmarks (``benchmarks/tune_suite.py --suite models``) and the cost-model dataset draw from this
catalog so that tuning is judged on the shapes models have: 197 tokens, 35x35 and 17x17 grids,
channel counts of 24, 40, 112, 5x5 and 7x7 windows, stride-4 and stride-16 patch stems.
The networks are listed in `cnn_networks` and `sequence_networks`; where their shapes come from
is in `layer_specs`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ..errors import SpecError
from . import Workload, workload
from .cnn_networks import CNN_NETWORKS
from .sequence_networks import SEQUENCE_NETWORKS


@dataclass(frozen=True)
class Layer:
    """One layer of a real network: where it comes from and the workload spec it runs."""

    family: str
    name: str
    spec: str

    def workload(self) -> Workload:
        """The layer's workload with its parameters constant, as in a deployed network: every
        input after the first (weights, bias, a norm's scale and shift) but for a batched
        product's, whose operands are both activations (attention, feature interactions)."""
        wl = workload(self.spec)
        if wl.op == "batch_matmul":
            return wl
        return wl.with_constants(t.name for t in wl.inputs[1:])


def _family(name: str, rows: Iterable[tuple[str, str]]) -> tuple[Layer, ...]:
    """The family's layers, each spec once (under the first layer that has it)."""
    seen: set[str] = set()
    kept = []
    for layer, spec in rows:
        if spec not in seen:
            seen.add(spec)
            kept.append(Layer(name, layer, spec))
    return tuple(kept)


FAMILIES: dict[str, tuple[Layer, ...]] = {
    name: _family(name, build()) for name, build in {**CNN_NETWORKS, **SEQUENCE_NETWORKS}.items()
}
"""Each network's layers by family name, in the order the network runs them."""


def layers(families: Iterable[str] | None = None) -> list[Layer]:
    """The layers of the named families (all of them by default), in catalog order."""
    names = list(FAMILIES) if families is None else list(families)
    unknown = [n for n in names if n not in FAMILIES]
    if unknown:
        raise SpecError(
            f"unknown network family {', '.join(map(repr, unknown))}; known: {', '.join(FAMILIES)}"
        )
    return [layer for name in names for layer in FAMILIES[name]]


def by_key() -> dict[str, Layer]:
    """Every layer by ``"family/name"``, the label benchmarks and datasets print."""
    return {f"{layer.family}/{layer.name}": layer for layer in layers()}
