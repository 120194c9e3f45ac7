"""The tensor-expression DSL: describe *what* to compute, never how."""

from .expr import Expr, IterVar, Var, const
from .functions import (
    abs,
    cast,
    eq,
    erf,
    exp,
    log,
    max,
    min,
    ne,
    rsqrt,
    select,
    sigmoid,
    sqrt,
    tanh,
)
from .tensor import Tensor, compute, max_reduce, min_reduce, placeholder, reduce_axis, sum

__all__ = [
    "Expr",
    "IterVar",
    "Tensor",
    "Var",
    "abs",
    "cast",
    "compute",
    "const",
    "eq",
    "erf",
    "exp",
    "log",
    "max",
    "max_reduce",
    "min",
    "min_reduce",
    "ne",
    "placeholder",
    "reduce_axis",
    "rsqrt",
    "select",
    "sigmoid",
    "sqrt",
    "sum",
    "tanh",
]
