"""aarch64 with NEON proves the backend seam: kernels cross-compiled by ``aarch64-linux-gnu-gcc``
and run under ``qemu-aarch64`` match NumPy (issue 13, item 6).

The whole set is built and run once per session (one emulator process for every kernel); the
tests below read its results. They skip, saying what to install, without the cross compiler or
qemu, unless TENSORTUNE_REQUIRE_AARCH64=1 (CI) makes that a failure.
"""

from __future__ import annotations

import pytest

from tensortune.errors import TensorTuneError
from tests.backend import aarch64_kernels as kernels
from tests.security.test_special_values import OPS
from tests.session_summary import leave_line

ALIASES = {"max_pool2d": "max_pool", "avg_pool2d": "avg_pool", "depthwise_conv2d": "depthwise"}


@pytest.fixture(scope="module")
def results(request: pytest.FixtureRequest) -> dict[str, str | None]:
    try:
        target = kernels.neon_target()
    except TensorTuneError as exc:
        if kernels.required():
            raise
        pytest.skip(f"cannot cross-build and emulate aarch64 here: {exc}")
    checks = kernels.op_checks(target) + kernels.space_checks(target)
    problems = kernels.run_checks(target, checks)
    line = kernels.summary(checks, problems)
    leave_line(request.config, line)
    print(line)
    return problems


def _problems(results: dict[str, str | None], labels: set[str] | str) -> list[str]:
    """Why the checks named in `labels` (a set, or a prefix) failed; asserts there are some."""
    mine = {
        label: why
        for label, why in results.items()
        if (label in labels if isinstance(labels, set) else label.startswith(labels))
    }
    assert mine, f"no kernel was checked for {labels!r}"
    return [f"{label}: {why}" for label, why in mine.items() if why is not None]


def test_every_operator_of_the_library_is_checked() -> None:
    cases = set(OPS)
    missing = [
        op for op in kernels.OPERATORS if not any(c.startswith(ALIASES.get(op, op)) for c in cases)
    ]
    assert not missing, f"operators with no aarch64 case: {missing}"


@pytest.mark.parametrize("name", sorted(OPS))
def test_unscheduled_operator_matches_numpy_under_qemu(name: str, results) -> None:
    bad = _problems(results, {f"op {name}", f"op {name} (nan/inf)"})
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("spec", kernels.SPACE_SPECS)
def test_design_space_configs_match_numpy_under_qemu(spec: str, results) -> None:
    bad = _problems(results, f"{spec} ")
    assert not bad, "\n".join(bad)
