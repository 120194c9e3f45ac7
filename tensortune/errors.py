"""One exception family, so callers can catch tensortune's own failures and nothing else."""

from __future__ import annotations


class TensorTuneError(Exception):
    """Base of every error tensortune raises on purpose."""


class DSLError(TensorTuneError):
    """A tensor expression is malformed (bad shape, dtype, index count...)."""


class SpecError(TensorTuneError, ValueError):
    """A workload spec string cannot be parsed."""


class ScheduleError(TensorTuneError):
    """A schedule primitive was asked for something illegal."""

    def __init__(self, primitive: str, loop: str | None, reason: str):
        self.primitive, self.loop, self.reason = primitive, loop, reason
        where = f" on loop '{loop}'" if loop else ""
        super().__init__(f"{primitive}{where}: {reason}")


class LoweringError(TensorTuneError):
    """A scheduled program cannot be turned into a loop nest or C."""


class BuildError(TensorTuneError):
    """The C compiler is missing or rejected the generated source."""


class KernelArgumentError(TensorTuneError, ValueError):
    """Arrays passed to a kernel do not match its signature."""


class DatabaseError(TensorTuneError):
    """The tuning database cannot be opened, read or written."""


class StrategyError(TensorTuneError, ValueError):
    """A search strategy was asked for by an unknown name or with options it does not take."""


class ConfigError(TensorTuneError, ValueError):
    """A config is not a point of its design space (unknown knob, value not among the knob's
    choices, constraint violated), or a stored record does not match the config it holds."""


class RecordWarning(UserWarning):
    """A tuning record failed validation and was skipped (a database is shared, untrusted data)."""


class MeasurementWarning(UserWarning):
    """A run measures less reliably than it should (candidates timed without a reference)."""


class MissingDependency(TensorTuneError, ImportError):
    """An optional package a feature needs is not installed (the message says how to get it)."""


class EnvironmentFailure(TensorTuneError):
    """The machine failed, not the candidate: no working C compiler, an unwritable or full kernel
    cache, a worker that cannot start. Tuning stops and records nothing against the config, so a
    rerun in a working environment measures it."""
