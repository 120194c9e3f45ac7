"""Math functions, select, cast and constants of the DSL."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..dtype import FLOAT_DTYPES
from ..errors import DSLError
from .expr import (
    Call,
    Cast,
    Expr,
    Select,
    _pair,
    as_expr,
    binary,
    check_dtype,
    compare,
    promote,
)


def _float_call(func: str) -> Callable[[Any], Expr]:
    def fn(x: Any) -> Expr:
        x = as_expr(x, "float32")
        if x.dtype not in FLOAT_DTYPES:
            x = Cast(x, "float32")
        return Call(func, (x,), x.dtype)

    fn.__name__ = func
    fn.__doc__ = f"Elementwise {func}."
    return fn


exp = _float_call("exp")
exp_nonpos = _float_call("exp_nonpos")
exp_nonpos.__doc__ = """Elementwise exp of an argument known to be <= 0 (``x - max(x)``), which
vector code computes more cheaply; a positive argument gives an undefined result there."""
log = _float_call("log")
tanh = _float_call("tanh")
erf = _float_call("erf")
sqrt = _float_call("sqrt")
rsqrt = _float_call("rsqrt")
sigmoid = _float_call("sigmoid")


def abs(x: Any) -> Expr:
    x = as_expr(x)
    return Call("abs", (x,), x.dtype)


def max(a: Any, b: Any) -> Expr:
    return binary("max", a, b)


def min(a: Any, b: Any) -> Expr:
    return binary("min", a, b)


def eq(a: Any, b: Any) -> Expr:
    return compare("eq", a, b)


def ne(a: Any, b: Any) -> Expr:
    return compare("ne", a, b)


def select(cond: Any, true_value: Any, false_value: Any) -> Expr:
    cond = as_expr(cond)
    if cond.dtype != "bool":
        raise DSLError(f"select: condition must be boolean (a comparison), got {cond.dtype}")
    t, f = _pair(true_value, false_value)
    dtype = promote(t.dtype, f.dtype)
    t = t if t.dtype == dtype else cast(t, dtype)
    f = f if f.dtype == dtype else cast(f, dtype)
    return Select(cond, t, f, dtype)


def cast(x: Any, dtype: str) -> Expr:
    x = as_expr(x)
    check_dtype(dtype)
    return x if x.dtype == dtype else Cast(x, dtype)
