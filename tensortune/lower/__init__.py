"""Scheduled stages → one loop nest (bound inference, guards, buffers) → the lowering passes."""

from .lower import build_nest, lower, run_passes

__all__ = ["build_nest", "lower", "run_passes"]
