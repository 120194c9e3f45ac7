"""The compiled model as one library: one C call per inference, and an exported directory that a
C program links and runs with no Python, matching ONNX Runtime."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the graph tests need the optional onnx package")
pytest.importorskip("onnxruntime", reason="the graph tests compare against onnxruntime")

from tensortune.graph import compile_model  # noqa: E402

from . import builders  # noqa: E402

MAIN = r"""
#include <stdio.h>
#include "block.h"

static BLOCK_INPUT0_TYPE x[BLOCK_INPUT0_SIZE];
static BLOCK_OUTPUT0_TYPE y[BLOCK_OUTPUT0_SIZE];

int main(int argc, char** argv) {
  if (argc != 4) return 1;
  FILE* f = fopen(argv[2], "rb");
  if (!f || fread(x, sizeof x[0], BLOCK_INPUT0_SIZE, f) != BLOCK_INPUT0_SIZE) return 1;
  fclose(f);
  int status = block_init(argv[1]);
  if (status) { printf("init %d\n", status); return 2; }
  const void* inputs[BLOCK_NUM_INPUTS] = {x};
  void* outputs[BLOCK_NUM_OUTPUTS] = {y};
  for (int k = 0; k < 3; ++k)
    if ((status = block_run(inputs, outputs))) { printf("run %d\n", status); return 3; }
  f = fopen(argv[3], "wb");
  fwrite(y, sizeof y[0], BLOCK_OUTPUT0_SIZE, f);
  fclose(f);
  block_free();
  printf("ok\n");
  return 0;
}
"""


def _relative_error(got: np.ndarray, want: np.ndarray) -> float:
    return float(np.abs(got - want).max() / max(np.abs(want).max(), 1e-6))


def test_one_library_for_the_whole_model(target):
    compiled = compile_model(builders.twin_convs(), target=target, name="twins")
    assert len(compiled.steps) == 3 and len(compiled.kernels) == 1
    assert compiled.entry.count("twins_00_conv_relu(") == 4  # prototype + three calls
    assert "int twins_run_with(" in compiled.entry
    x = np.random.default_rng(0).standard_normal((1, 8, 6, 6)).astype(np.float32)
    want = builders.run_ort(builders.twin_convs(), {"x": x})[0]
    assert _relative_error(compiled(x), want) < 1e-4


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc to build the C program")
def test_exported_model_runs_from_c(target, tmp_path):
    model = builders.resnet_block()
    compiled = compile_model(model, target=target, name="block")
    files = compiled.export(tmp_path / "out")
    header = files["header"].read_text()
    assert "int block_run(const void* const* inputs, void* const* outputs);" in header
    assert "#define BLOCK_INPUT0_SHAPE {1, 8, 8, 8}" in header
    assert f"#define BLOCK_ARENA_BYTES {compiled.arena.size}" in header
    assert compiled.sizes.packed > 0  # block_init packs the conv weights once
    assert f"#define BLOCK_PACKED_BYTES {compiled.sizes.packed}" in header
    assert files["weights"].stat().st_size == compiled.sizes.weights  # the file: unpacked
    (tmp_path / "main.c").write_text(MAIN)
    out = files["library"].parent
    program = tmp_path / "main"
    subprocess.run(
        [
            "gcc",
            "-O2",
            "-o",
            program,
            tmp_path / "main.c",
            f"-I{out}",
            f"-L{out}",
            "-lblock",
            f"-Wl,-rpath,{out}",
        ],
        check=True,
    )
    x = np.random.default_rng(3).standard_normal((1, 8, 8, 8)).astype(np.float32)
    x.tofile(tmp_path / "x.bin")
    run = subprocess.run(
        [program, files["weights"], tmp_path / "x.bin", tmp_path / "y.bin"],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin"},  # no Python anywhere near it
    )
    assert run.returncode == 0 and run.stdout == "ok\n", run.stdout + run.stderr
    got = np.fromfile(tmp_path / "y.bin", np.float32).reshape(1, 8, 8, 8)
    want = builders.run_ort(model, {"x": x})[0]
    assert _relative_error(got, want) < 1e-4
    np.testing.assert_array_equal(got, compiled(x))  # the same library as from Python

    (tmp_path / "short.weights").write_bytes(files["weights"].read_bytes()[:-4])
    bad = subprocess.run(
        [program, tmp_path / "short.weights", tmp_path / "x.bin", tmp_path / "y.bin"],
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 2 and bad.stdout == "init 4\n"
