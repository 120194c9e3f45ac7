"""Autotuning: the loop that searches a design space by measuring, and using its results."""

from .apply import compile_tuned
from .loop import TuneState, measure_configs, tune
from .result import TuneResult, gflops

__all__ = ["TuneResult", "TuneState", "compile_tuned", "gflops", "measure_configs", "tune"]
