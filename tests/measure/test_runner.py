"""The runner survives every way a candidate can fail and keeps measuring the next one."""

import os

import numpy as np
import pytest

from tensortune.build.kernel import ArgSpec
from tensortune.measure.builder import build_candidates
from tensortune.measure.result import MeasureResult
from tensortune.measure.runner import Runner, RunRequest, _worker_env, resident_bytes
from tensortune.target import Target

from . import c_kernels


@pytest.fixture(scope="module")
def target() -> Target:
    return Target.from_string("generic threads=1")


@pytest.fixture
def runner(target: Target):
    with Runner(timeout=1.5, repeat=3, min_repeat_seconds=0.01, target=target) as runner:
        yield runner


@pytest.fixture(scope="module")
def data() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    a, b = c_kernels.inputs()
    return a, b, a + b


def measure(runner: Runner, target: Target, data, *candidates: tuple[str, str]):
    """Build then run like the tuner does: compile failures never reach the runner."""
    a, b, expected = data
    built = build_candidates([source for source, _ in candidates], target)
    results: list[MeasureResult | None] = []
    requests = []
    for library, (_, name) in zip(built, candidates, strict=True):
        if isinstance(library, Exception):
            results.append(MeasureResult.failure("compile", library.log))
        else:
            results.append(None)
            requests.append(RunRequest(library, name, c_kernels.ARGS, (a, b), expected))
    measured = iter(runner.run(requests))
    return [result or next(measured) for result in results]


def assert_measured(result: MeasureResult) -> None:
    assert result.ok, result.error_msg
    assert result.seconds is not None and 0 < result.seconds < 0.01
    assert len(result.spread) == 3
    assert min(result.spread) <= result.seconds <= max(result.spread)
    assert result.number >= 1
    assert result.run_seconds > 0


GOOD = (c_kernels.GOOD, "vadd")


def test_every_failure_kind_then_a_good_candidate(runner: Runner, target: Target, data):
    results = measure(
        runner,
        target,
        data,
        GOOD,
        (c_kernels.SEGFAULT, "segv"),
        GOOD,
        (c_kernels.HANG, "hang"),
        GOOD,
        (c_kernels.WRONG, "wrong"),
        GOOD,
        (c_kernels.NO_COMPILE, "broken"),
        GOOD,
    )
    kinds = [r.error_kind for r in results]
    assert kinds == [None, "crash", None, "timeout", None, "wrong_result", None, "compile", None]
    for good in results[::2]:
        assert_measured(good)
    crash, timeout, wrong, broken = results[1:8:2]
    assert "SIGSEGV" in crash.error_msg and "'segv'" in crash.error_msg
    assert "1.5 s" in timeout.error_msg
    assert 1.4 < timeout.run_seconds < 5
    assert "max abs error" in wrong.error_msg and "max rel error" in wrong.error_msg
    assert "output 'C'" in wrong.error_msg
    assert "expected expression" in broken.error_msg
    assert all(r.seconds is None for r in results[1::2])


def test_abort_and_error_status(runner: Runner, target: Target, data):
    results = measure(
        runner, target, data, (c_kernels.ABORT, "boom"), (c_kernels.FAILING, "failing"), GOOD
    )
    assert [r.error_kind for r in results] == ["crash", "runtime", None]
    assert "SIGABRT" in results[0].error_msg
    assert "error status 3" in results[1].error_msg
    assert_measured(results[2])


def test_outputs_a_kernel_never_writes_are_caught(runner: Runner, target: Target, data):
    (result,) = measure(runner, target, data, (c_kernels.PARTIAL, "partial"))
    assert result.error_kind == "wrong_result"
    assert "2048 of 4096 elements differ" in result.error_msg
    assert "2048 NaN" in result.error_msg


def test_worker_is_reused_while_candidates_behave(runner: Runner, target: Target, data):
    measure(runner, target, data, GOOD)
    pid = runner._worker.proc.pid
    assert all(r.ok for r in measure(runner, target, data, GOOD, (c_kernels.CHATTY, "chatty")))
    assert runner._worker.proc.pid == pid  # kernel output on stdout did not break the protocol
    measure(runner, target, data, (c_kernels.WRONG, "wrong"))
    assert runner._worker is None  # replaced after a failure
    runner.close()


def test_worker_recycled_after_max_tasks(target: Target, data):
    with Runner(repeat=1, number=1, target=target, max_tasks_per_worker=2) as runner:
        measure(runner, target, data, GOOD, GOOD)
        first = runner._worker.proc.pid
        measure(runner, target, data, GOOD)
        assert runner._worker.proc.pid != first


def test_worker_recycled_once_it_holds_too_much_memory(target: Target, data):
    """Loaded candidates keep their libraries and scratch blocks: a worker past its memory bound
    is replaced before the next candidate."""
    with Runner(repeat=1, number=1, target=target, max_worker_bytes=1 << 40) as runner:
        measure(runner, target, data, GOOD, GOOD)
        kept = runner._worker.proc.pid
        measure(runner, target, data, GOOD)
        assert runner._worker.proc.pid == kept
        assert resident_bytes(kept) > 0
        runner.max_worker_bytes = 1 << 20  # below any Python process
        measure(runner, target, data, GOOD)
        assert runner._worker.proc.pid != kept


