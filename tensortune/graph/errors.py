"""The graph stage's own error: a model that cannot be imported, inferred or compiled."""

from __future__ import annotations

from ..errors import TensorTuneError


class ModelError(TensorTuneError, ValueError):
    """A model file or graph tensortune cannot take: corrupt, unsupported op or attribute,
    symbolic dimensions without concrete shapes, or inputs that do not match at run time."""
