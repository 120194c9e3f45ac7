"""Workloads: the tensor programs tensortune tunes, named by compact spec strings.

A spec such as ``matmul:M=512,N=512,K=512`` is parsed into a ``Workload`` holding the DSL program
(built from ``tensortune.ops``) and a canonical name that re-serialises every parameter, defaults
included, in a fixed order, so equal programs always get the same key in the tuning database.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from . import ops, te
from .errors import DSLError, SpecError
from .te import Tensor
from .te.expr import FLOAT_DTYPES
from .te.reference import NUMPY_DTYPES, evaluate

EPILOGUES = ("bias+relu", "bias+gelu", "relu")

Param = int | str


@dataclass(frozen=True)
class Workload:
    """A named tensor program; equal (and hashing equal) exactly when the canonical names match.

    ``flops`` counts the main op's useful arithmetic (a multiply-add is 2, any other elementwise
    operation or comparison 1); fused epilogues are not counted.
    """

    name: str
    op: str
    params: tuple[tuple[str, Param], ...]
    inputs: tuple[Tensor, ...] = field(compare=False, repr=False)
    outputs: tuple[Tensor, ...] = field(compare=False, repr=False)
    flops: float = field(compare=False)

    def __str__(self) -> str:
        return self.name

    def param(self, key: str) -> Param:
        """One parameter by key, e.g. ``w.param("M")``."""
        for k, v in self.params:
            if k == key:
                return v
        raise KeyError(f"workload {self.name} has no parameter {key!r}")

    @property
    def input_shapes(self) -> tuple[tuple[int, ...], ...]:
        return tuple(t.shape for t in self.inputs)

    @property
    def output_shapes(self) -> tuple[tuple[int, ...], ...]:
        return tuple(t.shape for t in self.outputs)

    def random_inputs(self, seed: int = 0) -> list[np.ndarray]:
        """Deterministic inputs in argument order: floats uniform in [-1, 1), ints in [-8, 8)."""
        rng = np.random.default_rng(seed)
        arrays = []
        for t in self.inputs:
            dtype = NUMPY_DTYPES[t.dtype]
            if t.dtype in FLOAT_DTYPES:
                arrays.append(rng.uniform(-1.0, 1.0, t.shape).astype(dtype))
            elif t.dtype == "bool":
                arrays.append(rng.random(t.shape) < 0.5)
            else:
                arrays.append(rng.integers(-8, 8, t.shape).astype(dtype))
        return arrays

    def reference(
        self, inputs: Sequence[np.ndarray] | Mapping[Tensor | str, np.ndarray]
    ) -> np.ndarray | tuple[np.ndarray, ...]:
        """The NumPy reference result: one array, or a tuple when there are several outputs."""
        if not isinstance(inputs, Mapping):
            inputs = list(inputs)
            if len(inputs) != len(self.inputs):
                names = ", ".join(t.name for t in self.inputs)
                raise DSLError(
                    f"{self.name} takes {len(self.inputs)} inputs ({names}), got {len(inputs)}"
                )
            inputs = dict(zip(self.inputs, inputs, strict=True))
        outputs = self.outputs[0] if len(self.outputs) == 1 else self.outputs
        return evaluate(outputs, inputs)


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
                raise _Bad(f"{self.name} must be one of {', '.join(self.choices)}, got {text!r}")
            return by_case[text.lower()]
        if not re.fullmatch(r"[0-9]+", text) or int(text) < self.minimum:
            kind = "a positive" if self.minimum == 1 else "a non-negative"
            raise _Bad(f"{self.name} must be {kind} integer, got {text!r}")
        return int(text)


Built = tuple[tuple[Tensor, ...], tuple[Tensor, ...], float]


@dataclass(frozen=True)
class _Op:
    """A spec form: its keys in canonical order and how to build the program.

    ``alias_of`` names the op whose canonical form this one is a shorthand for; ``resolve`` maps
    parsed params to that op's params (in its canonical key order).
    """

    name: str
    keys: tuple[_Key, ...]
    build: Callable[[dict[str, Param]], Built]
    alias_of: str | None = None
    resolve: Callable[[dict[str, Param]], dict[str, Param]] = dict

    @property
    def form(self) -> str:
        def show(k: _Key) -> str:
            return f"{k.name}={'|'.join(k.choices) if k.choices else '<int>'}"

        form = f"{self.name}:" + ",".join(show(k) for k in self.keys if k.required)
        form += "".join(f"[,{show(k)}]" for k in self.keys if not k.required)
        defaults = [f"{k.name}={k.default}" for k in self.keys if k.default is not None]
        return form + (f" (defaults: {', '.join(defaults)})" if defaults else "")

    def parse(self, body: str) -> dict[str, Param]:
        by_name = {k.name.lower(): k for k in self.keys}
        given: dict[str, Param] = {}
        for item in body.split(","):
            if not item.strip():
                continue  # tolerate a trailing comma or an empty body
            key, eq, value = (s.strip() for s in item.partition("="))
            if not eq:
                raise _Bad(f"{item.strip()!r} is not key=value")
            spec_key = by_name.get(key.lower())
            if spec_key is None:
                raise _Bad(f"unknown key {key!r}")
            if spec_key.name in given:
                raise _Bad(f"{spec_key.name} is given twice")
            given[spec_key.name] = spec_key.parse(value)
        missing = [k.name for k in self.keys if k.required and k.name not in given]
        if missing:
            raise _Bad(f"missing {', '.join(missing)}")
        return {k.name: given.get(k.name, k.default) for k in self.keys}


def _ints(*names: str) -> tuple[_Key, ...]:
    return tuple(_Key(n) for n in names)


_BATCH = _Key("N", 1)
_STRIDE, _PAD, _DILATION = _Key("stride", 1), _Key("pad", 0, minimum=0), _Key("dilation", 1)
_LAYOUT = _Key("layout", "NCHW", choices=("NCHW", "NHWC"))
_EPILOGUE = _Key("epilogue", choices=EPILOGUES, optional=True)


def _epilogue(
    inputs: tuple[Tensor, ...], out: Tensor, kind: Param | None, axis: int
) -> tuple[tuple[Tensor, ...], tuple[Tensor, ...]]:
    """Append the optional bias (a trailing input, one value per ``axis`` entry) and activation."""
    if kind is None:
        return inputs, (out,)
    if str(kind).startswith("bias+"):
        bias = te.placeholder((out.shape[axis],), out.dtype, "bias")
        out = ops.bias_add(out, bias, axis=axis)
        inputs = (*inputs, bias)
    out = ops.relu(out) if str(kind).endswith("relu") else ops.gelu(out)
    return inputs, (out,)


def _matmul(p: dict) -> Built:
    a = te.placeholder((p["M"], p["K"]), name="A")
    b = te.placeholder((p["K"], p["N"]), name="B")
    return (*_epilogue((a, b), ops.matmul(a, b), p["epilogue"], 1), 2.0 * p["M"] * p["N"] * p["K"])


def _batch_matmul(p: dict) -> Built:
    a = te.placeholder((p["B"], p["M"], p["K"]), name="A")
    b = te.placeholder((p["B"], p["K"], p["N"]), name="B")
    out = ops.batch_matmul(a, b)
    flops = 2.0 * p["B"] * p["M"] * p["N"] * p["K"]
    return (*_epilogue((a, b), out, p["epilogue"], 2), flops)


def _dense(p: dict) -> Built:
    x = te.placeholder((p["M"], p["K"]), name="X")
    w = te.placeholder((p["N"], p["K"]), name="W")
    return (*_epilogue((x, w), ops.dense(x, w), p["epilogue"], 1), 2.0 * p["M"] * p["N"] * p["K"])


def _check_output_size(p: dict) -> None:
    """Reject windows that do not fit, in the spec's own terms."""
    for extent, window, out in (("H", "R", "P"), ("W", "S", "Q")):
        dilated = p.get("dilation", 1) * (p[window] - 1) + 1
        size = (p[extent] + 2 * p["pad"] - dilated) // p["stride"] + 1
        if size <= 0:
            raise _Bad(
                f"output {out} would be {size}: {extent} + 2*pad = {p[extent] + 2 * p['pad']} is "
                f"smaller than the {'dilated ' if dilated != p[window] else ''}window {dilated}"
            )


