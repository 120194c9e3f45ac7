"""The ONNX backend node tests (``onnx.backend.test``) for every supported operator, run on the
NumPy reference (import, shape inference and semantics) and, one case per operator, compiled.

Node tests at an opset outside 13-21 are run at the nearest opset in that range when the
operator's schema did not change between the two but for element types (same attributes,
inputs and outputs); int64
inputs (shapes, axes, indices) are baked in as constants, since tensortune compiles for static
shapes. Pass counts are printed and every failure is listed (``pytest -s`` shows them).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the graph tests need the optional onnx package")

from onnx import numpy_helper  # noqa: E402

from tensortune.graph import ModelError, compile_model, from_onnx  # noqa: E402
from tensortune.graph.onnx_import import MAX_OPSET, MIN_OPSET, SUPPORTED  # noqa: E402

MIN_REFERENCE_PASSES = 450
"""Cases the reference must pass (463 of 617 selected pass today); raise it as support grows."""


def _schema_key(op: str, version: int):
    schema = onnx.defs.get_schema(op, version)
    inputs = tuple((i.name, i.option) for i in schema.inputs)
    outputs = tuple((o.name, o.option) for o in schema.outputs)
    return sorted(schema.attributes), inputs, outputs


def _prepared(case):
    """The case's model at an opset tensortune reads (or None) with int64 inputs as constants,
    and its data sets as (feeds, expected outputs)."""
    model = onnx.ModelProto()
    model.CopyFrom(case.model)
    opset = next((o for o in model.opset_import if o.domain in ("", "ai.onnx")), None)
    if opset is None:
        return None
    if not MIN_OPSET <= opset.version <= MAX_OPSET:
        nearest = min(max(opset.version, MIN_OPSET), MAX_OPSET)
        for node in model.graph.node:
            try:
                key = _schema_key(node.op_type, opset.version)
                same = key == _schema_key(node.op_type, nearest)
            except Exception:
                same = False
            if not same:
                return None
        opset.version = nearest
    names = [v.name for v in model.graph.input]
    first_inputs = case.data_sets[0][0]
    baked = {}
    for name, value in zip(names, first_inputs, strict=False):
        value = np.asarray(value)
        if value.dtype == np.int64:
            baked[name] = value
            model.graph.initializer.append(numpy_helper.from_array(value, name))
    keep = [v for v in model.graph.input if v.name not in baked]
    del model.graph.input[:]
    model.graph.input.extend(keep)
    sets = []
    for inputs, outputs in case.data_sets:
        feeds = {n: np.asarray(v) for n, v in zip(names, inputs, strict=False) if n not in baked}
        if any(
            not np.array_equal(np.asarray(v), baked[n])
            for n, v in zip(names, inputs, strict=False)
            if n in baked
        ):
            continue
        sets.append((feeds, [np.asarray(o) for o in outputs]))
    return model, sets


@pytest.fixture(scope="module")
def cases():
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        every = collect_testcases("")
    return [
        c
        for c in every
        if c.model is not None and {n.op_type for n in c.model.graph.node} <= SUPPORTED
    ]


def _matches(got: np.ndarray, expected: np.ndarray, case) -> bool:
    if got.shape != expected.shape:
        return False
    if expected.dtype.kind in "fc":
        return bool(np.allclose(got, expected, rtol=case.rtol, atol=case.atol, equal_nan=True))
    return bool(np.array_equal(got, expected))


def test_reference_conformance(cases):
    passed, failed = [], []
    for case in cases:
        prepared = _prepared(case)
        if prepared is None:
            version = case.model.opset_import[0].version
            failed.append((case.name, f"opset {version}: the op differs from opsets 13-21"))
            continue
        model, sets = prepared
        try:
            graph = from_onnx(model)
            ok = all(
                _matches(graph.reference(feeds)[info.name], want, case)
                for feeds, outputs in sets
                for info, want in zip(graph.outputs, outputs, strict=True)
            )
            (passed if ok else failed).append((case.name, "wrong result") if not ok else case.name)
        except ModelError as exc:
            failed.append((case.name, str(exc).splitlines()[0][:150]))
    print(f"\nONNX node tests, reference: {len(passed)}/{len(cases)} passed")
    for name, why in failed:
        print(f"  FAILED {name}: {why}")
    assert not [f for f in failed if f[1] == "wrong result"], "wrong results"
    assert len(passed) >= MIN_REFERENCE_PASSES


def test_compiled_conformance(cases, target):
    """One float32 case per operator (the first the reference passes), compiled and run."""
    done: set[str] = set()
    passed, failed = [], []
    for case in cases:
        ops = {n.op_type for n in case.model.graph.node}
        if len(ops) != 1 or ops <= done:
            continue
        prepared = _prepared(case)
        if prepared is None or not prepared[1]:
            continue
        model, sets = prepared
        feeds, outputs = sets[0]
        if any(v.dtype != np.float32 or 0 in v.shape for v in feeds.values()) or not feeds:
            continue
        try:
            graph = from_onnx(model)
            if not all(
                _matches(graph.reference(feeds)[i.name], o, case)
                for i, o in zip(graph.outputs, outputs, strict=True)
            ):
                continue
            done |= ops
            got = compile_model(graph, target=target).run(feeds)
            ok = all(
                _matches(got[i.name], o, case) for i, o in zip(graph.outputs, outputs, strict=True)
            )
            (passed if ok else failed).append(case.name if ok else (case.name, "wrong result"))
        except ModelError as exc:
            done |= ops
            failed.append((case.name, str(exc).splitlines()[0][:150]))
    total = len(passed) + len(failed)
    print(f"\nONNX node tests, compiled (one per operator): {len(passed)}/{total} passed")
    for name, why in failed:
        print(f"  FAILED {name}: {why}")
    assert not [f for f in failed if f[1] == "wrong result"], failed
    assert len(passed) >= 40
