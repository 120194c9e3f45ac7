"""Knobs and constraints: the vocabulary of a search space.

A knob is one decision with a finite tuple of JSON-scalar choices (so every config is plain
data that a database can store); a constraint is a named predicate over a whole config. Each
knob also knows how to turn its choices into cost-model features (``encoding_table``).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

Value = int | str | bool
Config = dict[str, Any]
KnobKind = Literal["int", "categorical", "bool"]

_KINDS = ("int", "categorical", "bool")


def value_id(value: object) -> tuple[type, object]:
    """Hashable identity that keeps ``True`` and ``1`` apart (they are equal in Python)."""
    return (type(value), value)


@dataclass(frozen=True)
class Knob:
    """One tunable decision with a finite tuple of choices.

    ``kind`` and ``ordered`` are inferred when omitted: all-bool choices are ``"bool"``, all-int
    choices are ``"int"`` and ordered (so a tile size of 8 is "next to" 4 and 16, which makes
    mutation local), anything else is an unordered ``"categorical"``. Ordered int choices must be
    strictly increasing so that index neighbours are value neighbours.

    ``absent_means`` is for a knob added to a space that already has records: the choice that
    builds what configs recorded before the knob existed built, so they still apply (a config
    without the knob takes it; the stored trace then still has to match the rebuilt schedule).
    """

    name: str
    choices: tuple[Value, ...]
    kind: KnobKind | None = None
    ordered: bool | None = None
    absent_means: Value | None = None
    _ids: dict[tuple[type, object], int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        choices = tuple(self.choices)
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"knob name must be a non-empty string, got {self.name!r}")
        if not choices:
            raise ValueError(f"knob '{self.name}' has no choices")
        for c in choices:
            if not isinstance(c, int | str | bool):
                raise ValueError(
                    f"knob '{self.name}': choice {c!r} is not a JSON scalar (int, str or bool)"
                )
        ids = {value_id(c): i for i, c in enumerate(choices)}
        if len(ids) != len(choices):
            raise ValueError(f"knob '{self.name}' has duplicate choices {choices!r}")
        kind = self.kind or _infer_kind(choices)
        if kind not in _KINDS:
            raise ValueError(f"knob '{self.name}': kind must be one of {_KINDS}, got {kind!r}")
        if kind == "bool" and not all(isinstance(c, bool) for c in choices):
            raise ValueError(f"knob '{self.name}' is kind 'bool' but has non-bool choices")
        if kind == "int" and not all(_is_int(c) for c in choices):
            raise ValueError(f"knob '{self.name}' is kind 'int' but has non-int choices")
        ordered = (kind == "int") if self.ordered is None else bool(self.ordered)
        ints = [int(c) for c in choices] if kind == "int" else []
        if ordered and any(a >= b for a, b in itertools.pairwise(ints)):
            raise ValueError(f"ordered int knob '{self.name}' needs strictly increasing choices")
        if self.absent_means is not None and value_id(self.absent_means) not in ids:
            raise ValueError(
                f"knob '{self.name}': absent_means {self.absent_means!r} is not one of its "
                f"choices {choices!r}"
            )
        object.__setattr__(self, "choices", choices)
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "ordered", ordered)
        object.__setattr__(self, "_ids", ids)

    @property
    def int_choices(self) -> tuple[int, ...]:
        """The choices of an ``int`` knob, typed as such (a template computing its default)."""
        if self.kind != "int":
            raise ValueError(f"knob '{self.name}' is kind {self.kind!r}, not 'int'")
        return tuple(int(c) for c in self.choices)

    def lookup(self, value: object) -> int | None:
        """Index of ``value`` among the choices, or None (type-strict: ``True`` is not ``1``)."""
        try:
            return self._ids.get(value_id(value))
        except TypeError:  # unhashable value
            return None

    def to_dict(self) -> dict[str, Any]:
        """JSON-able description (inverse of ``Knob(**d)``)."""
        described: dict[str, Any] = {
            "name": self.name,
            "choices": list(self.choices),
            "kind": self.kind,
            "ordered": self.ordered,
        }
        if self.absent_means is not None:
            described["absent_means"] = self.absent_means
        return described


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _infer_kind(choices: tuple[Value, ...]) -> KnobKind:
    if all(isinstance(c, bool) for c in choices):
        return "bool"
    if all(_is_int(c) for c in choices):
        return "int"
    return "categorical"


@dataclass(frozen=True)
class Constraint:
    """A named validity predicate over a whole config, e.g. "register tile fits 32 registers".

    The name is what gets serialised (functions cannot be), so keep it stable.
    """

    name: str
    fn: Callable[[Config], bool]

    def __call__(self, config: Config) -> bool:
        return bool(self.fn(config))


def encoding_table(knob: Knob) -> tuple[list[str], np.ndarray]:
    """Feature names and a (n_choices, width) lookup table for one knob."""
    n = len(knob.choices)
    index = np.arange(n, dtype=np.float64)[:, None]
    if knob.kind == "bool":
        return [knob.name], np.array([[float(c)] for c in knob.choices])
    if knob.ordered and knob.kind == "int":
        values = np.array(knob.choices, dtype=np.float64)
        if (values > 0).all():
            return [f"{knob.name}.log2", f"{knob.name}.index"], np.hstack(
                [np.log2(values)[:, None], index]
            )
        signed = np.sign(values) * np.log2(1 + np.abs(values))
        return [f"{knob.name}.slog2", f"{knob.name}.index"], np.hstack([signed[:, None], index])
    if knob.ordered:
        return [f"{knob.name}.index"], index
    return [f"{knob.name}={c}" for c in knob.choices], np.eye(n)
