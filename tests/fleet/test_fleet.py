"""A fleet on a local Ray cluster: several worker nodes (each its own raylet and logical CPUs)
tune one workload; one node is killed mid-run and one, standing in for another CPU, is
refused. The run must finish on the rest, losing no committed record and measuring no config
twice."""

from __future__ import annotations

import logging
import sys
import time
from collections import Counter

import pytest

from tensortune.database import open_database
from tensortune.errors import MissingDependency, TensorTuneError
from tensortune.fleet import TARGET_KEY_ENV
from tensortune.tuning import loop, tune
from tensortune.tuning.loop import CONFIRM

WORKLOAD = "matmul:M=32,N=32,K=32"
TRIALS = 6
STORE = 80 * 2**20


@pytest.fixture(scope="module")
def cluster():
    """A head that only coordinates, two worker nodes and one node of a 'foreign' target."""
    ray = pytest.importorskip("ray", reason='the fleet needs Ray: pip install "tensortune[fleet]"')
    from ray.cluster_utils import Cluster

    fast_death = {  # a killed node is noticed in about a second, not the default half minute
        "health_check_initial_delay_ms": 0,
        "health_check_period_ms": 300,
        "health_check_failure_threshold": 3,
    }
    head = {"num_cpus": 0, "include_dashboard": False, "object_store_memory": STORE}
    c = Cluster(initialize_head=True, head_node_args={**head, "_system_config": fast_death})
    workers = [c.add_node(num_cpus=1, object_store_memory=STORE) for _ in range(2)]
    c.add_node(num_cpus=1, object_store_memory=STORE, env_vars={TARGET_KEY_ENV: "other-cpu-1t"})
    ray.init(address=c.address, log_to_driver=False, logging_level="WARNING")
    try:
        yield c, workers
    finally:
        ray.shutdown()
        c.shutdown()


def wait_until_dead(node_id: str, seconds: float = 30.0) -> None:
    import ray

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not any(n["NodeID"] == node_id and n["Alive"] for n in ray.nodes()):
            return
        time.sleep(0.1)
    raise AssertionError(f"the cluster still counts node {node_id} alive after {seconds} s")


@pytest.mark.slow
def test_a_killed_node_loses_nothing_and_a_foreign_node_is_refused(
    cluster, tmp_path, caplog, monkeypatch
):
    c, workers = cluster
    # the final re-measures only the default (the loop decides it, the fleet measures it): the
    # fleet is under test here, not the choice of the winner, and each timing costs seconds
    monkeypatch.setattr(loop, "CONFIRM_ROUNDS", 0)
    monkeypatch.setattr(loop, "CONFIRM_TOP", 1)
    db = tmp_path / "fleet.db"
    committed_at_kill: set[tuple[str, str]] = set()

    def kill_one_node_mid_run(state):
        if state.trials_done == 2 and not committed_at_kill:
            with open_database(db) as database:
                committed_at_kill.update((r.config_key, r.strategy) for r in database.records())
            c.remove_node(workers[0], allow_graceful=False)
            # the run goes on once the cluster has noticed (about a second; longer on a loaded
            # CI host), so the last trials cannot finish before the death is known to anyone
            wait_until_dead(workers[0].node_id)

    caplog.set_level(logging.WARNING, logger="tensortune.fleet")
    result = tune(
        WORKLOAD,
        trials=TRIALS,
        strategy="random",
        db=db,
        fleet=c.address,
        progress=kill_one_node_mid_run,
    )

    assert result.trials == TRIALS and result.best_config is not None
    states = Counter(node.state for node in result.nodes)
    assert states == {"ok": 1, "died": 1, "refused": 1}, result.nodes
    lines = [r.getMessage() for r in caplog.records]
    refused = [line for line in lines if "refused" in line]
    assert len(refused) == 1 and "other-cpu-1t" in refused[0]
    assert any("dropped (died" in line for line in lines), lines
    assert sum(n.measured for n in result.nodes if n.state == "ok") > 0
    assert result.trials_per_minute and result.trials_per_minute > 0

    with open_database(db) as database:
        records = database.records(result.workload, result.target)
    kept = {(r.config_key, r.strategy) for r in records}
    assert committed_at_kill and committed_at_kill <= kept
    trials = Counter(r.config_key for r in records if r.strategy != CONFIRM)
    assert sum(trials.values()) == TRIALS
    assert max(trials.values()) == 1, "a config was measured twice"


def test_a_fleet_without_ray_names_the_extra(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    with pytest.raises(MissingDependency, match=r"tensortune\[fleet\]"):
        tune(WORKLOAD, trials=1, db=tmp_path / "t.db", fleet="auto")


def test_a_fleet_address_that_names_no_cluster_is_refused(tmp_path):
    with pytest.raises(TensorTuneError, match=r"use 'auto'.*ray://HOST:PORT"):
        tune(WORKLOAD, trials=1, db=tmp_path / "t.db", fleet="my laptop")
