"""Item 4: NaN and infinities propagate through every kernel exactly as through NumPy.

Kernels used to drop them (``relu(NaN) = 0``, a max-pool window ``[NaN, 5]`` gave 5, vector exp
clamped its input, ``sigmoid(NaN) = tanh(NaN) = 1``) and the tuner never noticed, as it checked
candidates on inputs in [-1, 1) only. Behaviour tests run on this CPU, on every vector ISA it
supports (an AVX-512 host also runs the AVX2 and SSE code paths).
"""

from __future__ import annotations

import numpy as np
import pytest

from tensortune import ops, te
from tensortune.measure.builder import build_candidates
from tensortune.measure.runner import Check, Runner, RunRequest
from tensortune.pipeline import compile
from tensortune.schedule import Schedule
from tensortune.space.registry import design_space
from tensortune.target import Target, supported_isas
from tensortune.te.reference import evaluate
from tensortune.tuning.loop import measure_configs, special_check
from tensortune.workload import workload
from tests.measure import c_kernels
from tests.ops.test_compiled import CASES

ISAS = supported_isas()


def _x(*shape: int, name: str = "X") -> te.Tensor:
    return te.placeholder(shape, name=name)


OPS = {  # the operators tests/ops/test_compiled.py leaves to others
    **CASES,
    "bias_add": lambda: ops.bias_add(_x(2, 3, 4), _x(3, name="b"), axis=1),
    "sub": lambda: ops.sub(_x(4, 5), _x(4, 1, name="Y")),
    "div": lambda: ops.div(_x(4, 5), _x(5, name="Y")),
    "reduce_min": lambda: ops.reduce_min(_x(3, 4, 5), axis=(0, 1)),
}
SPECIAL = np.array([np.nan, np.inf, -np.inf], np.float32)
SPECS = (
    "matmul:M=9,N=17,K=7",
    "matmul:M=8,N=16,K=8,epilogue=bias+gelu",
    "batch_matmul:B=2,M=5,N=17,K=6,epilogue=relu",
    "dense:M=5,N=17,K=9,epilogue=bias+relu",
    "conv2d:C=4,H=9,W=9,K=8,R=3,S=3,pad=1",
    "conv2d:C=3,H=8,W=8,K=16,R=3,S=3,stride=2,pad=1,layout=NHWC,epilogue=bias+relu",
    "depthwise_conv2d:C=8,H=9,W=9,R=3,S=3,pad=1",
    "maxpool2d:C=4,H=12,W=12,R=3,S=3,stride=2,pad=1",
    "maxpool2d:C=16,H=9,W=9,R=2,S=2,layout=NHWC",
    "softmax:rows=6,cols=37",
    "layernorm:rows=6,cols=37",
)


