"""Loop IR → readable C."""

from .c import generate_c

__all__ = ["generate_c"]
