"""The reference every candidate is timed beside: the template default, checked first. A host
stall (timeout) is tried once more; a default that cannot be the reference leaves the run timing
candidates alone, and says so."""

import warnings

import pytest

import tensortune as tt
from tensortune.measure.result import MeasureResult
from tensortune.measure.runner import Runner
from tensortune.space.registry import design_space
from tensortune.tuning.measuring import measuring_here

SPEC = "matmul:M=8,N=24,K=16"


def _first_runs_fail(monkeypatch, kinds: list[str]) -> list[str]:
    """Make the first len(kinds) runs of the worker answer with those error kinds."""
    calls: list[str] = []
    real = Runner.run

    def run(self, candidates, on_result=None):
        calls.append(candidates[0].name)
        if len(calls) <= len(kinds):
            return [MeasureResult(None, error_kind=kinds[len(calls) - 1], error_msg="injected")]
        return real(self, candidates, on_result)

    monkeypatch.setattr(Runner, "run", run)
    return calls


def _measure_default(target):
    ds = design_space(tt.workload(SPEC), target)
    results: list[MeasureResult] = []
    with measuring_here(ds, target, 20.0, 0, with_baseline=True) as measure:
        measure([ds.default], lambda i, trace, res: results.append(res))
    return results


def test_a_reference_that_timed_out_once_is_tried_again(monkeypatch, target):
    calls = _first_runs_fail(monkeypatch, ["timeout"])
    with warnings.catch_warnings():
        warnings.simplefilter("error", tt.MeasurementWarning)
        (result,) = _measure_default(target)
    assert len(calls) == 3  # the stalled check, its retry, the candidate
    assert result.ok and result.ratio is not None  # still timed beside the reference


def test_a_default_that_fails_twice_leaves_candidates_timed_alone_with_a_warning(
    monkeypatch, target
):
    _first_runs_fail(monkeypatch, ["timeout", "runtime"])
    with pytest.warns(tt.MeasurementWarning, match="timed alone.*runtime: injected"):
        (result,) = _measure_default(target)
    assert result.ok and result.ratio is None


def test_a_wrong_default_is_not_retried(monkeypatch, target):
    calls = _first_runs_fail(monkeypatch, ["wrong_result"])
    with pytest.warns(tt.MeasurementWarning, match="wrong_result"):
        _measure_default(target)
    assert len(calls) == 2  # the failed check, then the candidate alone
