"""Which design space a workload gets: a space registered for its op, else the built-in
template for its op class, else the generic space.

A user's own space is registered by op name, so ``tune`` measures in it and ``compile`` (also
``tensortune best``/``compile`` in the same process) rebuilds the winner from it::

    register_space("matmul_relu", matmul_relu_space)  # factory(workload, target) -> DesignSpace

Records name the space they were measured in, never carry its code: a record whose space is
not the one registered for its op now is passed over, and nothing from a database is run.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from ..errors import TensorTuneError
from ..target import Target
from ..workload import Workload
from .conv import conv_space
from .gemm import gemm_space
from .norm import norm_space
from .plugin import check_made, check_name, check_registration
from .pool import pool_space
from .template import DesignSpace, generic_space

SpaceFactory = Callable[[Workload, Target], DesignSpace]
"""``factory(workload, target) -> DesignSpace``: the knobs and the schedule builder."""

TEMPLATES: dict[str, SpaceFactory] = {
    "matmul": gemm_space,
    "batch_matmul": gemm_space,
    "dense": gemm_space,
    "conv2d": conv_space,
    "depthwise_conv2d": conv_space,
    "maxpool2d": pool_space,
    "softmax": norm_space,
    "layernorm": norm_space,
}

#: Spaces registered with ``register_space``: op name -> (space name, factory).
SPACES: dict[str, tuple[str, SpaceFactory]] = {}


def register_space(
    op: str, factory: SpaceFactory, *, name: str | None = None, replace: bool = False
) -> None:
    """Tune and compile every workload whose ``op`` is ``op`` in the space ``factory`` builds.

    ``name`` (default: ``op``) is what the records of this space are stored under; give a new
    name when the space changes meaning, so older records are not ranked with the new ones. An
    op that already has a registered space is refused unless ``replace=True``; registering a
    built-in op (e.g. ``"matmul"``) overrides its template.
    """
    check_registration("space for op", op, factory, SPACES, replace, TensorTuneError)
    name = op if name is None else name
    check_name("space", name, TensorTuneError)
    SPACES[op] = (name, factory)


def unregister_space(op: str) -> None:
    """Give ``op`` back its built-in space (a no-op when none was registered)."""
    SPACES.pop(op, None)


def design_space(wl: Workload, target: Target) -> DesignSpace:
    """The registered space for ``wl.op``, else its op-class template, else the generic one."""
    registered = SPACES.get(wl.op)
    if registered is None:
        return TEMPLATES.get(wl.op, generic_space)(wl, target)
    name, factory = registered
    ds = factory(wl, target)
    check_made("space for op", wl.op, ds, DesignSpace, TensorTuneError)
    ds.space.validate(ds.default)  # the reference every candidate is timed beside
    return dataclasses.replace(ds, name=name)
