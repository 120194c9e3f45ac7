"""Matrix products: matmul, batch_matmul and dense (a linear layer, weights stored [N, K])."""

from __future__ import annotations

from .. import te
from ..errors import DSLError
from ..te import Expr, Tensor, Var
from ._check import tensor_arg
from .elementwise import bias_add


def _check_contraction(op: str, a: Tensor, a_dim: int, b: Tensor, b_dim: int) -> int:
    if a.shape[a_dim] != b.shape[b_dim]:
        raise DSLError(
            f"{op}: reduction extents differ: '{a.name}' {a.shape} dim {a_dim} vs "
            f"'{b.name}' {b.shape} dim {b_dim}"
        )
    return a.shape[a_dim]


def matmul(a: Tensor, b: Tensor, name: str = "matmul") -> Tensor:
    """``C[i, j] = sum_k A[i, k] * B[k, j]`` for A[M, K], B[K, N]."""
    a, b = tensor_arg("matmul", "a", a, 2), tensor_arg("matmul", "b", b, 2)
    k = te.reduce_axis(_check_contraction("matmul", a, 1, b, 0), "k")

    def body(i: Var, j: Var) -> Expr:
        return te.sum(a[i, k] * b[k, j], axis=k)

    return te.compute((a.shape[0], b.shape[1]), body, name=name, tag="matmul")


def batch_matmul(a: Tensor, b: Tensor, name: str = "batch_matmul") -> Tensor:
    """``C[b, i, j] = sum_k A[b, i, k] * B[b, k, j]`` for A[B, M, K], B[B, K, N]."""
    a, b = tensor_arg("batch_matmul", "a", a, 3), tensor_arg("batch_matmul", "b", b, 3)
    if a.shape[0] != b.shape[0]:
        raise DSLError(f"batch_matmul: batch sizes differ: a {a.shape} vs b {b.shape}")
    k = te.reduce_axis(_check_contraction("batch_matmul", a, 2, b, 1), "k")

    def body(n: Var, i: Var, j: Var) -> Expr:
        return te.sum(a[n, i, k] * b[n, k, j], axis=k)

    shape = (a.shape[0], a.shape[1], b.shape[2])
    return te.compute(shape, body, name=name, tag="matmul")


def dense(x: Tensor, weight: Tensor, bias: Tensor | None = None, name: str = "dense") -> Tensor:
    """``Y[i, j] = sum_k X[i, k] * W[j, k] (+ bias[j])`` for X[M, K], W[N, K].

    The bias is a separate elementwise stage because a reduction must be a whole compute body.
    """
    x, weight = tensor_arg("dense", "x", x, 2), tensor_arg("dense", "weight", weight, 2)
    k = te.reduce_axis(_check_contraction("dense", x, 1, weight, 1), "k")

    def body(i: Var, j: Var) -> Expr:
        return te.sum(x[i, k] * weight[j, k], axis=k)

    out = te.compute((x.shape[0], weight.shape[0]), body, name=name, tag="matmul")
    return out if bias is None else bias_add(out, bias, axis=1, name=f"{name}_bias")
