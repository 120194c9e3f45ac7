import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from tensortune.measure.worker import _Placements, compare
from tensortune.memory import is_aligned


@given(
    arrays(np.float32, st.integers(1, 50), elements=st.floats(-1e3, 1e3, width=32)),
    st.floats(-1, 1),
)
def test_small_perturbations_pass(reference: np.ndarray, fraction: float):
    output = reference + np.float32(fraction * 1e-5) * (1 + np.abs(reference))
    assert compare(output.astype(np.float32), reference, rtol=1e-4, atol=1e-4) is None


def test_float_mismatch_reports_errors_and_location():
    reference = np.zeros((2, 3), np.float32)
    output = reference.copy()
    output[1, 2] = 0.5
    message = compare(output, reference, rtol=1e-4, atol=1e-4)
    assert message is not None
    assert "1 of 6 elements differ" in message
    assert "max abs error 0.5" in message
    assert "first at (1, 2)" in message


def test_nan_output_is_wrong_but_matching_nan_is_fine():
    reference = np.array([1.0, np.nan], np.float32)
    assert compare(reference.copy(), reference, 1e-4, 1e-4) is None
    message = compare(np.array([np.nan, np.nan], np.float32), reference, 1e-4, 1e-4)
    assert message is not None and "1 NaN" in message


def test_integers_and_bools_compare_exactly():
    assert compare(np.arange(4, dtype=np.int32), np.arange(4, dtype=np.int32), 0.5, 0.5) is None
    message = compare(np.array([1, 2], np.int32), np.array([1, 3], np.int32), 0.5, 0.5)
    assert message is not None and "got 2, expected 3" in message
    assert compare(np.array([True]), np.array([False]), 0, 0) is not None


def test_shape_mismatch():
    message = compare(np.zeros(3), np.zeros(4), 1e-4, 1e-4)
    assert message == "reference has shape (4,) but the output has (3,)"


def test_paired_timing_places_the_operands_afresh_each_round_keeping_shared_inputs_shared():
    data = np.arange(2048, dtype=np.float32)
    mine, theirs = np.zeros(2048, np.float32), np.zeros(2048, np.float32)
    placements = _Placements({0: [data, mine], 1: [data, theirs]})
    seen = []
    for _ in range(_Placements.KEPT + 2):
        placements.renew()
        round_arrays = placements._rounds[-1]
        assert round_arrays[0][0] is round_arrays[1][0]  # the input both kernels read
        assert round_arrays[0][1] is not round_arrays[1][1]  # each kernel's own output
        np.testing.assert_array_equal(round_arrays[0][0], data)
        assert is_aligned(round_arrays[0][0])
        assert placements.pointers(0)[0] == round_arrays[0][0].ctypes.data
        seen.append(round_arrays[0][0].ctypes.data)
    assert len(placements._rounds) == _Placements.KEPT
    assert len(set(seen[-_Placements.KEPT :])) == _Placements.KEPT  # live copies never share
