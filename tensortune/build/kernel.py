"""A compiled kernel as a Python callable that checks NumPy arrays against its signature.

ABI of a kernel library named `<name>`:

* ``<name>(<ctype>* restrict A, ...)`` takes one pointer per argument, inputs then
  outputs, each a dense C-contiguous buffer (its return type is the codegen's business);
* ``int <name>_packed(void** args)`` takes the same pointers as an array and returns 0 on
  success. Python and the C timing harness only ever call this entry point.

A kernel built with constant inputs also exports ``<name>_prepack`` (and its ``_packed`` form):
run once on the constants, it fills the buffers the kernel then takes as inputs.

A wrong pointer is a segfault, not an exception, so every array is checked before the call.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..dtype import TENSOR_DTYPES
from ..errors import BuildError, KernelArgumentError, TensorTuneError
from ..memory import empty

if TYPE_CHECKING:
    from ..target import Target

DTYPES = TENSOR_DTYPES
"""Element types a kernel argument may have: those a tensor may hold (`tensortune.dtype`)."""

ROLES = ("input", "output")


@dataclass(frozen=True)
class ArgSpec:
    """One kernel argument: a dense array of `shape` and `dtype`, read or written."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    role: str = "input"

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", tuple(int(extent) for extent in self.shape))
        if self.dtype not in DTYPES:
            raise TensorTuneError(
                f"argument {self.name!r}: unsupported dtype {self.dtype!r} "
                f"(expected one of {', '.join(DTYPES)})"
            )
        if self.role not in ROLES:
            raise TensorTuneError(
                f"argument {self.name!r}: role must be 'input' or 'output', got {self.role!r}"
            )
        if any(extent < 0 for extent in self.shape):
            raise TensorTuneError(f"argument {self.name!r}: negative extent in {self.shape}")

    def describe(self) -> str:
        """``(64, 32) float32``, the form used in argument error messages."""
        return f"{self.shape} {self.dtype}"


def pointer_array(arrays: Sequence[np.ndarray]) -> ctypes.Array[ctypes.c_void_p]:
    """The ``void**`` argument of a packed kernel; the caller keeps `arrays` alive."""
    return (ctypes.c_void_p * len(arrays))(*(array.ctypes.data for array in arrays))


