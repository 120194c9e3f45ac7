"""Search spaces (knobs, constraints), design spaces (a space plus the schedule each config
builds) and the registry that picks a workload's design space."""

from .registry import SPACES, SpaceFactory, design_space, register_space, unregister_space
from .space import Config, Constraint, Knob, SearchSpace
from .template import DesignSpace

__all__ = [
    "SPACES",
    "Config",
    "Constraint",
    "DesignSpace",
    "Knob",
    "SearchSpace",
    "SpaceFactory",
    "design_space",
    "register_space",
    "unregister_space",
]
