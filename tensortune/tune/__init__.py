"""Autotuning: the loop that searches a design space by measuring, and using its results."""

from .apply import compile_tuned
from .result import TuneResult
from .tuner import TuneState, tune

__all__ = ["TuneResult", "TuneState", "compile_tuned", "tune"]
