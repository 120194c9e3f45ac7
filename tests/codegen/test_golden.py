"""Golden C files: a change in what the compiler prints shows as a reviewed diff.

Each kernel is generated for a pinned target (AVX2, two threads, fixed cache sizes), never the
host, so the files do not move between machines. The preamble every translation unit starts with
(includes, allocation and floor-division helpers) is kept once, in ``golden/preamble.c``; each
kernel's file shows where it stands. ``TENSORTUNE_UPDATE_GOLDEN=1`` rewrites them; read the diff
before committing it.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

import tensortune as tt
from tensortune import te
from tensortune.codegen import generate_c
from tensortune.codegen.preamble import HEADER
from tensortune.lower import lower
from tensortune.space.registry import design_space
from tensortune.target import Target

GOLDEN = Path(__file__).parent / "golden"
PREAMBLE_MARK = "/* the preamble: golden/preamble.c */\n"


def pinned_target(isa: str = "avx2") -> Target:
    return dataclasses.replace(
        Target.cross(isa, num_threads=2),
        name="golden",
        l1d_bytes=32 * 1024,
        l2_bytes=1024 * 1024,
        l3_bytes=32 * 1024 * 1024,
    )


def readme_tour() -> tt.Schedule:
    A = te.placeholder((64, 48), name="A")
    B = te.placeholder((48, 80), name="B")
    k = te.reduce_axis(48, name="k")
    C = te.compute((64, 80), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    D = te.compute((64, 80), lambda i, j: te.max(C[i, j], 0.0), name="D")
    s = tt.Schedule(D)
    io, ii = s.split("D", "i", 8)
    jo, ji = s.split("D", "j", 16)
    s.reorder("D", [io, jo, ii, ji])
    s.compute_at("C", "D", jo)
    s.reorder("C", ["k", "i", "j"])
    s.vectorize("C", "j")
    s.vectorize("D", ji)
    s.parallel("D", io)
    return s


def space_default(spec: str, isa: str = "avx2", **overrides) -> tt.Schedule:
    ds = design_space(tt.workload(spec), pinned_target(isa))
    return ds.schedule({**ds.default, **overrides})


CASES = {
    "readme_tour": readme_tour,
    "matmul_64_default": lambda: space_default("matmul:M=64,N=64,K=64"),
    "gemm_register_tile": lambda: space_default("matmul:M=512,N=512,K=512"),
    "conv_register_tile": lambda: space_default("conv2d:C=64,H=56,W=56,K=64,R=3,S=3,pad=1"),
    "softmax": lambda: space_default("softmax:rows=1536,cols=128"),
    # masked vector tails: a 6x32 register tile on 37 columns (AVX-512's 16 lanes), and a
    # softmax over 197 columns whose row max and sum see the identity in masked-off lanes
    "tail_tile_avx512": lambda: space_default("matmul:M=37,N=37,K=20", "avx512"),
    "tail_softmax_avx2": lambda: space_default("softmax:rows=64,cols=197"),
}


def golden_source(case: str) -> str:
    """The C of one golden case, as the compiler prints it today, its preamble replaced by a
    line that names the file holding it (the one place the preamble is read)."""
    if case == "preamble":
        return HEADER
    func = lower(CASES[case](), case, pinned_target().num_threads)
    source = generate_c(func, f"golden case {case}")
    assert source.count(HEADER) == 1, "every translation unit starts with the preamble, once"
    return source.replace(HEADER, PREAMBLE_MARK)


@pytest.mark.parametrize("case", ["preamble", *sorted(CASES)])
def test_golden_c(case: str) -> None:
    path = GOLDEN / f"{case}.c"
    source = golden_source(case)
    if os.environ.get("TENSORTUNE_UPDATE_GOLDEN") == "1":
        path.write_text(source)
    assert path.exists(), f"{path} missing: run with TENSORTUNE_UPDATE_GOLDEN=1"
    assert source == path.read_text(), (
        f"generated C for {case} changed; if intended, rerun with TENSORTUNE_UPDATE_GOLDEN=1 "
        "and review the diff"
    )


def test_golden_register_tiles_have_no_unreachable_copy() -> None:
    """The 64³ default: one interior and one edge micro-kernel, no test in either k loop."""
    src = (GOLDEN / "matmul_64_default.c").read_text()
    assert src.count("for (int k") == 2
    assert "!" not in src.split("int matmul_64_default(")[1]
    assert "parallel on loop j_o_o of extent 1: runs on one thread" in src


def test_golden_tail_tiles_are_masked_vector_operations() -> None:
    """The tails print one masked operation per vector (AVX-512 mask registers, AVX2
    ``vmaskmov``), not a loop over lanes."""
    for case, lanes, intrinsic in (
        ("tail_tile_avx512", 16, "_mm512_mask_loadu_ps"),
        ("tail_softmax_avx2", 8, "_mm256_maskload_ps"),
    ):
        src = (GOLDEN / f"{case}.c").read_text()
        assert intrinsic in src and "lane by lane" not in src
        body = src.split(f"int {case}(")[1]
        assert f"tt_maskload_f32x{lanes}(&" in body and f"tt_maskstore_f32x{lanes}(&" in body
        assert f"< {lanes}; ++" not in body  # no loop over the lanes of a vector