def test_worker_killed_between_runs_is_replaced(runner: Runner, target: Target, data):
    measure(runner, target, data, GOOD)
    runner._worker.proc.kill()
    runner._worker.proc.wait()
    (result,) = measure(runner, target, data, GOOD)
    assert_measured(result)


def test_fixed_number_and_no_reference(target: Target, data):
    a, b, _ = data
    (library,) = build_candidates([c_kernels.WRONG], target)
    request = RunRequest(library, "wrong", c_kernels.ARGS, (a, b), None, build_seconds=0.25)
    with Runner(number=7, repeat=2, warmup=0, target=target) as runner:
        (result,) = runner.run([request])
    assert result.ok
    assert result.number == 7
    assert len(result.spread) == 2
    assert result.build_seconds == 0.25


def test_bad_requests_are_runtime_errors(runner: Runner, target: Target, data, tmp_path):
    a, b, expected = data
    (library,) = build_candidates([c_kernels.GOOD], target)
    requests = [
        RunRequest(tmp_path / "missing.so", "vadd", c_kernels.ARGS, (a, b), expected),
        RunRequest(library, "vadd", c_kernels.ARGS, (a[:10], b), expected),
        RunRequest(library, "vadd", c_kernels.ARGS, (a, b), expected[:10]),
        RunRequest(library, "vadd", c_kernels.ARGS, (a, b), expected),
    ]
    results = runner.run(requests)
    assert [r.error_kind for r in results] == ["runtime", "runtime", "wrong_result", None]
    assert "cannot load kernel library" in results[0].error_msg
    assert "argument 'A'" in results[1].error_msg
    assert "reference has shape (10,)" in results[2].error_msg


def test_multiple_outputs_are_each_checked(runner: Runner, target: Target):
    source = """
    void minmax(const float* restrict X, float* restrict L, float* restrict H) {
        for (int i = 0; i < 8; ++i) { L[i] = X[i] < 0 ? X[i] : 0; H[i] = X[i] > 0 ? X[i] : 1; }
    }
    int minmax_packed(void** a) { minmax(a[0], a[1], a[2]); return 0; }
    """
    args = (ArgSpec("X", (8,), "float32"), ArgSpec("L", (8,), "float32", "output"))
    args += (ArgSpec("H", (8,), "float32", "output"),)
    x = np.linspace(-2, 2, 8, dtype=np.float32)
    (library,) = build_candidates([source], target)
    right = (np.minimum(x, 0), np.maximum(x, 0))
    results = runner.run(
        [
            RunRequest(library, "minmax", args, (x,), (right[0], np.where(x > 0, x, 1))),
            RunRequest(library, "minmax", args, (x,), right),
        ]
    )
    assert results[0].ok
    assert results[1].error_kind == "wrong_result"
    assert "output 'H'" in results[1].error_msg


def test_omp_threads_follow_the_target_and_the_wait_policy_passes_through(
    runner: Runner, target: Target
):
    source = """
    #include <omp.h>
    #include <stdlib.h>
    #include <string.h>
    void env(int* restrict T, int* restrict P) {
        T[0] = omp_get_max_threads();
        const char* policy = getenv("OMP_WAIT_POLICY");
        P[0] = policy != NULL && strcmp(policy, "passive") == 0;
    }
    int env_packed(void** a) { env(a[0], a[1]); return 0; }
    """
    args = (ArgSpec("T", (1,), "int32", "output"), ArgSpec("P", (1,), "int32", "output"))
    (library,) = build_candidates([source], target)
    passive = os.environ.get("OMP_WAIT_POLICY") == "passive"
    expected = (np.array([target.num_threads], np.int32), np.array([passive], np.int32))
    (result,) = runner.run([RunRequest(library, "env", args, (), expected)])
    assert result.ok, result.error_msg


def test_worker_environment(target: Target, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    monkeypatch.setenv("OMP_PROC_BIND", "close")
    env = _worker_env(Target.from_string("generic threads=3"))
    assert env["OMP_NUM_THREADS"] == "3"
    assert "OMP_WAIT_POLICY" not in env  # libgomp's default, as the kernel's callers get
    assert env["OMP_PROC_BIND"] == "close"
    assert env["OPENBLAS_NUM_THREADS"] == "1"
    monkeypatch.setenv("OMP_WAIT_POLICY", "active")
    assert _worker_env(target)["OMP_WAIT_POLICY"] == "active"


def test_empty_batch_starts_nothing(target: Target):
    runner = Runner(target=target)
    assert runner.run([]) == []
    assert runner._worker is None


def test_paired_run_times_the_candidate_beside_its_baseline(runner, target, data) -> None:
    a, b, expected = data
    good, slow = build_candidates([c_kernels.GOOD, c_kernels.SLOW], target)
    fast_vs_slow, slow_vs_fast = runner.run(
        [
            RunRequest(good, "vadd", c_kernels.ARGS, (a, b), expected, baseline=(slow, "slow")),
            RunRequest(slow, "slow", c_kernels.ARGS, (a, b), expected, baseline=(good, "vadd")),
        ]
    )
    for result in (fast_vs_slow, slow_vs_fast):
        assert result.ok, result.error_msg
        assert result.reference_seconds is not None and result.ratio is not None
        assert result.ratio_low <= result.ratio <= result.ratio_high
        assert len(result.spread) >= 5
    assert fast_vs_slow.ratio < 0.5 < 2 < slow_vs_fast.ratio
    assert fast_vs_slow.reference_seconds > fast_vs_slow.seconds
