"""A NumPy reference evaluator for DSL programs: the ground truth every compiled kernel is checked
against.

Each compute is evaluated in one vectorised pass: an axis becomes an index array shaped to
broadcast along its own dimension (reduce axes get trailing dimensions), so an expression evaluates
to an array over the whole iteration space, and a reduction is a NumPy reduction over the trailing
dimensions.
Clarity beats speed here, but big iteration spaces are cut into blocks so memory stays bounded.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from ..dtype import FLOAT_DTYPES, TENSOR_DTYPES
from ..dtype import dtype as dtype_info
from ..errors import DSLError
from .expr import Binary, Call, Cast, Compare, Const, Expr, Reduce, Select, TensorRead, Var
from .graph import topological_order
from .tensor import Tensor

NUMPY_DTYPES = {name: dtype_info(name).numpy for name in TENSOR_DTYPES}
"""A view of ``tensortune.dtype`` kept for older importers; new code asks ``dtype(name).numpy``."""

# Largest iteration space (output elements x reduction extent) evaluated at once. Several
# temporaries of that size are alive together (index grids, gathered operands, the product), so
# 2^24 elements keeps peak memory to a few hundred MB even for float64.
CHUNK_ELEMENTS = 1 << 24

_BINARY = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "div": np.true_divide,
    "floordiv": np.floor_divide,  # floors like Python, also for negative operands
    "mod": np.mod,  # takes the sign of the divisor like Python
    "max": np.maximum,
    "min": np.minimum,
    "and": np.logical_and,
    "or": np.logical_or,
}
_COMPARE = {
    "lt": np.less,
    "le": np.less_equal,
    "gt": np.greater,
    "ge": np.greater_equal,
    "eq": np.equal,
    "ne": np.not_equal,
}


def _erf(x: np.ndarray) -> np.ndarray:
    """erf computed in float64, returned in the dtype of ``x``.

    NumPy has no erf: scipy's is used when installed (imported here, not at start-up), else
    math.erf, exact but slow."""
    try:
        from scipy.special import erf as erf64
    except ImportError:  # pragma: no cover - depends on the environment
        erf64 = np.vectorize(math.erf, otypes=[np.float64])
    x = np.asarray(x)
    return np.asarray(erf64(x.astype(np.float64))).astype(x.dtype)


_CALLS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "exp": np.exp,
    "exp_nonpos": np.exp,
    "log": np.log,
    "tanh": np.tanh,
    "erf": _erf,
    "sqrt": np.sqrt,
    "rsqrt": lambda x: np.reciprocal(np.sqrt(x)),
    "abs": np.abs,
    "sigmoid": lambda x: np.reciprocal(1 + np.exp(-x)),
    "neg": np.negative,
    "not": np.logical_not,
}


def evaluate(
    outputs: Tensor | Sequence[Tensor], inputs: Mapping[Tensor | str, np.ndarray]
) -> np.ndarray | tuple[np.ndarray, ...]:
    """Compute ``outputs`` from arrays for their placeholders (keyed by Tensor or by name).

    Returns one array for a single output tensor, else a tuple in the order of ``outputs``.
    """
    single = isinstance(outputs, Tensor)
    outs: tuple[Tensor, ...] = (outputs,) if isinstance(outputs, Tensor) else tuple(outputs)
    if not outs or not all(isinstance(t, Tensor) for t in outs):
        raise DSLError("evaluate: outputs must be a Tensor or a non-empty sequence of Tensors")
    order = topological_order(outs)
    values = _bind_inputs([t for t in order if t.is_placeholder], inputs)
    with np.errstate(all="ignore"):  # inf/nan follow IEEE as in C; warnings would only be noise
        for t in order:
            if not t.is_placeholder:
                values[t] = _evaluate_compute(t, values)
    results = tuple(values[t].copy() if t.is_placeholder else values[t] for t in outs)
    return results[0] if single else results


def _bind_inputs(
    placeholders: list[Tensor], inputs: Mapping[Tensor | str, np.ndarray]
) -> dict[Tensor, np.ndarray]:
    names = ", ".join(p.name for p in placeholders) or "(none)"
    by_name: dict[str, list[Tensor]] = {}
    for p in placeholders:
        by_name.setdefault(p.name, []).append(p)
    bound: dict[Tensor, np.ndarray] = {}
    for key, value in inputs.items():
        if isinstance(key, Tensor):
            if key not in by_name.get(key.name, ()):
                raise DSLError(
                    f"input tensor '{key.name}' is not a placeholder of this program; "
                    f"its placeholders are: {names}"
                )
            target = key
        elif isinstance(key, str):
            matches = by_name.get(key, [])
            if not matches:
                raise DSLError(
                    f"input '{key}' names no placeholder of this program; "
                    f"its placeholders are: {names}"
                )
            if len(matches) > 1:
                raise DSLError(
                    f"input name '{key}' is ambiguous: {len(matches)} placeholders share it; "
                    "key the inputs by Tensor instead"
                )
            target = matches[0]
        else:
            raise DSLError(f"input keys must be Tensors or names, got {type(key).__name__}")
        if target in bound:
            raise DSLError(f"input '{target.name}' is given twice (by Tensor and by name)")
        bound[target] = _check_array(target, value)
    missing = [p.name for p in placeholders if p not in bound]
    if missing:
        raise DSLError(
            f"missing input(s) {', '.join(missing)}: pass an array for every placeholder ({names})"
        )
    return bound


def _check_array(t: Tensor, value: object) -> np.ndarray:
    arr = np.asarray(value)
    if arr.shape != t.shape:
        raise DSLError(f"input '{t.name}' has shape {arr.shape}, the placeholder needs {t.shape}")
    want = np.dtype(dtype_info(t.dtype).numpy)
    if arr.dtype != want:
        raise DSLError(
            f"input '{t.name}' has dtype {arr.dtype}, the placeholder needs {want} "
            f"(convert with .astype(np.{want}))"
        )
    return arr


def _evaluate_compute(t: Tensor, values: dict[Tensor, np.ndarray]) -> np.ndarray:
    out: np.ndarray = np.empty(t.shape, dtype=dtype_info(t.dtype).numpy)
    reduce_size = math.prod(a.extent for a in t.reduce_axes)
    for block in _blocks(t.shape, reduce_size):
        out[block] = _evaluate_block(t, block, values)
    return out


def _blocks(shape: tuple[int, ...], reduce_size: int) -> Iterator[tuple[slice, ...]]:
    """Cut the output into blocks over leading axes so block size x reduce size stays bounded."""
    block = list(shape)
    size = math.prod(shape) * reduce_size
    for d, extent in enumerate(shape):
        if size <= CHUNK_ELEMENTS:
            break
        per_row = size // extent
        block[d] = max(1, CHUNK_ELEMENTS // per_row)
        size = per_row * block[d]
    starts = (range(0, n, b) for n, b in zip(shape, block, strict=True))
    for corner in itertools.product(*starts):
        yield tuple(slice(s, min(s + b, n)) for s, b, n in zip(corner, block, shape, strict=True))


def _evaluate_block(
    t: Tensor, block: tuple[slice, ...], values: dict[Tensor, np.ndarray]
) -> np.ndarray:
    reduce_axes = t.reduce_axes
    rank = t.ndim + len(reduce_axes)
    ranges = [np.arange(s.start, s.stop) for s in block]
    ranges += [np.arange(a.extent) for a in reduce_axes]
    env = {}
    for d, (axis, r) in enumerate(zip((*t.axes, *reduce_axes), ranges, strict=True)):
        shape = [1] * rank
        shape[d] = -1
        env[axis.var] = r.reshape(shape)
    space = tuple(len(r) for r in ranges)
    ev = _Evaluator(t, env, values)
    if t.body is None:
        raise DSLError(f"'{t.name}' is a placeholder: it has no body to evaluate")
    if not isinstance(t.body, Reduce):
        return np.broadcast_to(ev.eval(t.body, None), space)
    source = np.broadcast_to(ev.eval(t.body.source, None), space)
    axes = tuple(range(t.ndim, rank))
    if t.body.combiner == "sum":
        # Accumulate wide (float64 / int64) so the reference is more exact than any kernel.
        wide = np.float64 if t.dtype in FLOAT_DTYPES else np.int64
        return np.asarray(np.sum(source, axis=axes, dtype=wide))
    return np.asarray((np.max if t.body.combiner == "max" else np.min)(source, axis=axes))


class _Evaluator:
    """Evaluates the expressions of one compute over one block of its iteration space.

    ``guard`` is the boolean mask of elements where the expression's value is actually used (None:
    everywhere). Reads outside a tensor are allowed only where the guard is false, i.e. in the
    untaken branch of a select (padding), and are clipped into bounds there.
    """

    def __init__(self, t: Tensor, env: dict[Var, np.ndarray], values: dict[Tensor, np.ndarray]):
        self.tensor, self.env, self.values = t, env, values

    def eval(self, e: Expr, guard: np.ndarray | None) -> Any:
        """``e`` over the block: an array broadcasting to it, or a NumPy scalar (a constant)."""
        match e:
            case Const(value, dtype):
                return np.int64(value) if dtype == "int32" else dtype_info(dtype).numpy(value)
            case Var():
                if e not in self.env:
                    raise DSLError(
                        f"compute '{self.tensor.name}' uses variable '{e.name}', which is not "
                        "one of its axes"
                    )
                return self.env[e]
            case Binary(op, a, b):
                x = self.eval(a, guard)
                if op == "and":  # short-circuit like C: b only matters where a holds
                    return np.logical_and(x, self.eval(b, _mask(guard, x)))
                if op == "or":
                    return np.logical_or(x, self.eval(b, _mask(guard, np.logical_not(x))))
                return _BINARY[op](x, self.eval(b, guard))
            case Compare(op, a, b):
                return _COMPARE[op](self.eval(a, guard), self.eval(b, guard))
            case Select(cond, t, f):
                c = self.eval(cond, guard)
                return np.where(
                    c,
                    self.eval(t, _mask(guard, c)),
                    self.eval(f, _mask(guard, np.logical_not(c))),
                )
            case Call(func, args):
                return _CALLS[func](*(self.eval(a, guard) for a in args))
            case Cast(value, dtype):
                return np.asarray(self.eval(value, guard)).astype(dtype_info(dtype).numpy)
            case TensorRead(Tensor() as tensor, indices):
                return self._read(tensor, [self.eval(i, guard) for i in indices], guard)
            case Reduce():
                raise DSLError(f"compute '{self.tensor.name}': a reduction must be the whole body")
        raise DSLError(f"reference evaluator cannot handle {type(e).__name__} nodes")

    def _read(self, tensor: Tensor, indices: list, guard: np.ndarray | None) -> np.ndarray:
        arr = self.values[tensor]
        clipped = []
        for d, (ix, extent) in enumerate(zip(indices, arr.shape, strict=True)):
            ix = np.asarray(ix)
            outside = (ix < 0) | (ix >= extent)
            if outside.any():
                used = outside if guard is None else outside & guard
                if used.any():
                    bad = int(np.broadcast_to(ix, used.shape)[used].flat[0])
                    raise DSLError(
                        f"compute '{self.tensor.name}' reads '{tensor.name}' out of bounds: "
                        f"index {bad} on dimension {d} (extent {extent}) where the value is "
                        "used; guard the read with te.select"
                    )
                ix = np.clip(ix, 0, extent - 1)
            clipped.append(ix)
        return arr[tuple(clipped)]


def _mask(guard: np.ndarray | None, cond: np.ndarray) -> np.ndarray:
    return cond if guard is None else np.logical_and(guard, cond)


__all__ = ["CHUNK_ELEMENTS", "NUMPY_DTYPES", "evaluate"]
