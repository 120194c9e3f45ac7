import numpy as np
import pytest

from tensortune.build.kernel import Kernel, pointer_array
from tensortune.errors import EnvironmentFailure, TensorTuneError
from tensortune.measure.timer import (
    calibrate_number,
    min_repeat_from_env,
    time_function,
    timer_library,
)
from tensortune.target import Target

from . import c_kernels


@pytest.fixture(scope="module")
def target() -> Target:
    return Target.from_string("generic threads=1")


@pytest.fixture(scope="module")
def timer(target: Target):
    return timer_library(target)


class Prepared:
    """A kernel with its arrays and their pointer array (which points into the arrays)."""

    def __init__(self, source: str, name: str, target: Target):
        self.kernel = Kernel.compile(source, name, c_kernels.ARGS, target)
        a, b = c_kernels.inputs()
        self.arrays = [a, b, np.zeros_like(a)]
        self.pointers = pointer_array(self.arrays)
        self.address = self.kernel.packed_address


def test_times_every_repeat_and_really_calls(target: Target, timer):
    k = Prepared(c_kernels.GOOD, "vadd", target)
    seconds = time_function(k.address, k.pointers, number=10, repeat=4, timer=timer)
    assert len(seconds) == 4
    assert all(0 < s < 0.1 for s in seconds)
    np.testing.assert_array_equal(k.arrays[2], k.arrays[0] + k.arrays[1])


def test_sleeping_kernel_is_timed_per_call(target: Target, timer):
    k = Prepared(c_kernels.SLOW, "slow", target)
    seconds = time_function(k.address, k.pointers, number=3, repeat=2, timer=timer)
    assert all(0.002 <= s < 0.5 for s in seconds)


def test_flush_and_raw_addresses(target: Target, timer):
    k = Prepared(c_kernels.GOOD, "vadd", target)
    addresses = [a.ctypes.data for a in k.arrays]
    seconds = time_function(
        k.address, addresses, number=2, repeat=3, warmup=0, flush_bytes=1 << 20, timer=timer
    )
    assert len(seconds) == 3


def test_default_timer_is_the_host_target(target: Target):
    k = Prepared(c_kernels.GOOD, "vadd", target)
    assert len(time_function(k.address, k.pointers, repeat=2)) == 2


def test_calibration_scales_with_kernel_cost(target: Target, timer):
    fast = Prepared(c_kernels.GOOD, "vadd", target)
    slow = Prepared(c_kernels.SLOW, "slow", target)
    fast_number = calibrate_number(fast.address, fast.pointers, 0.05, timer=timer)
    slow_number = calibrate_number(slow.address, slow.pointers, 0.05, timer=timer)
    assert fast_number > 10
    assert 1 <= slow_number < fast_number
    assert slow_number <= 0.05 / 0.002 * 1.2 + 1  # each slow call sleeps 2 ms
    assert calibrate_number(fast.address, fast.pointers, 10.0, max_number=50, timer=timer) == 50


def test_kernel_error_status_stops_timing(target: Target, timer):
    k = Prepared(c_kernels.FAILING, "failing", target)
    with pytest.raises(TensorTuneError, match="error status 3"):
        time_function(k.address, k.pointers, timer=timer)


@pytest.mark.parametrize("bad", [{"number": 0}, {"repeat": 0}, {"warmup": -1}, {"flush_bytes": -1}])
def test_bad_parameters(target: Target, timer, bad: dict):
    k = Prepared(c_kernels.GOOD, "vadd", target)
    with pytest.raises(TensorTuneError, match="bad timing parameters"):
        time_function(k.address, k.pointers, timer=timer, **bad)


@pytest.mark.parametrize("text", ["abc", "0", "-5", "1e9", "nan"])
def test_a_bad_min_repeat_names_the_variable_and_a_good_value(monkeypatch, text: str) -> None:
    monkeypatch.setenv("TENSORTUNE_MIN_REPEAT_MS", text)
    with pytest.raises(EnvironmentFailure, match=r"TENSORTUNE_MIN_REPEAT_MS must be milliseconds"):
        min_repeat_from_env()


def test_min_repeat_comes_from_the_environment_else_50_ms(monkeypatch) -> None:
    monkeypatch.setenv("TENSORTUNE_MIN_REPEAT_MS", " 7.5 ")
    assert min_repeat_from_env() == pytest.approx(0.0075)
    monkeypatch.delenv("TENSORTUNE_MIN_REPEAT_MS")
    assert min_repeat_from_env() == pytest.approx(0.05)
