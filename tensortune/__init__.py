"""tensortune: a compiler and ML-guided autotuner for tensor programs on CPUs."""

from . import te
from .errors import BuildError, DSLError, ScheduleError, SpecError, TensorTuneError

__version__ = "0.1.0"

__all__ = ["BuildError", "DSLError", "ScheduleError", "SpecError", "TensorTuneError", "te"]
