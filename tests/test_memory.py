"""Arrays tensortune allocates start on a cache line, whatever the allocator's mood."""

from __future__ import annotations

import numpy as np
import pytest

import tensortune as tt
from tensortune.measure.worker import _load_inputs, _poisoned
from tensortune.memory import ALIGNMENT, PAGE, aligned, empty, is_aligned


@pytest.mark.parametrize("shape", [(1,), (3, 5), (17, 4096), (0,), 7])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "bool", np.int8])
def test_empty_is_aligned_contiguous_and_shaped(shape, dtype):
    a = empty(shape, dtype)
    boundary = PAGE if a.nbytes >= PAGE else ALIGNMENT
    assert a.size == 0 or a.ctypes.data % boundary == 0
    assert a.flags.c_contiguous and a.flags.writeable and is_aligned(a)
    assert a.shape == ((shape,) if isinstance(shape, int) else shape) and a.dtype == np.dtype(dtype)


def test_aligned_copies_only_what_is_misaligned_or_strided():
    base = empty(1000, np.float32)
    base[:] = np.arange(1000)  # empty() leaves the memory as it was: NaNs never compare equal
    assert aligned(base) is base
    off = base[4:]  # 16 bytes past a cache line, as NumPy places large arrays
    assert not is_aligned(off)
    copy = aligned(off)
    assert is_aligned(copy) and np.array_equal(copy, off)
    strided = np.arange(64, dtype=np.float32).reshape(8, 8)[:, ::2]
    assert is_aligned(aligned(strided)) and np.array_equal(aligned(strided), strided)


def test_inputs_outputs_and_worker_buffers_are_aligned(tmp_path):
    wl = tt.workload("matmul:M=17,N=40,K=33")
    inputs = wl.random_inputs(0)
    assert all(is_aligned(a) for a in inputs)
    kernel = tt.compile(wl)
    assert is_aligned(kernel(*inputs))
    paths = []
    for i, a in enumerate(inputs):
        np.save(tmp_path / f"{i}.npy", a[1:] if a.ndim == 1 else a)
        paths.append(str(tmp_path / f"{i}.npy"))
    assert all(is_aligned(a) for a in _load_inputs(paths))
    out = _poisoned(kernel.outputs[0])
    assert is_aligned(out) and np.isnan(out).all()
