"""Normalisation ops over the last axis, written as several stages (reductions cannot share a body
with elementwise math), which is exactly what a scheduler needs to fuse or not."""

from __future__ import annotations

from .. import te
from ..errors import DSLError
from ..te import Expr, Tensor, Var
from ..te.expr import FLOAT_DTYPES
from ._check import tensor_arg


def softmax(x: Tensor, name: str = "softmax") -> Tensor:
    """Numerically stable softmax over the last axis.

    Stages (all tag "softmax"): ``{name}_max`` (max-reduce), ``{name}_exp`` (exp(x - max)),
    ``{name}_sum`` (sum-reduce) and ``{name}`` (exp / sum).
    """
    x = tensor_arg("softmax", "x", x)
    if x.ndim == 0:
        raise DSLError("softmax: x must have at least one dimension")
    rows, cols = x.shape[:-1], x.shape[-1]
    k_max, k_sum = te.reduce_axis(cols, "k"), te.reduce_axis(cols, "k")

    # the index tuples are named: mypy reads ``x[(*i, k)]`` as 3.11-only syntax (it is not)
    def row_max(*i: Var) -> Expr:
        at = (*i, k_max.var)
        return te.max_reduce(x[at], axis=k_max)

    mx = te.compute(rows, row_max, name=f"{name}_max", tag="softmax")
    ex = te.compute(
        x.shape, lambda *i: te.exp_nonpos(x[i] - mx[i[:-1]]), name=f"{name}_exp", tag="softmax"
    )

    def row_sum(*i: Var) -> Expr:
        at = (*i, k_sum.var)
        return te.sum(ex[at], axis=k_sum)

    total = te.compute(rows, row_sum, name=f"{name}_sum", tag="softmax")
    return te.compute(x.shape, lambda *i: ex[i] / total[i[:-1]], name=name, tag="softmax")


def layer_norm(
    x: Tensor, gamma: Tensor, beta: Tensor, eps: float = 1e-5, name: str = "layer_norm"
) -> Tensor:
    """``(x - mean) / sqrt(var + eps) * gamma + beta`` over the last axis (biased variance).

    Stages (all tag "layernorm"): ``{name}_mean``, ``{name}_var`` (two-pass, so no catastrophic
    cancellation) and ``{name}``.
    """
    x = tensor_arg("layer_norm", "x", x)
    if x.ndim == 0:
        raise DSLError("layer_norm: x must have at least one dimension")
    if x.dtype not in FLOAT_DTYPES:
        raise DSLError(f"layer_norm: x must be float32 or float64, got {x.dtype}")
    cols = x.shape[-1]
    for arg, t in (("gamma", gamma), ("beta", beta)):
        tensor_arg("layer_norm", arg, t, 1)
        if t.shape[0] != cols:
            raise DSLError(f"layer_norm: {arg} must have shape ({cols},), got {t.shape}")
    if not isinstance(eps, int | float) or isinstance(eps, bool) or not eps >= 0:
        raise DSLError(f"layer_norm: eps must be a number >= 0, got {eps!r}")
    rows = x.shape[:-1]
    inv_n = te.const(1.0 / cols, x.dtype)
    k_mean, k_var = te.reduce_axis(cols, "k"), te.reduce_axis(cols, "k")

    def row_mean(*i: Var) -> Expr:
        at = (*i, k_mean.var)
        return te.sum(x[at] * inv_n, axis=k_mean)

    mean = te.compute(rows, row_mean, name=f"{name}_mean", tag="layernorm")

    def row_var(*i: Var) -> Expr:
        at = (*i, k_var.var)
        d = x[at] - mean[i]
        return te.sum(d * d * inv_n, axis=k_var)

    var = te.compute(rows, row_var, name=f"{name}_var", tag="layernorm")

    def normalize(*i: Var) -> Expr:
        row = i[:-1]
        return (x[i] - mean[row]) * te.rsqrt(var[row] + eps) * gamma[i[-1]] + beta[i[-1]]

    return te.compute(x.shape, normalize, name=name, tag="layernorm", attrs={"eps": eps})
