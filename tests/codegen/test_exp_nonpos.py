"""``exp_nonpos``, softmax's exp of ``x - max(x)``: NumPy's exp on [-104, 0] in the vector code
(one multiply by 2^n, denormals below -87.68 flushed to 0) and in the scalar code (expf), on every
vector ISA this CPU runs, with and without ``fast_math``; NaN stays NaN and exp(-inf) is 0."""

from __future__ import annotations

import numpy as np
import pytest

import tensortune.te as te
from tensortune.pipeline import compile
from tensortune.schedule import Schedule
from tensortune.target import Target, supported_isas

# below exp(-87.68) (8.4e-39) the vector code gives 0: an absolute error under float32's
# smallest normal, 2^-126
TINY = float(np.finfo(np.float32).tiny)


def grid(dtype: type = np.float32) -> np.ndarray:
    """[-104, 0] finely (both sides of every break: -87.68, the denormals, 0), the special
    values, and a scalar tail after the whole vectors."""
    points = [
        np.linspace(-104, 0, 4001),
        np.linspace(-88.5, -87.2, 301),
        [-np.inf, np.nan, 0.0, -0.0, -1e-30, -1e-7, -0.34657, -0.34658, -88.0, -87.6831],
    ]
    return np.concatenate(points).astype(dtype)


def schedule(out: te.Tensor, lanes: int, vector: bool, fast_math: bool) -> Schedule:
    sch = Schedule(out)
    if vector:
        _, inner = sch.split(out.name, out.axes[0].var.name, lanes)
        sch.vectorize(out.name, inner)
    if fast_math:
        sch.annotate("fast_math", True)
    return sch


@pytest.mark.parametrize("fast_math", [False, True], ids=["ieee", "fast_math"])
@pytest.mark.parametrize("vector", [False, True], ids=["scalar", "vector"])
@pytest.mark.parametrize("isa", supported_isas())
def test_exp_nonpos_is_numpy_exp_on_nonpositive_arguments(isa: str, vector: bool, fast_math: bool):
    target = Target.detect(num_threads=1, isa=isa)
    x = grid()
    X = te.placeholder(x.shape, name="X")
    out = te.compute(x.shape, lambda i: te.exp_nonpos(X[i]), name="e")
    kernel = compile(out, schedule(out, target.lanes("float32"), vector, fast_math), target)
    assert ("tt_exp_nonpos_" in kernel.source) == vector  # the vector helper, else expf
    got = kernel(x)
    want = np.exp(x)
    assert np.isnan(got[np.isnan(x)]).all() and not np.isnan(got[~np.isnan(x)]).any()
    assert (got[x == -np.inf] == 0).all() and (got[x == 0] == 1).all()
    # reassociation merges the two halves of ln 2 in n ln 2, as in tt_exp: 3 ulp off at n = -126
    # with FMA, 35 without (the product n ln 2 rounds)
    rtol = 5e-6 if fast_math else 3e-7
    np.testing.assert_allclose(got, want, rtol=rtol, atol=TINY, equal_nan=True)
    normal = want >= TINY
    assert normal.sum() > 3000
    np.testing.assert_allclose(got[normal], want[normal], rtol=rtol)


def test_exp_nonpos_of_float64_is_exp(target: Target):
    """float64 vectors have no exp_nonpos helper of their own: lane by lane, libm's exp."""
    x = grid(np.float64)
    X = te.placeholder(x.shape, name="X", dtype="float64")
    out = te.compute(x.shape, lambda i: te.exp_nonpos(X[i]), name="e")
    got = compile(out, schedule(out, 4, True, False), target)(x)
    np.testing.assert_allclose(got, np.exp(x), rtol=1e-15, atol=0, equal_nan=True)