class Kernel:
    """A loaded kernel library; call it with the input arrays, get the outputs back."""

    def __init__(
        self,
        library_path: str | Path,
        name: str,
        args: Sequence[ArgSpec],
        source: str = "",
        target: Target | None = None,
        prepack_args: Sequence[ArgSpec] | None = None,
    ):
        self.library_path = Path(library_path)
        self.name = name
        self.args = tuple(args)
        self.source = source
        self.target = target
        self.inputs = tuple(arg for arg in self.args if arg.role == "input")
        self.outputs = tuple(arg for arg in self.args if arg.role == "output")
        if [arg.role for arg in self.args] != ["input"] * len(self.inputs) + ["output"] * len(
            self.outputs
        ):
            raise TensorTuneError(f"kernel {name!r}: inputs must come before outputs in args")
        try:
            self._library = ctypes.CDLL(str(self.library_path))
        except OSError as exc:
            raise BuildError(f"cannot load kernel library {self.library_path}: {exc}") from exc
        try:
            self._packed = getattr(self._library, f"{name}_packed")
        except AttributeError as exc:
            raise BuildError(
                f"kernel library {self.library_path} does not export `{name}_packed`"
            ) from exc
        self._packed.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
        self._packed.restype = ctypes.c_int
        self.prepack: Kernel | None = None
        """``<name>_prepack`` as a kernel: the constant inputs in, the packed buffers out."""
        if prepack_args is not None:
            self.prepack = Kernel(library_path, f"{name}_prepack", prepack_args, source, target)

    @classmethod
    def compile(
        cls,
        source: str,
        name: str,
        args: Sequence[ArgSpec],
        target: Target,
        extra_flags: Sequence[str] = (),
    ) -> Kernel:
        """Compile `source` for `target` (through the cache) and load it."""
        from .compiler import compile_library

        return cls(compile_library(source, target, extra_flags), name, args, source, target)

    @property
    def packed_address(self) -> int:
        """Address of ``<name>_packed``, for the C timing harness."""
        address = ctypes.cast(self._packed, ctypes.c_void_p).value
        assert address is not None
        return address

    def __call__(
        self, *inputs: np.ndarray, out: np.ndarray | Sequence[np.ndarray] | None = None
    ) -> np.ndarray | tuple[np.ndarray, ...]:
        """Run the kernel; returns the output array (a tuple if there are several)."""
        self._check_count("input", self.inputs, inputs)
        for spec, array in zip(self.inputs, inputs, strict=True):
            self._check(spec, array)
        if out is None:
            outputs = tuple(empty(spec.shape, spec.dtype) for spec in self.outputs)
        else:
            outputs = (out,) if isinstance(out, np.ndarray) else tuple(out)
            self._check_count("output", self.outputs, outputs)
            for index, (spec, array) in enumerate(zip(self.outputs, outputs, strict=True)):
                self._check(spec, array)
                if not array.flags.writeable:
                    raise KernelArgumentError(f"{self._where(spec)}: output array is read-only")
                self._check_no_alias(spec, array, (*inputs, *outputs[:index]))
        status = self._packed(pointer_array((*inputs, *outputs)))
        if status != 0:
            raise TensorTuneError(f"kernel {self.name!r} returned error status {status}")
        return outputs[0] if len(outputs) == 1 else outputs

    def feeds(
        self,
        values: Mapping[str, np.ndarray],
        allocate: Callable[[ArgSpec], np.ndarray] | None = None,
    ) -> list[np.ndarray]:
        """This kernel's inputs, taken by name from `values` (its workload's inputs). For a kernel
        split at its constants the prepack runs here, once, into buffers from `allocate`
        (uninitialised and aligned by default), and the packed buffers take the weights' places:
        ``kernel(*kernel.feeds(values))`` then runs the per-call part alone."""
        produced: dict[str, np.ndarray] = {}
        if self.prepack is not None:
            make = allocate or (lambda spec: empty(spec.shape, spec.dtype))
            packed = tuple(make(spec) for spec in self.prepack.outputs)
            self.prepack(*(self.prepack._value(values, s) for s in self.prepack.inputs), out=packed)
            produced = {spec.name: a for spec, a in zip(self.prepack.outputs, packed, strict=True)}
        return [
            produced[spec.name] if spec.name in produced else self._value(values, spec)
            for spec in self.inputs
        ]

    def _value(self, values: Mapping[str, np.ndarray], spec: ArgSpec) -> np.ndarray:
        if spec.name not in values:
            known = ", ".join(values) or "none"
            raise KernelArgumentError(f"{self._where(spec)}: no input of that name among {known}")
        return values[spec.name]

    def __repr__(self) -> str:
        signature = ", ".join(f"{arg.name}: {arg.describe()}" for arg in self.args)
        return f"Kernel({self.name}({signature}), {self.library_path})"

    def _where(self, spec: ArgSpec) -> str:
        return f"argument {spec.name!r} of kernel {self.name!r}"

    def _check_count(self, role: str, specs: tuple[ArgSpec, ...], given: Sequence[object]) -> None:
        if len(given) != len(specs):
            names = ", ".join(spec.name for spec in specs)
            raise KernelArgumentError(
                f"kernel {self.name!r} takes {len(specs)} {role} array(s) ({names}), "
                f"got {len(given)}"
            )

    def _check(self, spec: ArgSpec, array: object) -> None:
        if not isinstance(array, np.ndarray):
            raise KernelArgumentError(
                f"{self._where(spec)}: expected a numpy array {spec.describe()}, "
                f"got {type(array).__name__}"
            )
        if array.shape != spec.shape or array.dtype != np.dtype(spec.dtype):
            raise KernelArgumentError(
                f"{self._where(spec)}: expected shape {spec.describe()}, "
                f"got {array.shape} {array.dtype}"
            )
        if not array.flags.c_contiguous:
            raise KernelArgumentError(
                f"{self._where(spec)}: array is not C-contiguous; pass np.ascontiguousarray(array)"
            )

    def _check_no_alias(self, spec: ArgSpec, array: np.ndarray, others: Sequence[object]) -> None:
        for other_spec, other in zip(self.args, others, strict=False):
            if isinstance(other, np.ndarray) and np.may_share_memory(array, other):
                raise KernelArgumentError(
                    f"{self._where(spec)}: output overlaps argument {other_spec.name!r}; "
                    "kernel pointers are restrict, pass a separate array"
                )
