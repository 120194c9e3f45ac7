"""A kernel split at its constant inputs is measured as a compiled model runs it: the worker runs
its ``_prepack`` once per set of inputs, untimed, checks the kernel's outputs and times only the
per-call kernel (a baseline with a prepack of its own the same way). Each C function here logs
its calls to a file, so what was timed is counted, not guessed from a duration."""

from collections import Counter

import numpy as np
import pytest

from tensortune.build.kernel import ArgSpec
from tensortune.measure.builder import build_candidates
from tensortune.measure.runner import Check, Prepack, Runner, RunRequest
from tensortune.target import Target

N = 256
LOG = "TT_TEST_PREPACK_LOG"
RUN_ARGS = (
    ArgSpec("A", (N,), "float32"),
    ArgSpec("W2", (N,), "float32"),
    ArgSpec("C", (N,), "float32", "output"),
)
PREPACK = Prepack(
    (ArgSpec("W", (N,), "float32"), ArgSpec("W2", (N,), "float32", "output")), ("A", "W")
)


def split_kernel(name: str, scale: float = 2.0) -> str:
    """``name(A, W2, C)``: C = A + W2, with ``name_prepack(W, W2)``: W2 = scale * W."""
    return f"""
#include <stdio.h>
#include <stdlib.h>
static void note(const char* what) {{
    const char* path = getenv("{LOG}");
    FILE* f = path != NULL ? fopen(path, "a") : NULL;
    if (f != NULL) {{ fprintf(f, "%s\\n", what); fclose(f); }}
}}
int {name}_prepack(const float* restrict W, float* restrict W2) {{
    note("{name}_prepack");
    for (int i = 0; i < {N}; ++i) W2[i] = {scale}f * W[i];
    return 0;
}}
int {name}_prepack_packed(void** a) {{ return {name}_prepack(a[0], a[1]); }}
int {name}(const float* restrict A, const float* restrict W2, float* restrict C) {{
    note("{name}");
    for (int i = 0; i < {N}; ++i) C[i] = A[i] + W2[i];
    return 0;
}}
int {name}_packed(void** a) {{ return {name}(a[0], a[1], a[2]); }}
"""


@pytest.fixture(scope="module")
def target() -> Target:
    return Target.from_string("generic threads=1")


@pytest.fixture
def calls(tmp_path, monkeypatch: pytest.MonkeyPatch):
    """The C functions' calls, read after a run: the worker starts with this log's path."""
    log = tmp_path / "calls.log"
    monkeypatch.setenv(LOG, str(log))
    return lambda: Counter(log.read_text().split()) if log.exists() else Counter()


def _inputs(seed: int) -> tuple[tuple[np.ndarray, np.ndarray], np.ndarray]:
    rng = np.random.default_rng(seed)
    a, w = (rng.standard_normal(N, dtype=np.float32) for _ in range(2))
    return (a, w), a + 2 * w


def _request(library, name: str, **more) -> RunRequest:
    (inputs, expected), (check_inputs, check_expected) = _inputs(0), _inputs(1)
    check = Check(check_inputs, (check_expected,), "other inputs")
    return RunRequest(
        library, name, RUN_ARGS, inputs, expected, checks=(check,), prepack=PREPACK, **more
    )


def test_the_prepack_runs_once_per_inputs_and_only_the_kernel_is_timed(target, calls):
    (library,) = build_candidates([split_kernel("k")], target)
    with Runner(number=3, repeat=2, warmup=1, target=target) as runner:
        (result,) = runner.run([_request(library, "k")])
    assert result.ok, result.error_msg
    assert result.number == 3 and len(result.spread) == 2
    counted = calls()
    assert counted["k_prepack"] == 2  # the inputs and the check's, never in a timed call
    assert counted["k"] >= 2 + 3 * 2  # checked twice, then timed: 3 calls a repeat


def test_a_wrong_prepack_is_a_wrong_result(target, calls):
    (library,) = build_candidates([split_kernel("bad", scale=3.0)], target)
    with Runner(number=3, repeat=2, target=target) as runner:
        (result,) = runner.run([_request(library, "bad")])
    assert result.error_kind == "wrong_result", result.error_msg
    assert calls()["bad"] == 2  # on the inputs and the check's, then not timed


def test_a_baseline_with_a_prepack_is_fed_and_timed_the_same_way(target, calls):
    candidate, reference = build_candidates([split_kernel("k1"), split_kernel("k2")], target)
    baseline = _request(reference, "k2")
    with Runner(number=3, repeat=2, paired_rounds=(2, 2), target=target) as runner:
        (result,) = runner.run([_request(candidate, "k1", baseline=baseline)])
    assert result.ok, result.error_msg
    assert result.ratio is not None and result.reference_seconds is not None
    counted = calls()
    assert (counted["k1_prepack"], counted["k2_prepack"]) == (2, 1)  # the baseline: not checked
    assert counted["k2"] >= 3 * 2


def test_the_job_names_the_per_call_kernel_and_its_prepack(target, tmp_path):
    (library,) = build_candidates([split_kernel("k")], target)
    runner = Runner(target=target)
    plain = RunRequest(library, "k", RUN_ARGS, _inputs(0)[0], baseline=(library, "k"))
    job = runner._job(_request(library, "k", baseline=plain), tmp_path / "timer.so", tmp_path, {})
    assert job["name"] == "k" and [a["name"] for a in job["args"]] == ["A", "W2", "C"]
    assert job["prepack"] == {
        "args": [
            {"name": "W", "shape": [N], "dtype": "float32", "role": "input"},
            {"name": "W2", "shape": [N], "dtype": "float32", "role": "output"},
        ],
        "inputs": ["A", "W"],
    }
    assert job["baseline"]["name"] == "k" and "prepack" not in job["baseline"]
    assert "args" in job["baseline"]  # a request as baseline brings its own signature
    bare = runner._job(plain, tmp_path / "timer.so", tmp_path, {})
    assert "prepack" not in bare and bare["baseline"] == {"library": str(library), "name": "k"}
