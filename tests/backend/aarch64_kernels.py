"""The aarch64 check: the operator library unscheduled and the GEMM/conv/depthwise (and other)
design spaces' default and sampled configs, cross-compiled for NEON and run under qemu.

Shared by tests/backend/test_aarch64.py and benchmarks/aarch64_check.py. Every kernel is built
once (through the cache, two compilers at a time) and all runs go to one emulator process;
timing under emulation means nothing and is never taken.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from tensortune import ops
from tensortune.backend import Artifact, backend_for
from tensortune.pipeline import build
from tensortune.space.registry import design_space
from tensortune.target import Target
from tensortune.te.reference import evaluate
from tensortune.workload import workload
from tests.security.test_special_values import OPS, with_specials

SPACE_SPECS = (  # awkward small shapes (primes, tails), as tests/space/test_templates.py
    "matmul:M=19,N=45,K=23",
    "matmul:M=16,N=32,K=8,epilogue=bias+gelu",
    "dense:M=5,N=33,K=17,epilogue=bias+relu",
    "batch_matmul:B=2,M=7,N=20,K=9",
    "conv2d:C=3,H=11,W=13,K=5,R=3,S=3,pad=1",
    "conv2d:C=5,H=8,W=10,K=7,R=3,S=3,layout=NHWC",
    "conv2d:C=4,H=9,W=9,K=18,R=3,S=3,stride=2,pad=1",
    "depthwise_conv2d:C=6,H=9,W=11,R=3,S=3,stride=2,pad=1",
    "depthwise_conv2d:C=8,H=9,W=9,R=3,S=3,pad=1",
    "maxpool2d:C=3,H=9,W=9,R=3,S=3,stride=2,pad=1",
    "softmax:rows=5,cols=37",
    "layernorm:rows=3,cols=50",
)
SAMPLES = 3
"""Sampled configs per space, besides the default."""

REQUIRE_ENV = "TENSORTUNE_REQUIRE_AARCH64"
"""Set to 1 (CI does) to fail, not skip, when the cross toolchain or qemu is missing."""


@dataclass
class Check:
    """One kernel run under qemu and what NumPy says it must give."""

    label: str
    artifact: Artifact
    inputs: list[np.ndarray]
    want: np.ndarray
    rtol: float
    atol: float


def neon_target() -> Target:
    """The NEON cross target; raises BuildError / EmulationError saying what to install."""
    from tensortune.backend import emulator

    target = Target.cross("neon", num_threads=2)
    emulator(target)
    return target


def _build_all(jobs: list[Callable[[], Check | list[Check]]]) -> list[Check]:
    with ThreadPoolExecutor(max_workers=2) as pool:  # compilers are subprocesses
        done = list(pool.map(lambda job: job(), jobs))
    return [c for item in done for c in (item if isinstance(item, list) else [item])]


def op_checks(target: Target) -> list[Check]:
    """Every operator of the library, unscheduled, on uniform inputs and on NaN/inf inputs."""

    def job(name: str) -> list[Check]:
        out = OPS[name]()
        artifact = build(out, target=target)
        specs = [a for a in artifact.args if a.role == "input"]
        rng = np.random.default_rng(0)
        plain = [rng.uniform(-1, 1, a.shape).astype(a.dtype) for a in specs]
        special = [with_specials(a.shape, seed) for seed, a in enumerate(specs)]
        checks = []
        for suffix, inputs, atol in (("", plain, 1e-5), (" (nan/inf)", special, 1e-4)):
            want = evaluate(out, {a.name: x for a, x in zip(specs, inputs, strict=True)})
            checks.append(Check(f"op {name}{suffix}", artifact, inputs, want, 1e-4, atol))
        return checks

    return _build_all([lambda name=name: job(name) for name in sorted(OPS)])


def space_checks(target: Target) -> list[Check]:
    """Each design space's default config and `SAMPLES` sampled ones."""
    jobs = []
    for spec in SPACE_SPECS:
        wl = workload(spec)
        ds = design_space(wl, target)
        configs = [ds.default, *ds.space.sample(np.random.default_rng(len(spec)), SAMPLES)]
        for i, config in enumerate(configs):
            name = "default" if i == 0 else f"sample {i}"

            def job(config=config, name=name, spec=spec, wl=wl, ds=ds) -> list[Check]:
                artifact = build(wl.outputs[0], ds.schedule(config), target)
                runs = [("", wl.random_inputs(0))]
                if name == "default":  # NaN and infinities propagate as in NumPy
                    runs.append((" (nan/inf)", wl.special_inputs()))
                return [
                    Check(f"{spec} {name}{suffix}", artifact, x, wl.reference(x), 1e-4, 1e-4)
                    for suffix, x in runs
                ]

            jobs.append(job)
    return _build_all(jobs)


def run_checks(target: Target, checks: list[Check]) -> dict[str, str | None]:
    """Run every check in one emulator process: label -> None if it matched NumPy, else why."""
    outputs = backend_for(target).execute([(c.artifact, c.inputs) for c in checks])
    problems: dict[str, str | None] = {}
    for check, (got,) in zip(checks, outputs, strict=True):
        try:
            np.testing.assert_array_equal(np.isnan(got), np.isnan(check.want), "NaN positions")
            np.testing.assert_allclose(
                got, check.want, rtol=check.rtol, atol=check.atol, equal_nan=True
            )
            problems[check.label] = None
        except AssertionError as exc:
            problems[check.label] = str(exc)
    return problems


def summary(checks: list[Check], problems: dict[str, str | None]) -> str:
    """``aarch64: N kernels matched NumPy under qemu (...)``, the line CI prints."""
    kernels = {c.artifact.library for c in checks}
    good = {c.artifact.library for c in checks if problems.get(c.label) is None}
    bad = kernels - good
    runs = len(checks)
    verdict = "matched NumPy" if not bad else f"matched NumPy, {len(bad)} did NOT"
    return (
        f"aarch64: {len(good)} kernels {verdict} under qemu "
        f"({runs} runs: {len(OPS)} ops unscheduled on plain and NaN/inf inputs, "
        f"{len(SPACE_SPECS)} design spaces x default (also on NaN/inf) + {SAMPLES} samples)"
    )


def required() -> bool:
    """Whether a missing toolchain is a failure rather than a skip (CI sets it)."""
    return os.environ.get(REQUIRE_ENV, "") not in ("", "0")


OPERATORS = tuple(ops.__all__)
