"""Host arrays aligned to a cache line: what kernels are checked and timed on.

A kernel reads its operands with vector loads that assume nothing about alignment, but a load
that straddles two cache lines costs two: NumPy places a large array 16 bytes past a page, and
one GEMM (matmul 17x4096x1024, B read in column panels) ran 0.74 ms on such a B against 0.50-0.60
ms on a 64-byte aligned copy. A tuner that times candidates on whatever alignment its process
happened to give ranks them for that accident, and a re-timing in another process disagrees.
So inputs, outputs and packed buffers are placed on 64-byte boundaries wherever tensortune
allocates them, and callers get the same from `empty` and `aligned`. Arrays of a page or more
start on a page: where two operands sit relative to each other within a page decides which of
their rows share cache sets (4K aliasing: the same GEMM ran 0.50 or 0.59 ms by that alone), and
a fixed placement makes that the same in every process; NumPy, too, puts every large array at
one offset within its page.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

ALIGNMENT = 64
"""Bytes: one cache line, and one AVX-512 vector."""
PAGE = 4096
"""Arrays of at least this many bytes start on a page (see the module docstring)."""


def empty(shape: Sequence[int] | int, dtype: np.dtype | type | str) -> np.ndarray:
    """An uninitialised C-contiguous array whose data starts on an `ALIGNMENT` boundary, or on
    a `PAGE` if it fills one."""
    dt = np.dtype(dtype)
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
    boundary = PAGE if nbytes >= PAGE else ALIGNMENT
    raw = np.empty(nbytes + boundary, np.uint8)
    start = -raw.ctypes.data % boundary
    return raw[start : start + nbytes].view(dt).reshape(shape)


def is_aligned(array: np.ndarray) -> bool:
    """C-contiguous and placed as `empty` places it (an empty array is anywhere)."""
    boundary = PAGE if array.nbytes >= PAGE else ALIGNMENT
    return array.flags.c_contiguous and (array.size == 0 or array.ctypes.data % boundary == 0)


def aligned(array: np.ndarray) -> np.ndarray:
    """`array` itself if it is C-contiguous and aligned, else an aligned copy."""
    return array if is_aligned(array) else placed_copy(array)


def placed_copy(array: np.ndarray) -> np.ndarray:
    """A new aligned copy of `array`, on memory of its own: which physical pages an operand
    lands on (hence which of its rows share cache sets) moves a kernel's time by several percent
    from one allocation to the next, so a timing that is to hold for any placement takes its
    median over copies placed afresh (see `measure.paired`)."""
    out = empty(array.shape, array.dtype)
    out[...] = array
    return out
