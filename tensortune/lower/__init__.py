"""Scheduled stages → one loop nest (bound inference, guards, buffers) → the lowering passes."""

from .lower import build_nest, lower, lower_prepacked, run_passes
from .prepack import PREPACK_SUFFIX, Prepacked

__all__ = ["PREPACK_SUFFIX", "Prepacked", "build_nest", "lower", "lower_prepacked", "run_passes"]
