"""Argument validation shared by the op families, so every op rejects bad arguments with a DSLError
that names the op, the argument and what it accepts."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeGuard

from ..errors import DSLError
from ..te import Tensor


def tensor_arg(op: str, arg: str, value: object, ndim: int | None = None) -> Tensor:
    """``value`` as a Tensor, of rank ``ndim`` when given."""
    if not isinstance(value, Tensor):
        raise DSLError(f"{op}: {arg} must be a Tensor, got {type(value).__name__}")
    if ndim is not None and value.ndim != ndim:
        raise DSLError(f"{op}: {arg} must be {ndim}-D, got shape {value.shape}")
    return value


def is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def int_arg(op: str, arg: str, value: object, minimum: int = 1) -> int:
    if not is_int(value) or value < minimum:
        raise DSLError(f"{op}: {arg} must be an int >= {minimum}, got {value!r}")
    return value


def int_tuple(op: str, arg: str, value: object, n: int, minimum: int) -> tuple[int, ...]:
    """An int repeated ``n`` times, or a sequence of exactly ``n`` ints, each >= ``minimum``."""
    values = (value,) * n if is_int(value) else value
    if not isinstance(values, Sequence) or len(values) != n:
        values = ()
    ints = tuple(v for v in values if is_int(v) and v >= minimum)
    if len(ints) != n:
        raise DSLError(
            f"{op}: {arg} must be an int >= {minimum} or a sequence of {n} such ints, got {value!r}"
        )
    return ints


def int_pair(op: str, arg: str, value: object, minimum: int) -> tuple[int, int]:
    """``int_tuple`` of two ints: an int for both, or a pair."""
    a, b = int_tuple(op, arg, value, 2, minimum)
    return a, b


def choice(op: str, arg: str, value: object, choices: Sequence[str]) -> str:
    if not isinstance(value, str) or value not in choices:
        raise DSLError(f"{op}: {arg} must be one of {', '.join(choices)}, got {value!r}")
    return value


def axis_arg(op: str, arg: str, value: object, ndim: int) -> int:
    """A possibly negative axis of an ``ndim``-D tensor, normalised to 0..ndim-1."""
    if not is_int(value) or not -ndim <= value < ndim:
        raise DSLError(f"{op}: {arg} must be an int in [{-ndim}, {ndim - 1}], got {value!r}")
    return value % ndim
