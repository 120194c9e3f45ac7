"""The backend seam (issue 13, item 5): one interface per architecture, one build path."""

from __future__ import annotations

import re
import subprocess

import numpy as np
import pytest

from tensortune import pipeline
from tensortune.backend import (
    Aarch64Backend,
    Artifact,
    Backend,
    CBackend,
    EmulationError,
    ForeignTargetError,
    X86Backend,
    backend_for,
    emulator,
)
from tensortune.backend import qemu as qemu_module
from tensortune.build.kernel import ArgSpec
from tensortune.codegen.preamble import C_TYPE, MASK_OF, SHORT
from tensortune.dtype import ALL, TENSOR_DTYPES, dtype
from tensortune.errors import BuildError
from tensortune.measure.builder import build_candidates
from tensortune.schedule import Schedule
from tensortune.space.registry import design_space
from tensortune.target import Target
from tensortune.workload import workload
from tests.backend.aarch64_kernels import required

SPEC = "matmul:M=8,N=12,K=5"


@pytest.fixture(scope="module")
def neon() -> Target:
    try:
        return Target.cross("neon", num_threads=2)
    except BuildError as exc:
        if required():
            raise
        pytest.skip(f"no aarch64 cross compiler: {exc}")


def test_each_architecture_has_a_backend_that_implements_the_seam(target: Target):
    backend = backend_for(target)
    assert isinstance(backend, Backend)
    assert type(backend) is {"x86_64": X86Backend, "aarch64": Aarch64Backend}[target.arch]
    assert backend_for(target) is backend  # one per target
    hints = backend.hints()
    assert (hints.arch, hints.vector_bits, hints.num_threads) == (
        target.arch,
        target.vector_bits,
        target.num_threads,
    )
    assert hints.lanes("float32") == target.lanes("float32") and hints.can_time
    assert hints.vector_registers == target.vector_registers
    with pytest.raises(ValueError, match="serves"):
        (Aarch64Backend if target.arch == "x86_64" else X86Backend)(target)


def test_compile_is_build_then_load(target: Target):
    wl = workload(SPEC)
    artifact = pipeline.build(wl, target=target)
    assert isinstance(artifact, Artifact) and artifact.library.exists()
    assert [a.role for a in artifact.args] == ["input", "input", "output"]
    kernel = backend_for(target).load(artifact)
    again = pipeline.compile(wl, target=target)
    assert again.library_path == kernel.library_path and again.source == artifact.source
    x = wl.random_inputs(0)
    np.testing.assert_allclose(kernel(*x), wl.reference(x), rtol=1e-4, atol=1e-5)
    (got,) = backend_for(target).execute([(artifact, x)])[0]
    np.testing.assert_array_equal(got, kernel(*x))


def test_pipeline_names_are_the_backends_steps(target: Target):
    sch = Schedule(workload(SPEC).outputs)
    sch.annotate("opt_level", "O2")
    assert pipeline.build_source(sch, "k", target)[0] == backend_for(target).generate(sch, "k")[0]
    assert pipeline.schedule_flags(sch) == backend_for(target).flags(sch) == ["-O2"]


def test_batch_builds_go_through_the_backend(target: Target, monkeypatch: pytest.MonkeyPatch):
    calls = []
    real = CBackend.build

    def counting(self, source, extra_flags=()):
        calls.append(tuple(extra_flags))
        return real(self, source, extra_flags)

    monkeypatch.setattr(CBackend, "build", counting)
    source = "int k_packed(void** a) { (void)a; return 0; }\n"
    paths = build_candidates([source, (source, "-O1"), source], target)
    assert paths[0] == paths[2] != paths[1]
    assert sorted(calls) == [(), ("-O1",)]


def test_preamble_dtype_names_are_views_of_the_one_table():
    assert {name: dtype(name).c_type for name in TENSOR_DTYPES} == C_TYPE
    assert {name: dtype(name).short for name in TENSOR_DTYPES} == SHORT
    assert {name: row.mask for name, row in ALL.items()} == MASK_OF
    assert C_TYPE["bool"] == "_Bool" and MASK_OF["float64"] == "int64"


# -- a foreign architecture: NEON on a host that is not aarch64 ----------------------------------
def test_neon_kernels_build_here_but_do_not_load(neon: Target, target: Target):
    if target.arch == "aarch64":
        pytest.skip("this host runs aarch64 kernels")
    wl = workload(SPEC)
    with pytest.raises(ForeignTargetError, match=r"cannot load kernel 'matmul'.*aarch64") as info:
        pipeline.compile(wl, target=neon)
    artifact = info.value.artifact
    assert artifact is not None and artifact.library.exists()
    assert artifact == pipeline.build(wl, target=neon)
    assert backend_for(neon).hints().can_time is False
    with pytest.raises(ForeignTargetError, match="cannot time kernels"):
        backend_for(neon).timer_library("int f(void) { return 0; }\n")


def test_neon_code_is_portable_c_with_128_bit_vectors(neon: Target):
    """Four float32 lanes, NEON instructions in the binary, no x86 intrinsic outside its #if."""
    ds = design_space(workload("matmul:M=32,N=32,K=32"), neon)
    source, _ = backend_for(neon).generate(ds.schedule(ds.default), "mm")
    assert "typedef float f32x4 __attribute__((vector_size(16)" in source
    outside = re.sub(r"#if defined\(__(AVX|SSE)[^\n]*\n.*?#(elif|else)", "", source, flags=re.S)
    assert "_mm" not in outside
    flags = [f for f in neon.cflags if f not in ("-shared", "-fPIC")]
    asm = subprocess.run(
        [neon.cc, *flags, "-S", "-x", "c", "-", "-o", "-"],
        input=source,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert re.search(r"\bfmla\s+v\d+\.4s", asm), "no 4-lane NEON fused multiply-add"


def test_a_crashing_kernel_is_named_under_qemu(neon: Target):
    try:
        emulator(neon)
    except EmulationError as exc:
        if required():
            raise
        pytest.skip(str(exc))
    backend = backend_for(neon)
    fine = "int ok_packed(void** a) { *(float*)a[0] = 2.5f; return 0; }\n"
    crash = "int boom_packed(void** a) { (void)a; *(volatile int*)16 = 1; return 0; }\n"
    out = (ArgSpec("Y", (1,), "float32", "output"),)
    ok = Artifact(backend.build(fine), "ok", out, fine, neon)
    boom = Artifact(backend.build(crash), "boom", out, crash, neon)
    assert backend.execute([(ok, [])])[0][0].tolist() == [2.5]
    with pytest.raises(EmulationError, match=r"kernel 'boom'.*failed under .*qemu"):
        backend.execute([(ok, []), (boom, []), (ok, [])])
    refuse = "int no_packed(void** a) { (void)a; return -1; }\n"
    no = Artifact(backend.build(refuse), "no", out, refuse, neon)
    with pytest.raises(EmulationError, match=r"kernel 'no'.*returned status -1 under"):
        backend.execute([(ok, []), (no, []), (ok, [])])


def test_a_missing_emulator_says_what_to_install(neon: Target, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(qemu_module.shutil, "which", lambda name: None)
    with pytest.raises(EmulationError, match=r"qemu-aarch64.*apt-get install qemu-user"):
        emulator(neon)
