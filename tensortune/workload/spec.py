"""The grammar of spec strings: ``op:key=value,...`` with typed, bounded keys per op form."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from ..te import Tensor

MAX_DIM = 2**31 - 1
"""Largest value of any integer key: one dimension's indices stay within a C ``int``."""

Param = int | str
Params = dict[str, Param | None]
"""Parsed keys of one spec by name; None for an optional key that was not given."""


class _Bad(Exception):
    """A problem with one part of a spec; ``workload`` turns it into a SpecError."""


@dataclass(frozen=True)
class _Key:
    """One ``key=value`` of a spec: a positive (or ``minimum``-bounded) int, or a choice."""

    name: str
    default: Param | None = None
    choices: tuple[str, ...] = ()
    minimum: int = 1
    optional: bool = False  # may be absent without a default (epilogue)

    @property
    def required(self) -> bool:
        return self.default is None and not self.optional

    def parse(self, text: str) -> Param:
        if self.choices:
            by_case = {c.lower(): c for c in self.choices}
            if text.lower() not in by_case:
                raise _Bad(
                    f"{self.name} must be one of {', '.join(self.choices)}, got {_shown(text)}"
                )
            return by_case[text.lower()]
        if not re.fullmatch(r"[0-9]+", text):
            raise _Bad(f"{self.name} must be {self.kind} integer, got {_shown(text)}")
        digits = text.lstrip("0") or "0"
        # the length test first: int() refuses strings of thousands of digits
        if len(digits) > len(str(MAX_DIM)) or int(digits) > MAX_DIM:
            raise _Bad(f"{self.name} must be at most {MAX_DIM}, got {_shown(text)}")
        if int(digits) < self.minimum:
            raise _Bad(f"{self.name} must be {self.kind} integer, got {_shown(text)}")
        return int(digits)

    @property
    def kind(self) -> str:
        return "a positive" if self.minimum == 1 else "a non-negative"


Built = tuple[tuple[Tensor, ...], tuple[Tensor, ...], float]


@dataclass(frozen=True)
class _Op:
    """A spec form: its keys in canonical order and how to build the program.

    ``alias_of`` names the op whose canonical form this one is a shorthand for; ``resolve`` maps
    parsed params to that op's params (in its canonical key order).
    """

    name: str
    keys: tuple[_Key, ...]
    build: Callable[[Params], Built]
    alias_of: str | None = None
    resolve: Callable[[Params], Params] = dict

    @property
    def form(self) -> str:
        def show(k: _Key) -> str:
            return f"{k.name}={'|'.join(k.choices) if k.choices else '<int>'}"

        form = f"{self.name}:" + ",".join(show(k) for k in self.keys if k.required)
        form += "".join(f"[,{show(k)}]" for k in self.keys if not k.required)
        defaults = [f"{k.name}={k.default}" for k in self.keys if k.default is not None]
        return form + (f" (defaults: {', '.join(defaults)})" if defaults else "")

    def parse(self, body: str) -> Params:
        by_name = {k.name.lower(): k for k in self.keys}
        given: dict[str, Param] = {}
        for item in body.split(","):
            if not item.strip():
                continue  # tolerate a trailing comma or an empty body
            key, eq, value = (s.strip() for s in item.partition("="))
            if not eq:
                raise _Bad(f"{_shown(item.strip())} is not key=value")
            spec_key = by_name.get(key.lower())
            if spec_key is None:
                raise _Bad(f"unknown key {_shown(key)}")
            if spec_key.name in given:
                raise _Bad(f"{spec_key.name} is given twice")
            given[spec_key.name] = spec_key.parse(value)
        missing = [k.name for k in self.keys if k.required and k.name not in given]
        if missing:
            raise _Bad(f"missing {', '.join(missing)}")
        return {k.name: given.get(k.name, k.default) for k in self.keys}


def _shown(text: str, limit: int = 80) -> str:
    """``text`` quoted for an error message, cut short so one line stays one line."""
    return repr(text if len(text) <= limit else text[:limit] + "...")
