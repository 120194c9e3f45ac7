"""A workload with constant inputs is tuned as a compiled model runs it: candidates (and the
reference they are timed beside) are split at the constants, the worker runs each prepack once
and times the per-call kernel; records land under the key naming the constants, and
``tt.compile(db=, constants=)`` builds from them. A workload without constants is untouched."""

import numpy as np
import pytest

import tensortune as tt
from tensortune.database import open_database
from tensortune.measure.runner import Runner
from tensortune.pipeline import build_source
from tensortune.space.registry import design_space
from tensortune.tuning.candidates import measure_configs, prepare
from tensortune.tuning.measuring import measuring_here

SPEC = "conv2d:C=8,H=6,W=6,K=16,R=3,S=3,pad=1"


@pytest.fixture(scope="module")
def packed_space(target):
    return design_space(tt.workload(SPEC).with_constants(["W"]), target)


class Recording(Runner):
    """A Runner keeping the requests it was given."""

    requests: list

    def run(self, candidates, on_result=None):
        self.requests = [*getattr(self, "requests", []), *candidates]
        return super().run(candidates, on_result)


def test_a_candidate_is_built_split_at_the_constants(packed_space, target):
    _, (source, *_), entry = prepare(packed_space, packed_space.default, target)
    assert "int conv2d_prepack(" in source and "constant inputs: W" in source
    assert entry.name == "conv2d" and entry.prepack is not None
    assert entry.prepack.inputs == ("X", "W")
    assert [a.name for a in entry.prepack.args if a.role == "input"] == ["W"]
    assert "W" not in [a.name for a in entry.args]  # the per-call kernel reads the packed copy


def test_candidates_are_checked_and_timed_without_their_prepack(packed_space, target):
    wl = packed_space.workload
    inputs = wl.random_inputs()
    results = {}
    with Recording(timeout=20, target=target) as runner:
        measure_configs(
            packed_space,
            [packed_space.default],
            target,
            runner,
            inputs,
            wl.reference(inputs),
            lambda i, trace, res: results.setdefault(i, res),
        )
    assert results[0].ok, results[0].error_msg
    (request,) = runner.requests
    assert request.name == "conv2d" and request.prepack is not None


def test_the_reference_is_split_the_same_way(packed_space, target):
    results = []
    with measuring_here(packed_space, target, 20.0, 0, with_baseline=True) as measure:
        measure([packed_space.default], lambda i, trace, res: results.append(res))
    (result,) = results
    assert result.ok, result.error_msg
    assert result.ratio is not None  # timed beside the (prepacked) reference


def test_a_workload_without_constants_builds_the_same_c(target):
    ds = design_space(tt.workload(SPEC), target)
    assert ds.workload.constants == ()
    _, (source, *_), entry = prepare(ds, ds.default, target)
    assert source == build_source(ds.schedule(ds.default), "conv2d", target)[0]
    assert entry.prepack is None and "_prepack" not in source


def test_tuned_records_are_keyed_by_the_constants_and_compile_uses_them(target, tmp_path):
    db = tmp_path / "tuning.db"
    wl = tt.workload(SPEC).with_constants(["W"])
    result = tt.tune(wl, trials=2, strategy="random", db=db, target=target, timeout=20)
    assert result.workload == wl.name and result.best_config is not None
    with open_database(db) as database:
        assert {r.workload for r in database.records()} == {wl.name}
        assert database.records(tt.workload(SPEC).name) == []
    kernel = tt.compile(SPEC, target=target, db=db, constants=["W"])
    assert kernel.prepack is not None
    x, w = wl.random_inputs()
    packed = kernel.prepack(w)
    got = kernel(x, *(packed if isinstance(packed, tuple) else (packed,)))
    np.testing.assert_allclose(got, wl.reference([x, w]), rtol=1e-4, atol=1e-4)


def test_a_fleet_node_builds_the_workload_with_its_constants_from_its_name(packed_space):
    """Nodes get the workload by name; its constants are part of it."""
    from tensortune.tuning.measuring import FleetWorker

    wl = packed_space.workload
    node = FleetWorker(wl.name, packed_space.name, timeout=30.0, seed=0)
    try:
        reply = node({"config": packed_space.default, "threshold": 1.0})
    finally:
        node.close()
    assert reply["result"]["error_kind"] is None, reply["result"]
