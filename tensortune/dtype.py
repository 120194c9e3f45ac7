"""The one table of element types: DSL name, C type, NumPy type, size and vector form.

Every stage (DSL, reference, lowering, codegen, kernel arguments) reads its facts about a dtype from
here, so a new element type (bf16, int8) is one row, not five tables that drift apart. ``int64`` is
an index type only: the lowering picks it for loop variables and index arithmetic that pass 2**31.
``int8`` and ``uint8`` are a compiled model's input and output types only (its entry point
converts them); no tensor of a kernel holds them yet.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .errors import DSLError


@dataclass(frozen=True)
class DType:
    name: str
    c_type: str
    numpy: type
    bits: int  # the width of one vector lane: bool is one byte in memory but a 32-bit lane
    short: str  # suffix of the vector helpers' names (tt_vmax_f32x16)
    mask: str  # the integer dtype of a comparison mask on lanes of this type
    rank: int  # promotion order of binary operations: the higher rank wins
    is_float: bool
    tensor: bool = True  # may a kernel's tensor hold it (int64: indices; int8, uint8: model I/O)

    @property
    def size(self) -> int:
        """Bytes per element in memory (NumPy's itemsize)."""
        return np.dtype(self.numpy).itemsize


_ROWS = (
    DType("bool", "_Bool", np.bool_, 32, "i32", "int32", 0, False),
    DType("int32", "int32_t", np.int32, 32, "i32", "int32", 1, False),
    DType("int64", "int64_t", np.int64, 64, "i64", "int64", 2, False, tensor=False),
    DType("float32", "float", np.float32, 32, "f32", "int32", 3, True),
    DType("float64", "double", np.float64, 64, "f64", "int64", 4, True),
    DType("int8", "int8_t", np.int8, 8, "i8", "int8", 0, False, tensor=False),
    DType("uint8", "uint8_t", np.uint8, 8, "u8", "uint8", 0, False, tensor=False),
)
ALL: dict[str, DType] = {d.name: d for d in _ROWS}
TENSOR_DTYPES: tuple[str, ...] = tuple(d.name for d in _ROWS if d.tensor)
FLOAT_DTYPES: tuple[str, ...] = tuple(d.name for d in _ROWS if d.is_float)


def dtype(name: str | np.dtype) -> DType:
    """The row of a dtype given by DSL name or NumPy dtype; a clear error for anything else."""
    key = np.dtype(name).name if not isinstance(name, str) else name
    row = ALL.get(key)
    if row is None:
        raise DSLError(f"unsupported dtype {name!r}: expected one of {', '.join(TENSOR_DTYPES)}")
    return row
