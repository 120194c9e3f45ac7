"""Workloads: the tensor programs tensortune tunes, named by compact spec strings.

A spec such as ``matmul:M=512,N=512,K=512`` is parsed into a ``Workload`` holding the DSL program
(built from ``tensortune.ops``) and a canonical name that re-serialises every parameter, defaults
included, in a fixed order, so equal programs always get the same key in the tuning database.

Specs come from users, scripts and shared databases, so parsing bounds what a spec may ask for
before anything is allocated: every dimension is at most ``MAX_DIM``, every tensor at most
``MAX_ELEMENTS`` elements, and the inputs and outputs together at most ``max_bytes()`` bytes
(16 GiB unless the ``TENSORTUNE_MAX_BYTES`` environment variable says otherwise, e.g. ``64G``).
Tensors of 2^31 elements or more are allowed; their kernels index in 64 bits.

Modules: ``spec`` (the grammar of a spec string), ``forms`` (the ops it may name and the program
each builds), ``limits`` (how large a workload may be).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from ..dtype import dtype as dtype_of
from ..errors import DSLError, SpecError
from ..memory import aligned
from ..te import Tensor
from ..te.reference import evaluate
from .forms import _OPS, EPILOGUES
from .limits import DEFAULT_MAX_BYTES, MAX_BYTES_ENV_VAR, MAX_ELEMENTS, _check_size, max_bytes
from .spec import MAX_DIM, Param, _Bad, _shown

SPECIAL_SPOTS = 6
"""Random elements of each float input `Workload.special_inputs` sets to NaN or an infinity."""
CONSTANTS_MARK = "|constants="
"""What joins a workload's constant inputs to its name (``Workload.with_constants``)."""


@dataclass(frozen=True)
class Workload:
    """A named tensor program with a fixed calling convention, made by ``workload(spec)``.

    Equal (and hashing equal) exactly when the canonical names match, so it keys the tuning
    database. Pass it to ``tt.compile`` or ``tt.tune``, or call its helpers to check a kernel.

    Attributes:
        name: the canonical spec, every key with its default filled in, e.g.
            ``matmul:M=64,N=64,K=64`` (``epilogue`` only when given).
        op: the canonical op (``depthwise_conv2d`` specs become ``conv2d``).
        params: ``(key, value)`` pairs in canonical order; ``param(key)`` reads one.
        inputs, outputs: the DSL placeholders and results, in the kernel's argument order.
        flops: the main op's useful arithmetic (a multiply-add is 2, any other elementwise
            operation or comparison 1); fused epilogues are not counted. GFLOP/s figures
            everywhere divide this by the time.
        constants: names of inputs that never change between calls (a model's weights), in
            input order; empty unless set by ``with_constants``. Its kernels compute what
            depends on them alone once, in ``<kernel>_prepack``, outside the timed call.

    Helpers: ``random_inputs(seed)`` and ``special_inputs(seed)`` make inputs in argument
    order, ``reference(inputs)`` computes the NumPy result a kernel must match.
    """

    name: str
    op: str
    params: tuple[tuple[str, Param], ...]
    inputs: tuple[Tensor, ...] = field(compare=False, repr=False)
    outputs: tuple[Tensor, ...] = field(compare=False, repr=False)
    flops: float = field(compare=False)
    constants: tuple[str, ...] = ()

    def __str__(self) -> str:
        return self.name

    def param(self, key: str) -> Param:
        """One parameter by key, e.g. ``w.param("M")``."""
        for k, v in self.params:
            if k == key:
                return v
        raise KeyError(f"workload {self.name} has no parameter {key!r}")

    @property
    def op_class(self) -> str:
        """The op, with depthwise convolutions (one group per channel) told apart from dense ones:
        their loops, and so their fast schedules and how well a cost model ranks them, differ."""
        groups = self.param("groups") if self.op == "conv2d" else 1
        return "depthwise_conv2d" if groups != 1 and groups == self.param("C") else self.op

    def with_constants(self, names: Iterable[str]) -> Workload:
        """This workload with the inputs in ``names`` constant. They join the name (the tuning
        database's key) after ``CONSTANTS_MARK``, so records timed with the weights packed on
        every call never mix with records timed without; no names gives the plain workload."""
        wanted = {names} if isinstance(names, str) else set(names)
        order = [t.name for t in self.inputs]
        unknown = sorted(wanted - set(order))
        if unknown:
            raise SpecError(
                f"{self.name}: constants {unknown} are not inputs (inputs: {', '.join(order)})"
            )
        constants = tuple(n for n in order if n in wanted)
        base = self.name
        if self.constants:
            base = base.removesuffix(CONSTANTS_MARK + ",".join(self.constants))
        if constants:
            base += CONSTANTS_MARK + ",".join(constants)
        return replace(self, name=base, constants=constants)

    @property
    def input_shapes(self) -> tuple[tuple[int, ...], ...]:
        return tuple(t.shape for t in self.inputs)

    @property
    def output_shapes(self) -> tuple[tuple[int, ...], ...]:
        return tuple(t.shape for t in self.outputs)

    def random_inputs(self, seed: int = 0) -> list[np.ndarray]:
        """Deterministic inputs in argument order: floats uniform in [-1, 1), ints in [-8, 8);
        each starts on a cache line (see `tensortune.memory`)."""
        rng = np.random.default_rng(seed)
        arrays: list[np.ndarray] = []
        for t in self.inputs:
            row = dtype_of(t.dtype)
            dtype = row.numpy
            if row.is_float:
                arrays.append(rng.uniform(-1.0, 1.0, t.shape).astype(dtype))
            elif t.dtype == "bool":
                arrays.append(rng.random(t.shape) < 0.5)
            else:
                arrays.append(rng.integers(-8, 8, t.shape).astype(dtype))
        return [aligned(a) for a in arrays]

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


