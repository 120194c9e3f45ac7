"""Which design space a workload gets."""

from __future__ import annotations

from ..target import Target
from ..workload import Workload
from .conv import conv_space
from .gemm import gemm_space
from .norm import norm_space
from .pool import pool_space
from .template import DesignSpace, generic_space

TEMPLATES = {
    "matmul": gemm_space,
    "batch_matmul": gemm_space,
    "dense": gemm_space,
    "conv2d": conv_space,
    "depthwise_conv2d": conv_space,
    "maxpool2d": pool_space,
    "softmax": norm_space,
    "layernorm": norm_space,
}


def design_space(wl: Workload, target: Target) -> DesignSpace:
    """The op-class template for ``wl``, or the generic space for any other program."""
    return TEMPLATES.get(wl.op, generic_space)(wl, target)
