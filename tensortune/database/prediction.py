"""A config chosen for a workload by the pretrained cost model, without measuring it.

A prediction is not a measurement: it has no time, so it must never rank against, count as, or
be exported with the measured ``TuningRecord``s. It therefore lives in its own table
(``predictions``) that no query of measurements reads, rather than as a kind of record every
one of those queries (ranking, trial counts, dedupe, export, import) would have to exclude.
One prediction is kept per (workload, target, version, space): a second compile of the same
workload reuses it, and a newer tensortune (with a newer model) chooses again.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from ..errors import DatabaseError
from .record import (
    MAX_JSON_CHARS,
    _check_name,
    _check_tree,
    _is_duration,
    canonical_json,
    current_version,
)

#: Name-like fields, checked as a record's are (workload and target must be non-empty).
NAME_FIELDS = ("workload", "target", "space", "version", "source", "model")


@dataclass(frozen=True, kw_only=True)
class Prediction:
    """The zero-shot choice for one workload on one target.

    ``source`` says where the chosen config came from ("default", "sample", "similar
    <workload>": the best measured config of a similar workload, "near ..." a step from one of
    those, or "default (<op class> below trust bar: ...)" where the model was not trusted to
    rank that op class), ``model`` which pretrained
    model ranked it, ``candidates`` how many configs it ranked and ``choice_seconds`` how long
    choosing took (featurising and ranking, no measurement).
    """

    workload: str
    target: str
    config: dict[str, Any]
    source: str
    model: str
    candidates: int
    choice_seconds: float
    space: str = ""
    version: str = field(default_factory=current_version)
    created_at: float = field(default_factory=time.time)

    def __post_init__(self) -> None:
        for name in NAME_FIELDS:
            _check_name(name, getattr(self, name), required=name in ("workload", "target"))
        _check_tree("config", self.config, printable=True)
        if not isinstance(self.config, dict):
            raise DatabaseError("prediction field 'config' must be a dict")
        try:
            text = canonical_json(self.config)
        except (TypeError, ValueError) as e:
            raise DatabaseError(f"prediction config is not JSON-serialisable: {e}") from e
        if len(text) > MAX_JSON_CHARS:
            raise DatabaseError(f"prediction config exceeds {MAX_JSON_CHARS} characters")
        object.__setattr__(self, "config", json.loads(text))
        count = self.candidates
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise DatabaseError(f"prediction 'candidates' must be an integer >= 1, got {count!r}")
        for name in ("choice_seconds", "created_at"):
            if not _is_duration(getattr(self, name)):
                raise DatabaseError(f"prediction field '{name}' must be a finite number >= 0")
            object.__setattr__(self, name, float(getattr(self, name)))

    @property
    def config_key(self) -> str:
        """Canonical JSON of the config, as a record's ``config_key``."""
        return canonical_json(self.config)
