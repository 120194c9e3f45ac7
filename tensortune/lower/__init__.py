"""Scheduled stages → one loop nest (bound inference, guards, buffers)."""

from .lower import lower

__all__ = ["lower"]
