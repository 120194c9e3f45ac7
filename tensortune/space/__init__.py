"""Search spaces: knobs, constraints and the configs they admit."""

from .space import Config, Constraint, Knob, SearchSpace

__all__ = ["Config", "Constraint", "Knob", "SearchSpace"]
