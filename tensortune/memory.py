"""Host arrays aligned to a cache line: what kernels are checked and timed on.

A kernel reads its operands with vector loads that assume nothing about alignment, but a load
that straddles two cache lines costs two: NumPy places a large array 16 bytes past a page, and
one GEMM (matmul 17x4096x1024, B read in column panels) ran 0.74 ms on such a B against 0.50-0.60
ms on a 64-byte aligned copy. A tuner that times candidates on whatever alignment its process
happened to give ranks them for that accident, and a re-timing in another process disagrees.
So inputs, outputs and packed buffers are placed on 64-byte boundaries wherever tensortune
allocates them, and callers get the same from `empty` and `aligned`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

ALIGNMENT = 64
"""Bytes: one cache line, and one AVX-512 vector."""


def empty(shape: Sequence[int] | int, dtype: np.dtype | type | str) -> np.ndarray:
    """An uninitialised C-contiguous array whose data starts on an `ALIGNMENT` boundary."""
    dt = np.dtype(dtype)
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    count = int(np.prod(shape, dtype=np.int64))
    raw = np.empty(count * dt.itemsize + ALIGNMENT, np.uint8)
    start = -raw.ctypes.data % ALIGNMENT
    return raw[start : start + count * dt.itemsize].view(dt).reshape(shape)


def is_aligned(array: np.ndarray) -> bool:
    return array.flags.c_contiguous and array.ctypes.data % ALIGNMENT == 0


def aligned(array: np.ndarray) -> np.ndarray:
    """`array` itself if it is C-contiguous and aligned, else an aligned copy."""
    if is_aligned(array):
        return array
    out = empty(array.shape, array.dtype)
    out[...] = array
    return out
