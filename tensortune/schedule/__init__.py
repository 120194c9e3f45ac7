"""Schedule primitives and their replayable trace."""

from .schedule import Schedule

__all__ = ["Schedule"]