def workload(spec: str) -> Workload:
    """Parse a spec string into a ``Workload``.

    Args:
        spec: ``op:key=value,...``, e.g. ``conv2d:C=64,H=56,W=56,K=64,R=3,S=3,pad=1``. Keys may
            come in any order and any case, with spaces around them. The forms (defaults in
            brackets; inputs in the order the kernel takes them):

            - ``matmul:M,N,K`` A[M,K], B[K,N]; ``dense:M,N,K`` X[M,K], W[N,K];
              ``batch_matmul:B,M,N,K`` A[B,M,K], B[B,K,N]
            - ``conv2d:C,H,W,K,R,S`` [N=1, stride=1, pad=0, dilation=1, groups=1,
              layout=NCHW|NHWC] X[N,C,H,W], W[K,C/groups,R,S] (NHWC: X[N,H,W,C], W[R,S,C/groups,K]);
              ``depthwise_conv2d:C,H,W,R,S`` is conv2d with K=groups=C
            - ``maxpool2d:C,H,W,R,S`` [N=1, stride=1, pad=0, layout=NCHW] X
            - ``softmax:rows,cols`` X; ``layernorm:rows,cols`` X, gamma, beta

            matmul, batch_matmul, dense and conv2d take ``epilogue=bias+relu|bias+gelu|relu``;
            a ``bias+`` epilogue adds a last input, one value per output channel or column.

            A name made by ``with_constants`` parses back: ``dense:M=1,N=1000,K=2048|constants=W``.

    Returns:
        The ``Workload``; its ``name`` is canonical (every key, defaults filled in, fixed
        order), so any spelling of the same program gets the same database key.

    Raises:
        SpecError: (also a ValueError) an unknown op or key, a missing or repeated key, a value
            that is not a positive integer (pad may be 0) or not among the choices, a window
            larger than its padded input, groups that do not divide the channels, or tensors
            too large: over ``MAX_DIM`` per dimension, ``MAX_ELEMENTS`` per tensor, or
            ``$TENSORTUNE_MAX_BYTES`` (default 16 GiB) together. The message names the bad
            part and shows the accepted form.
    """
    if not isinstance(spec, str):
        raise SpecError(f"a workload spec must be a string, got {type(spec).__name__}")
    spec, mark, constants = spec.partition(CONSTANTS_MARK)
    if mark:
        return workload(spec).with_constants(n.strip() for n in constants.split(","))
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
    "CONSTANTS_MARK",
    "DEFAULT_MAX_BYTES",
    "EPILOGUES",
    "MAX_BYTES_ENV_VAR",
    "MAX_DIM",
    "MAX_ELEMENTS",
    "Workload",
    "max_bytes",
    "workload",
]