def with_specials(shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    """Uniform [-1, 1) with NaN, +inf and -inf at the ends and at random elements."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, shape).astype(np.float32)
    flat = x.reshape(-1)
    spots = np.unique([0, flat.size - 1, *rng.integers(0, flat.size, 5)])
    flat[spots] = np.resize(SPECIAL, spots.size)
    return x


def assert_numpy_equal(got: np.ndarray, want: np.ndarray) -> None:
    """NaN where NumPy has NaN, the same infinities, finite values within tolerance."""
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want), "NaN positions differ")
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, equal_nan=True)


def vectorized(out: te.Tensor, target: Target) -> Schedule:
    """``out`` (1-D) with its loop vectorized at the target's float32 width."""
    sch = Schedule(out)
    _, inner = sch.split(out.name, out.axes[0].var.name, target.lanes("float32"))
    sch.vectorize(out.name, inner)
    return sch


# -- (a) every operator of the library, and every design space's default config --------------
@pytest.mark.parametrize("name", sorted(OPS))
def test_unscheduled_operator_propagates_nan_and_inf_like_numpy(name: str, target: Target):
    out = OPS[name]()
    kernel = compile(out, target=target)
    inputs = [with_specials(a.shape, seed) for seed, a in enumerate(kernel.inputs)]
    want = evaluate(out, {spec.name: x for spec, x in zip(kernel.inputs, inputs, strict=True)})
    assert np.isnan(want).any() or np.isinf(want).any()
    assert_numpy_equal(kernel(*inputs), want)


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("spec", SPECS)
def test_design_space_default_propagates_nan_and_inf_like_numpy(spec: str, isa: str):
    wl = workload(spec)
    target = Target.detect(num_threads=2, isa=isa)
    ds = design_space(wl, target)
    kernel = compile(wl.outputs[0], ds.schedule(ds.default), target)
    inputs = wl.special_inputs()
    want = wl.reference(inputs)
    assert np.isnan(want).any()
    assert_numpy_equal(kernel(*inputs), want)


@pytest.mark.parametrize("spec", ["softmax:rows=6,cols=37", "layernorm:rows=6,cols=37"])
def test_fast_math_keeps_nan_inf_and_denormals(spec: str, target: Target):
    """The norm space's ``fast_math`` knob must not assume finite math (-ffast-math made the
    softmax of a row with NaN or an infinity finite) nor, when the kernel is loaded, turn on
    flush-to-zero for the whole process (gcc links that in with -ffast-math)."""
    wl = workload(spec)
    ds = design_space(wl, target)
    config = {**ds.default, "fast_math": True, "unroll": 4}
    kernel = compile(wl.outputs[0], ds.schedule(config), target)
    assert np.multiply(np.float32(1e-40), np.float32(1)) != 0, "denormals flushed to zero"
    inputs = wl.special_inputs()
    assert_numpy_equal(kernel(*inputs), wl.reference(inputs))


# -- (b) the cases of the issue, on every ISA this CPU runs ------------------------------------
ELEMENTWISE = {
    "relu": (ops.relu, lambda x: np.maximum(x, np.float32(0))),
    "clip": (lambda x: ops.clip(x, -0.5, 0.5), lambda x: np.clip(x, -0.5, 0.5)),
    "exp": (lambda x: te.compute(x.shape, lambda i: te.exp(x[i]), name="e"), np.exp),
    "sigmoid": (ops.sigmoid, lambda x: 1 / (1 + np.exp(-x))),
    "tanh": (ops.tanh, np.tanh),
    "gelu": (ops.gelu, None),
}


@pytest.mark.parametrize("vector", [False, True], ids=["scalar", "vector"])
@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("name", sorted(ELEMENTWISE))
def test_elementwise_special_values(name: str, isa: str, vector: bool):
    op, numpy_op = ELEMENTWISE[name]
    target = Target.detect(num_threads=1, isa=isa)
    edges = [0.0, -0.0, 0.5, -3.0, 20.0, -20.0, 88.5, 88.8, -90.0, -104.0, -120.0, 1e30, -1e30]
    x = np.resize(np.array([*SPECIAL, *edges], np.float32), 4 * 16 + 3)  # a scalar tail too
    placeholder = te.placeholder(x.shape, name="X")
    out = op(placeholder)
    kernel = compile(out, vectorized(out, target) if vector else None, target)
    got = kernel(x)
    assert np.isnan(got[0]), f"{name}(NaN) = {got[0]}"
    want = evaluate(out, {placeholder: x})
    if numpy_op is not None:
        with np.errstate(all="ignore"):
            assert_numpy_equal(want, numpy_op(x))
    assert_numpy_equal(got, want)


def test_exp_of_nan_and_infinities_is_exact():
    target = Target.detect(num_threads=1)
    x = np.resize(SPECIAL, 4 * target.lanes("float32"))
    placeholder = te.placeholder(x.shape, name="X")
    out = te.compute(x.shape, lambda i: te.exp(placeholder[i]), name="e")
    got = compile(out, vectorized(out, target), target)(x)
    np.testing.assert_array_equal(got[:3], [np.nan, np.inf, 0.0])


@pytest.mark.parametrize("isa", ISAS)
def test_max_pool_window_with_nan_is_nan(isa: str):
    target = Target.detect(num_threads=1, isa=isa)
    wl = workload("maxpool2d:C=16,H=2,W=2,R=2,S=2,layout=NHWC")
    (x,) = wl.random_inputs()
    x[0, 0, 0, :] = np.nan  # the window of every channel is [NaN, 5, ...]
    x[0, 0, 1, :] = 5.0
    x[0, :, :, 3] = -np.inf  # channel 3 is all -inf
    ds = design_space(wl, target)
    for schedule in (None, ds.schedule(ds.default)):
        got = compile(wl.outputs[0], schedule, target)(x)
        assert np.isnan(np.delete(got, 3)).all() and got[0, 0, 0, 3] == -np.inf
        want = np.max(x, axis=(1, 2), keepdims=True)
        assert_numpy_equal(got, want)


def test_max_pool_padding_never_beats_minus_inf():
    """Padding is not an element: a window of -inf and padding has maximum -inf, as the NumPy
    maximum over the window's real elements (it used to be float32's lowest finite value)."""
    x = te.placeholder((1, 1, 3, 3), name="X")
    out = ops.max_pool2d(x, 3, 1, 1)
    data = np.full((1, 1, 3, 3), -np.inf, np.float32)
    data[0, 0, 2, 2] = np.nan
    want = evaluate(out, {x: data})
    padded = np.pad(data[0, 0], 1, constant_values=-np.inf)
    windows = np.lib.stride_tricks.sliding_window_view(padded, (3, 3)).max(axis=(2, 3))
    assert_numpy_equal(want[0, 0], windows)
    assert_numpy_equal(compile(out, target=Target.detect(num_threads=1))(data), want)


@pytest.mark.parametrize("isa", ISAS)
def test_softmax_rows_with_nan_and_infinities(isa: str):
    target = Target.detect(num_threads=2, isa=isa)
    wl = workload("softmax:rows=5,cols=40")
    (x,) = wl.random_inputs()
    x[0, 7] = np.nan
    x[1, 3] = np.inf
    x[2, [0, 39]] = -np.inf  # a row whose first element is -inf, which an online max mishandles
    x[3, :] = -np.inf
    with np.errstate(all="ignore"):
        e = np.exp(x - x.max(axis=1, keepdims=True))
        numpy_softmax = e / e.sum(axis=1, keepdims=True)
    assert_numpy_equal(wl.reference([x]), numpy_softmax)
    ds = design_space(wl, target)
    got = compile(wl.outputs[0], ds.schedule(ds.default), target)(x)
    assert np.isnan(got[:2]).all() and np.isnan(got[3]).all()
    assert got[2, 0] == 0 and got[2, 39] == 0
    assert_numpy_equal(got, numpy_softmax)


# -- (c) the tuner checks candidates on special values ----------------------------------------
DROPS_NAN = c_kernels.vector_kernel("oldmax", "C[i] = A[i] > B[i] ? A[i] : B[i];")
PROPAGATES_NAN = c_kernels.vector_kernel(
    "nanmax", "C[i] = A[i] != A[i] || A[i] > B[i] ? A[i] : B[i];"
)


def test_candidate_check_rejects_a_kernel_right_only_on_finite_inputs():
    a, b = c_kernels.inputs()
    special = (with_specials(a.shape, 1), with_specials(b.shape, 2))
    check = Check(special, (np.maximum(*special),), "inputs with NaN and +-inf")
    target = Target.from_string("generic threads=1")
    libraries = build_candidates([DROPS_NAN, PROPAGATES_NAN], target)
    requests = [
        RunRequest(lib, name, c_kernels.ARGS, (a, b), np.maximum(a, b), checks=checks)
        for lib, name in zip(libraries, ("oldmax", "nanmax"), strict=True)
        for checks in ((), (check,))
    ]
    with Runner(timeout=5, repeat=1, min_repeat_seconds=0.001, target=target) as runner:
        unchecked, checked, good_unchecked, good_checked = runner.run(requests)
    assert unchecked.ok  # right on finite inputs: the old check let it through
    assert checked.error_kind == "wrong_result"
    assert "NaN and +-inf" in checked.error_msg
    assert good_unchecked.ok and good_checked.ok, good_checked.error_msg


def test_tuner_sends_every_candidate_a_special_value_check(target: Target):
    wl = workload("softmax:rows=4,cols=33")
    check = special_check(wl)
    assert np.isnan(check.inputs[0]).any() and np.isinf(check.inputs[0]).any()
    assert_numpy_equal(check.reference[0], wl.reference(check.inputs))

    class Recorder:
        def run(self, requests, on_result):
            self.requests = list(requests)

    ds, recorder = design_space(wl, target), Recorder()
    inputs = wl.random_inputs()
    measure_configs(ds, [ds.default], target, recorder, inputs, wl.reference(inputs), print)
    assert [r.checks for r in recorder.requests] == [(check,)]
