"""The NumPy reference evaluator: every expression node, padding guards, accuracy, chunking and
input validation."""

import math
import tracemalloc

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tensortune import te
from tensortune.errors import DSLError
from tensortune.te import reference
from tensortune.te.reference import evaluate

RNG = np.random.default_rng(0)


def rand(*shape: int) -> np.ndarray:
    return RNG.uniform(-1, 1, shape).astype(np.float32)


def matmul_program(m: int, n: int, k: int):
    a = te.placeholder((m, k), name="A")
    b = te.placeholder((k, n), name="B")
    r = te.reduce_axis(k, "k")
    c = te.compute((m, n), lambda i, j: te.sum(a[i, r] * b[r, j], axis=r), name="C")
    return a, b, c


def test_matmul_matches_numpy_and_stays_float32():
    a, b, c = matmul_program(5, 3, 7)
    x, y = rand(5, 7), rand(7, 3)
    out = evaluate(c, {a: x, b: y})
    assert out.dtype == np.float32 and out.shape == (5, 3)
    np.testing.assert_allclose(out, x.astype(np.float64) @ y, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize(
    ("op", "expected"),
    [
        (lambda x, y: x + y, lambda x, y: x + y),
        (lambda x, y: x - y, lambda x, y: x - y),
        (lambda x, y: x * y, lambda x, y: x * y),
        (lambda x, y: x / y, lambda x, y: x / y),
        (lambda x, y: x // y, np.floor_divide),
        (te.max, np.maximum),
        (te.min, np.minimum),
    ],
)
def test_float_binary_ops(op, expected):
    a, b = te.placeholder((4, 5), name="a"), te.placeholder((4, 5), name="b")
    c = te.compute((4, 5), lambda i, j: op(a[i, j], b[i, j]))
    x, y = rand(4, 5), rand(4, 5) + 2
    out = evaluate(c, {a: x, b: y})
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, expected(x, y), rtol=1e-6)


@pytest.mark.parametrize("op", [lambda p, q: p // q, lambda p, q: p % q], ids=["floordiv", "mod"])
def test_integer_floordiv_and_mod_follow_python_semantics(op):
    # q = j - 3 is zero at j == 3, which the select keeps out
    t = te.compute((11, 7), lambda i, j: te.select(j == 3, 0, op(i - 5, j - 3)), name="t")
    out = evaluate(t, {})
    assert out.dtype == np.int32
    want = [[0 if j == 3 else op(i - 5, j - 3) for j in range(7)] for i in range(11)]
    np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize(
    ("sym", "expected"),
    [
        (lambda x: x < 0.1, lambda x: x < 0.1),
        (lambda x: x <= 0.1, lambda x: x <= 0.1),
        (lambda x: x > 0.1, lambda x: x > 0.1),
        (lambda x: x >= 0.1, lambda x: x >= 0.1),
        (lambda x: te.eq(x, 0.5), lambda x: x == 0.5),
        (lambda x: te.ne(x, 0.5), lambda x: x != 0.5),
        (lambda x: (x > 0) & (x < 0.5), lambda x: (x > 0) & (x < 0.5)),
        (lambda x: (x < -0.5) | (x > 0.5), lambda x: (x < -0.5) | (x > 0.5)),
        (lambda x: ~(x > 0), lambda x: ~(x > 0)),
    ],
)
def test_comparisons_and_logic_give_bool(sym, expected):
    a = te.placeholder((33,), name="a")
    c = te.compute((33,), lambda i: sym(a[i]))
    x = np.linspace(-1, 1, 33, dtype=np.float32)
    x[3] = 0.5
    out = evaluate(c, {a: x})
    assert out.dtype == np.bool_
    np.testing.assert_array_equal(out, expected(x))


@pytest.mark.parametrize(
    ("func", "expected"),
    [
        (te.exp, np.exp),
        (lambda x: te.exp_nonpos(-x), lambda x: np.exp(-x)),
        (te.log, lambda x: np.log(x)),
        (te.tanh, np.tanh),
        (te.erf, np.vectorize(math.erf)),
        (te.sqrt, np.sqrt),
        (te.rsqrt, lambda x: 1 / np.sqrt(x)),
        (te.abs, np.abs),
        (te.sigmoid, lambda x: 1 / (1 + np.exp(-x))),
        (lambda x: -x, np.negative),
    ],
)
def test_math_calls_stay_float32(func, expected):
    a = te.placeholder((50,), name="a")
    c = te.compute((50,), lambda i: func(a[i]))
    x = np.linspace(0.05, 3, 50, dtype=np.float32)
    out = evaluate(c, {a: x})
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, expected(x.astype(np.float64)), rtol=2e-6, atol=1e-7)


def test_sigmoid_saturates_without_warnings():
    a = te.placeholder((3,), name="a")
    c = te.compute((3,), lambda i: te.sigmoid(a[i]))
    with np.errstate(all="raise"):
        out = evaluate(c, {a: np.array([-200, 0, 200], dtype=np.float32)})
    np.testing.assert_array_equal(out, [0, 0.5, 1])


def test_casts_and_constants():
    a = te.placeholder((6,), name="a")
    to_int = te.compute((6,), lambda i: te.cast(a[i] * 3.0, "int32"), name="to_int")
    to_f64 = te.compute((6,), lambda i: te.cast(to_int[i], "float64") + 0.25, name="to_f64")
    ones = te.compute((2, 3), lambda i, j: te.const(1.5), name="ones")
    x = np.array([-1.9, -0.5, 0, 0.4, 0.7, 1], dtype=np.float32)
    ints, f64, c = evaluate([to_int, to_f64, ones], {a: x})
    np.testing.assert_array_equal(ints, np.trunc(x * 3).astype(np.int32))  # C truncation
    assert ints.dtype == np.int32 and f64.dtype == np.float64
    np.testing.assert_array_equal(f64, ints + 0.25)
    np.testing.assert_array_equal(c, np.full((2, 3), 1.5, np.float32))


def test_integer_tensors_and_index_arithmetic():
    a = te.placeholder((4, 6), "int32", name="a")
    flip = te.compute((6, 4), lambda i, j: a[3 - j, (i + 2) % 6] * 2 + i, name="flip")
    x = RNG.integers(-50, 50, (4, 6)).astype(np.int32)
    want = [[x[3 - j, (i + 2) % 6] * 2 + i for j in range(4)] for i in range(6)]
    out = evaluate(flip, {a: x})
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("combiner", ["sum", "max", "min"])
def test_reductions_over_several_axes(combiner):
    a = te.placeholder((3, 4, 5), name="a")
    r1, r2 = te.reduce_axis(3, "r1"), te.reduce_axis(5, "r2")
    reducer = {"sum": te.sum, "max": te.max_reduce, "min": te.min_reduce}[combiner]
    c = te.compute((4,), lambda j: reducer(a[r1, j, r2], axis=(r1, r2)))
    x = rand(3, 4, 5)
    np.testing.assert_allclose(
        evaluate(c, {a: x}), getattr(np, combiner)(x, axis=(0, 2)), rtol=1e-6
    )


def test_reduction_of_source_independent_of_reduce_axis():
    r = te.reduce_axis(7, "r")
    c = te.compute((2,), lambda i: te.sum(te.cast(i, "float32") + 1.0, axis=r))
    np.testing.assert_array_equal(evaluate(c, {}), [7, 14])


def test_int_sum():
    a = te.placeholder((5, 4), "int32", name="a")
    r = te.reduce_axis(5, "r")
    c = te.compute((4,), lambda j: te.sum(a[r, j], axis=r))
    x = RNG.integers(-9, 9, (5, 4)).astype(np.int32)
    out = evaluate(c, {a: x})
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out, x.sum(0))


def test_float32_sums_accumulate_in_float64():
    n = 1000
    a = te.placeholder((n + 1,), name="a")
    r = te.reduce_axis(n + 1, "r")
    c = te.compute((1,), lambda i: te.sum(a[r], axis=r))
    x = np.ones(n + 1, np.float32)
    x[0] = 2.0**24  # float32 accumulation would drop every +1
    assert evaluate(c, {a: x})[0] == 2.0**24 + n


def test_select_padding_never_reads_out_of_bounds():
    a = te.placeholder((3, 4), name="a")
    padded = te.compute(
        (5, 8),
        lambda i, j: te.select((i >= 1) & (i < 4) & (j >= 2) & (j < 6), a[i - 1, j - 2], -7.0),
        name="padded",
    )
    x = rand(3, 4)
    np.testing.assert_array_equal(
        evaluate(padded, {a: x}), np.pad(x, ((1, 1), (2, 2)), constant_values=-7)
    )


def test_logical_and_guards_its_right_operand_like_c():
    a = te.placeholder((4,), name="a")
    c = te.compute((6,), lambda i: te.select((i < 4) & (a[i] > 0), 1.0, 0.0))
    x = np.array([1, -1, 2, -2], np.float32)
    np.testing.assert_array_equal(evaluate(c, {a: x}), [1, 0, 1, 0, 0, 0])


def test_unguarded_out_of_bounds_read_is_an_error():
    a = te.placeholder((4,), name="a")
    c = te.compute((5,), lambda i: a[i] * 2.0, name="shifted")
    with pytest.raises(DSLError, match=r"'shifted' reads 'a' out of bounds: index 4 on dim"):
        evaluate(c, {a: rand(4)})
    # the wrong branch of a select is no guard
    d = te.compute((5,), lambda i: te.select(i < 4, 0.0, a[i]), name="wrong")
    with pytest.raises(DSLError, match="out of bounds"):
        evaluate(d, {a: rand(4)})


def test_variable_that_is_not_an_axis_is_an_error():
    a = te.placeholder((4,), name="a")
    stray = te.Var("z")
    c = te.compute((4,), lambda i: a[stray], name="c")
    with pytest.raises(DSLError, match="variable 'z'"):
        evaluate(c, {a: rand(4)})


def test_multistage_program_multiple_outputs_and_names():
    a, b, c = matmul_program(4, 4, 4)
    d = te.compute((4, 4), lambda i, j: te.max(c[i, j], 0.0), name="relu")
    x, y = rand(4, 4), rand(4, 4)
    got_c, got_d = evaluate([c, d], {"A": x, "B": y})
    np.testing.assert_allclose(got_c, x @ y, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(got_d, np.maximum(got_c, 0))
    assert isinstance(evaluate((d,), {a: x, b: y}), tuple)


def test_placeholder_output_is_a_copy():
    a = te.placeholder((3,), name="a")
    x = rand(3)
    out = evaluate(a, {a: x})
    out[0] = 99
    assert x[0] != 99


def test_rank0_tensors():
    a = te.placeholder((3, 2), name="a")
    r1, r2 = te.reduce_axis(3, "r1"), te.reduce_axis(2, "r2")
    total = te.compute((), lambda: te.sum(a[r1, r2], axis=(r1, r2)), name="total")
    scaled = te.compute((3, 2), lambda i, j: a[i, j] / total[()], name="scaled")
    x = rand(3, 2) + 2
    t, s = evaluate([total, scaled], {a: x})
    assert t.shape == ()
    np.testing.assert_allclose(s, x / x.sum(), rtol=1e-6)


def test_deep_chains_do_not_recurse():
    def increment(t: te.Tensor, n: int) -> te.Tensor:
        return te.compute((3,), lambda i: t[i] + 1.0, name=f"s{n}")

    a = te.placeholder((3,), name="a")
    t = a
    for n in range(300):
        t = increment(t, n)
    np.testing.assert_array_equal(evaluate(t, {a: np.zeros(3, np.float32)}), [300] * 3)


def test_chunked_evaluation_matches_unchunked(monkeypatch):
    a, b, c = matmul_program(9, 5, 7)
    d = te.compute((9, 5), lambda i, j: c[i, j] * 2.0, name="d")
    x, y = rand(9, 7), rand(7, 5)
    whole = evaluate(d, {a: x, b: y})
    monkeypatch.setattr(reference, "CHUNK_ELEMENTS", 3)
    np.testing.assert_array_equal(evaluate(d, {a: x, b: y}), whole)


def test_big_convolution_is_chunked_in_bounded_memory():
    """1x64x56x56 conv 3x3 with 64 channels: a 115M-element iteration space in one block."""
    x_t = te.placeholder((1, 64, 56, 56), name="X")
    w_t = te.placeholder((64, 64, 3, 3), name="W")
    pad = te.compute(
        (1, 64, 58, 58),
        lambda n, c, h, w: te.select(
            (h >= 1) & (h < 57) & (w >= 1) & (w < 57), x_t[n, c, h - 1, w - 1], 0.0
        ),
        name="pad",
    )
    rc, rr, rs = te.reduce_axis(64, "c"), te.reduce_axis(3, "r"), te.reduce_axis(3, "s")
    y_t = te.compute(
        (1, 64, 56, 56),
        lambda n, k, p, q: te.sum(
            pad[n, rc, p + rr.var, q + rs.var] * w_t[k, rc, rr, rs], axis=(rc, rr, rs)
        ),
        name="conv",
    )
    x, w = rand(1, 64, 56, 56), rand(64, 64, 3, 3)
    tracemalloc.start()
    try:
        y = evaluate(y_t, {x_t: x, w_t: w})
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 200e6, f"peak {peak / 1e6:.0f} MB"  # unchunked: ~470 MB
    # spot-check a few outputs against an explicit dot product
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    for k, p, q in ((0, 0, 0), (63, 55, 55), (17, 30, 2)):
        want = np.sum(xp[0, :, p : p + 3, q : q + 3] * w[k])
        assert y[0, k, p, q] == pytest.approx(want, rel=1e-5, abs=1e-4)


class TestInputValidation:
    def setup_method(self):
        self.a, self.b, self.c = matmul_program(2, 3, 4)

    def test_missing_input(self):
        with pytest.raises(DSLError, match=r"missing input\(s\) B"):
            evaluate(self.c, {self.a: rand(2, 4)})

    def test_wrong_shape(self):
        with pytest.raises(DSLError, match=r"'A' has shape \(4, 2\).*needs \(2, 4\)"):
            evaluate(self.c, {self.a: rand(4, 2), self.b: rand(4, 3)})

    def test_wrong_dtype(self):
        with pytest.raises(DSLError, match=r"'B' has dtype float64.*float32"):
            evaluate(self.c, {self.a: rand(2, 4), self.b: np.zeros((4, 3))})

    def test_unknown_name_and_foreign_tensor(self):
        with pytest.raises(DSLError, match=r"'Z' names no placeholder.*A, B"):
            evaluate(self.c, {"A": rand(2, 4), "B": rand(4, 3), "Z": rand(1)})
        other = te.placeholder((2, 4), name="A")
        with pytest.raises(DSLError, match="not a placeholder of this program"):
            evaluate(self.c, {other: rand(2, 4), "B": rand(4, 3)})

    def test_ambiguous_name(self):
        x1, x2 = te.placeholder((2,), name="X"), te.placeholder((2,), name="X")
        s = te.compute((2,), lambda i: x1[i] + x2[i])
        with pytest.raises(DSLError, match="ambiguous"):
            evaluate(s, {"X": rand(2)})
        np.testing.assert_array_equal(
            evaluate(s, {x1: np.ones(2, np.float32), x2: np.ones(2, np.float32)}), [2, 2]
        )

    def test_given_twice(self):
        with pytest.raises(DSLError, match="given twice"):
            evaluate(self.c, {self.a: rand(2, 4), "A": rand(2, 4), "B": rand(4, 3)})

    def test_bad_outputs(self):
        with pytest.raises(DSLError, match="outputs must be"):
            evaluate([], {})


@settings(max_examples=40, deadline=None)
@given(
    m=st.sampled_from([1, 2, 3, 5, 7, 13]),
    n=st.sampled_from([1, 2, 3, 5, 7, 13]),
    k=st.sampled_from([1, 2, 3, 5, 7, 13]),
    seed=st.integers(0, 2**16),
)
def test_property_matmul(m, n, k, seed):
    rng = np.random.default_rng(seed)
    a, b, c = matmul_program(m, n, k)
    x = rng.uniform(-1, 1, (m, k)).astype(np.float32)
    y = rng.uniform(-1, 1, (k, n)).astype(np.float32)
    np.testing.assert_allclose(
        evaluate(c, {a: x, b: y}), x.astype(np.float64) @ y, rtol=1e-5, atol=1e-6
    )


def test_axes_take_part_in_arithmetic_like_their_variables():
    from tensortune import te as dsl

    x = dsl.placeholder((10,), name="X")
    r = dsl.reduce_axis(3, "r")
    y = dsl.compute((4,), lambda p: dsl.sum(x[p * 2 + r], axis=r), name="Y")
    data = np.arange(10, dtype=np.float32)
    got = evaluate(y, {"X": data})
    np.testing.assert_allclose(got, [data[2 * p : 2 * p + 3].sum() for p in range(4)])
