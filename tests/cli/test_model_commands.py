"""The model commands end to end (``python -m tensortune tune-model|run|bench|export``) and
their bad-input errors: one ``error:`` line, exit status 2, never a traceback."""

from __future__ import annotations

import argparse

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the model commands need the optional onnx package")
ort = pytest.importorskip("onnxruntime", reason="the model tests compare against onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from tensortune.cli.model_commands import parse_duration  # noqa: E402

from .conftest import run_cli  # noqa: E402


def _model(op: str = "Relu"):
    """x[2, 8] @ W[8, 4] + b, then ``op``: a two-kernel-or-less model in a few bytes."""
    rng = np.random.default_rng(0)
    inits = [
        numpy_helper.from_array(rng.standard_normal((8, 4)).astype(np.float32), "W"),
        numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "b"),
    ]
    nodes = [
        helper.make_node("MatMul", ["x", "W"], ["xw"], "matmul"),
        helper.make_node("Add", ["xw", "b"], ["h"], "bias"),
        helper.make_node(op, ["h"], ["y"], "act"),
    ]
    graph = helper.make_graph(
        nodes,
        "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("models")
    onnx.save(_model(), root / "tiny.onnx")
    x = np.random.default_rng(1).standard_normal((2, 8)).astype(np.float32)
    np.save(root / "x.npy", x)
    return root, x


def _error(proc) -> str:
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    return lines[0]


def test_durations():
    assert parse_duration("20m") == 1200 and parse_duration("90") == 90
    assert parse_duration("1h30m") == 5400 and parse_duration("2.5s") == 2.5
    for bad in ("", "abc", "0", "5x"):
        with pytest.raises(argparse.ArgumentTypeError):
            parse_duration(bad)


def test_run_matches_onnxruntime(files):
    root, x = files
    proc = run_cli(
        "run", str(root / "tiny.onnx"), "--db", str(root / "db.sqlite"),
        "--input", str(root / "x.npy"), "-o", str(root / "y.npy"),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "wrote y [2, 4] float32" in proc.stdout
    want = ort.InferenceSession(str(root / "tiny.onnx")).run(None, {"x": x})[0]
    got = np.load(root / "y.npy")
    assert np.abs(got - want).max() / np.abs(want).max() < 1e-4


def test_bench_and_export(files):
    root, _ = files
    db = str(root / "db.sqlite")  # never the user's database
    proc = run_cli("bench", str(root / "tiny.onnx"), "--db", db, "--rounds", "2", "--threads", "1")
    assert proc.returncode == 0, proc.stderr
    assert "speed vs ONNX Runtime" in proc.stdout and "max error vs ONNX Runtime" in proc.stdout
    assert "onnxruntime" in proc.stdout and "median of 2 interleaved rounds" in proc.stdout
    proc = run_cli(
        "export", str(root / "tiny.onnx"), "--db", db, "-o", str(root / "out"), "--name", "tiny"
    )
    assert proc.returncode == 0, proc.stderr
    for name in ("libtiny.so", "tiny.h", "tiny.weights", "tiny.c"):
        assert (root / "out" / name).is_file()


def test_tune_model_with_a_budget_too_small_to_start(files):
    root, _ = files
    db = root / "tune.db"
    proc = run_cli("tune-model", str(root / "tiny.onnx"), "--budget", "1s", "--db", str(db))
    assert proc.returncode == 0, proc.stderr
    assert "skipped" in proc.stdout and "tuned 0 of 1 kernels of 'tiny'" in proc.stdout
    assert _error(run_cli("tune-model", str(root / "tiny.onnx"), "--budget", "soon")).startswith(
        "error: argument --budget"
    )


def test_bad_input_is_one_error_line(files):
    root, x = files
    model = str(root / "tiny.onnx")
    onnx.save(_model("Hardmax"), root / "unsupported.onnx")
    assert "unsupported operator Hardmax in node 'act'" in _error(
        run_cli("run", str(root / "unsupported.onnx"), "--input", "x.npy", "-o", "y.npy")
    )
    (root / "corrupt.onnx").write_bytes(b"\x08\x07garbage" * 3)
    assert "corrupt or truncated" in _error(
        run_cli("bench", str(root / "corrupt.onnx"), "--rounds", "1")
    )
    np.save(root / "wide.npy", x.astype(np.float64))
    np.save(root / "short.npy", x[:1])
    assert "must be (2, 8) float32, got (2, 8) float64" in _error(
        run_cli("run", model, "--input", str(root / "wide.npy"), "-o", str(root / "o.npy"))
    )
    assert "got (1, 8) float32" in _error(
        run_cli("run", model, "--input", str(root / "short.npy"), "-o", str(root / "o.npy"))
    )
    assert "cannot read input 'x'" in _error(
        run_cli("run", model, "--input", str(root / "none.npy"), "-o", str(root / "o.npy"))
    )
    assert "no ONNX model file" in _error(run_cli("export", str(root / "nope.onnx"), "-o", "d"))


def test_profile_prints_every_call(files):
    root, _ = files
    db = str(root / "db.sqlite")
    proc = run_cli("profile", str(root / "tiny.onnx"), "--db", db, "--rounds", "3")
    assert proc.returncode == 0, proc.stderr
    assert "1 kernel calls" in proc.stdout and "tiny_00_matmul_add_relu" in proc.stdout
    assert "MatMul+Add+Relu" in proc.stdout and "100.0%" in proc.stdout
    assert "whole model.run" in proc.stdout and "medians of 3 rounds" in proc.stdout