def _conv2d(p: dict) -> Built:
    n, c, k, g = p["N"], p["C"], p["K"], p["groups"]
    if c % g or k % g:
        raise _Bad(f"groups={g} must divide both C={c} and K={k}")
    _check_output_size(p)
    if p["layout"] == "NCHW":
        x = te.placeholder((n, c, p["H"], p["W"]), name="X")
        w = te.placeholder((k, c // g, p["R"], p["S"]), name="W")
    else:
        x = te.placeholder((n, p["H"], p["W"], c), name="X")
        w = te.placeholder((p["R"], p["S"], c // g, k), name="W")
    out = ops.conv2d(x, w, p["stride"], p["pad"], p["dilation"], g, p["layout"])
    # every output element is a dot product of length (C/groups)*R*S
    flops = 2.0 * math.prod(out.shape) * (c // g) * p["R"] * p["S"]
    channel_axis = 1 if p["layout"] == "NCHW" else 3
    return (*_epilogue((x, w), out, p["epilogue"], channel_axis), flops)


def _maxpool2d(p: dict) -> Built:
    if p["pad"] >= min(p["R"], p["S"]):
        raise _Bad(f"pad={p['pad']} must be smaller than the window R={p['R']}, S={p['S']}")
    _check_output_size(p)
    n, c, h, w = p["N"], p["C"], p["H"], p["W"]
    x = te.placeholder((n, c, h, w) if p["layout"] == "NCHW" else (n, h, w, c), name="X")
    out = ops.max_pool2d(x, (p["R"], p["S"]), p["stride"], p["pad"], p["layout"])
    return (x,), (out,), float(math.prod(out.shape) * p["R"] * p["S"])


def _softmax(p: dict) -> Built:
    x = te.placeholder((p["rows"], p["cols"]), name="X")
    # max, subtract, exp, sum, divide: 5 operations per element
    return (x,), (ops.softmax(x),), 5.0 * p["rows"] * p["cols"]


def _layernorm(p: dict) -> Built:
    x = te.placeholder((p["rows"], p["cols"]), name="X")
    gamma = te.placeholder((p["cols"],), name="gamma")
    beta = te.placeholder((p["cols"],), name="beta")
    # mean 2 (scale, add), variance 4 (sub, square, scale, add), normalise 4 per element
    return (x, gamma, beta), (ops.layer_norm(x, gamma, beta, 1e-5),), 10.0 * p["rows"] * p["cols"]


def _depthwise(p: dict[str, Param]) -> dict[str, Param]:
    """A depthwise spec as the conv2d params it abbreviates (one group per channel)."""
    full = {**p, "K": p["C"], "groups": p["C"]}
    return {k.name: full[k.name] for k in _CONV_KEYS}


_CONV_KEYS = (
    _BATCH,
    *_ints("C", "H", "W", "K", "R", "S"),
    _STRIDE,
    _PAD,
    _DILATION,
    _Key("groups", 1),
    _LAYOUT,
    _EPILOGUE,
)
_OPS = {
    op.name: op
    for op in (
        _Op("matmul", (*_ints("M", "N", "K"), _EPILOGUE), _matmul),
        _Op("batch_matmul", (*_ints("B", "M", "N", "K"), _EPILOGUE), _batch_matmul),
        _Op("dense", (*_ints("M", "N", "K"), _EPILOGUE), _dense),
        _Op("conv2d", _CONV_KEYS, _conv2d),
        _Op(
            "depthwise_conv2d",
            (_BATCH, *_ints("C", "H", "W", "R", "S"), _STRIDE, _PAD, _DILATION, _LAYOUT, _EPILOGUE),
            _conv2d,
            alias_of="conv2d",
            resolve=_depthwise,
        ),
        _Op(
            "maxpool2d",
            (_BATCH, *_ints("C", "H", "W", "R", "S"), _STRIDE, _PAD, _LAYOUT),
            _maxpool2d,
        ),
        _Op("softmax", _ints("rows", "cols"), _softmax),
        _Op("layernorm", _ints("rows", "cols"), _layernorm),
    )
}


def workload(spec: str) -> Workload:
    """Parse a spec string such as ``conv2d:C=64,H=56,W=56,K=64,R=3,S=3,pad=1``.

    Keys may come in any order and any case, with spaces around them; every failure is one
    SpecError naming the bad part and showing the accepted form. The canonical name lists every
    key with its default filled in; ``epilogue`` appears only when given.
    """
    if not isinstance(spec, str):
        raise SpecError(f"a workload spec must be a string, got {type(spec).__name__}")
    head, _, body = spec.partition(":")
    op = _OPS.get(head.strip().lower())
    if op is None:
        raise SpecError(
            f"bad workload spec {spec!r}: unknown op {head.strip()!r}; "
            f"known ops: {', '.join(sorted(_OPS))}"
        )
    try:
        params = op.resolve(op.parse(body))
        inputs, outputs, flops = op.build(params)
    except (_Bad, DSLError) as err:
        raise SpecError(f"bad workload spec {spec!r}: {err}; accepted form: {op.form}") from None
    canonical_op = op.alias_of or op.name
    items = tuple((k, v) for k, v in params.items() if v is not None)
    name = f"{canonical_op}:" + ",".join(f"{k}={v}" for k, v in items)
    return Workload(name, canonical_op, items, inputs, outputs, flops)


__all__ = ["EPILOGUES", "Workload", "workload"]
