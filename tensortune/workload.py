"""Workloads: the tensor programs tensortune tunes, named by compact spec strings.

A spec such as ``matmul:M=512,N=512,K=512`` is parsed into a ``Workload`` holding the DSL program
(built from ``tensortune.ops``) and a canonical name that re-serialises every parameter, defaults
included, in a fixed order, so equal programs always get the same key in the tuning database.

Specs come from users, scripts and shared databases, so parsing bounds what a spec may ask for
before anything is allocated: every dimension is at most ``MAX_DIM``, every tensor at most
``MAX_ELEMENTS`` elements, and the inputs and outputs together at most ``max_bytes()`` bytes
(16 GiB unless the ``TENSORTUNE_MAX_BYTES`` environment variable says otherwise, e.g. ``64G``).
Tensors of 2^31 elements or more are allowed; their kernels index in 64 bits.
"""

from __future__ import annotations

import math
import os
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
SPECIAL_SPOTS = 6
"""Random elements of each float input `Workload.special_inputs` sets to NaN or an infinity."""

MAX_DIM = 2**31 - 1
"""Largest value of any integer key: one dimension's indices stay within a C ``int``."""
MAX_ELEMENTS = 2**40
"""Most elements one tensor may hold, whatever the memory limit: 64-bit offsets into it (and the
products computed on the way to them) stay far from overflow."""
DEFAULT_MAX_BYTES = 16 * 1024**3
"""Most bytes a workload's inputs and outputs may take together unless the environment says."""
MAX_BYTES_ENV_VAR = "TENSORTUNE_MAX_BYTES"
_UNITS = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}

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

    def special_inputs(self, seed: int = 0) -> list[np.ndarray]:
        """`random_inputs` with NaN, +inf and -inf planted in every float input, at its first and
        last element and a few random ones. NumPy defines the result there whatever the order of
        a sum or a max (NaN anywhere gives NaN, +inf with -inf gives NaN, one sign of infinity
        gives that infinity), so a kernel must reproduce it exactly."""
        rng = np.random.default_rng(seed + 1)
        arrays = self.random_inputs(seed)
        for array in arrays:
            if array.dtype.kind == "f":
                flat = array.reshape(-1)
                random_spots = rng.integers(0, flat.size, SPECIAL_SPOTS)
                spots = np.unique(np.concatenate(([0, flat.size - 1], random_spots)))
                flat[spots] = np.resize([np.nan, np.inf, -np.inf], spots.size)
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


def max_bytes() -> int:
    """The most bytes a workload's inputs and outputs may take together: ``$TENSORTUNE_MAX_BYTES``
    (bytes, or with a K, M, G or T suffix, binary) or 16 GiB."""
    text = os.environ.get(MAX_BYTES_ENV_VAR, "").strip()
    if not text:
        return DEFAULT_MAX_BYTES
    match = re.fullmatch(r"([0-9]{1,20})\s*([KMGT]?)(?:i?B)?", text, re.IGNORECASE)
    if match is None or int(match[1]) == 0:
        raise SpecError(
            f"{MAX_BYTES_ENV_VAR} must be a positive size such as 17179869184 or 16G, "
            f"got {_shown(text)}"
        )
    return int(match[1]) * _UNITS[match[2].upper()]


def _check_size(spec: str, tensors: Sequence[Tensor]) -> None:
    """Refuse a program whose tensors could not be allocated, before anything is."""
    limit = max_bytes()
    budget, env = _bytes(limit), f"{MAX_BYTES_ENV_VAR} sets it"
    too_large = f"workload {_shown(spec)} is too large"
    sizes = {}
    for t in tensors:
        count, itemsize = math.prod(t.shape), np.dtype(NUMPY_DTYPES[t.dtype]).itemsize
        most = min(MAX_ELEMENTS, limit // itemsize)
        if count > most:
            why = "the index limit" if most == MAX_ELEMENTS else f"{budget} of memory; {env}"
            raise SpecError(
                f"{too_large}: tensor {t.name} would hold {count:.1e} {t.dtype} elements "
                f"({_bytes(count * itemsize)}); the limit is {most:.1e} elements ({why}); "
                "use smaller dimensions"
            )
        sizes[t.name] = count * itemsize
    if sum(sizes.values()) > limit:
        each = ", ".join(f"{name} {_bytes(n)}" for name, n in sizes.items())
        raise SpecError(
            f"{too_large}: its tensors would take {_bytes(sum(sizes.values()))} together "
            f"({each}); the limit is {budget} ({env}); use smaller dimensions"
        )


def _bytes(n: float) -> str:
    """``n`` bytes for a person: 4.0 TiB."""
    units = ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB")
    k = 0
    while n >= 1024 and k < len(units) - 1:
        n, k = n / 1024, k + 1
    return f"{n:.1f} {units[k]}" if k else f"{n} B"


def _shown(text: str, limit: int = 80) -> str:
    """``text`` quoted for an error message, cut short so one line stays one line."""
    return repr(text if len(text) <= limit else text[:limit] + "...")


def workload(spec: str) -> Workload:
    """Parse a spec string such as ``conv2d:C=64,H=56,W=56,K=64,R=3,S=3,pad=1``.

    Keys may come in any order and any case, with spaces around them; every failure is one
    SpecError naming the bad part and showing the accepted form, or the tensor that would not fit
    in memory (see the module docstring for the limits). The canonical name lists every
    key with its default filled in; ``epilogue`` appears only when given.
    """
    if not isinstance(spec, str):
        raise SpecError(f"a workload spec must be a string, got {type(spec).__name__}")
    head, _, body = spec.partition(":")
    op = _OPS.get(head.strip().lower())
    if op is None:
        raise SpecError(
            f"bad workload spec {_shown(spec)}: unknown op {_shown(head.strip())}; "
            f"known ops: {', '.join(sorted(_OPS))}"
        )
    try:
        params = op.resolve(op.parse(body))
        inputs, outputs, flops = op.build(params)
    except (_Bad, DSLError) as err:
        raise SpecError(
            f"bad workload spec {_shown(spec)}: {err}; accepted form: {op.form}"
        ) from None
    _check_size(spec, inputs + outputs)
    canonical_op = op.alias_of or op.name
    items = tuple((k, v) for k, v in params.items() if v is not None)
    name = f"{canonical_op}:" + ",".join(f"{k}={v}" for k, v in items)
    return Workload(name, canonical_op, items, inputs, outputs, flops)


__all__ = [
    "DEFAULT_MAX_BYTES",
    "EPILOGUES",
    "MAX_BYTES_ENV_VAR",
    "MAX_DIM",
    "MAX_ELEMENTS",
    "Workload",
    "max_bytes",
    "workload",
]
