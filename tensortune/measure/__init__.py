"""Measuring candidates: parallel builds, isolated correctness checks and C-side timing."""

from .builder import build_candidates
from .result import ERROR_KINDS, ErrorKind, MeasureResult
from .runner import Check, Runner, RunRequest
from .timer import calibrate_number, time_function, timer_library

__all__ = [
    "ERROR_KINDS",
    "Check",
    "ErrorKind",
    "MeasureResult",
    "RunRequest",
    "Runner",
    "build_candidates",
    "calibrate_number",
    "time_function",
    "timer_library",
]
