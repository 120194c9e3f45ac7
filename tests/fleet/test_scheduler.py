"""The coordinator's queue without a cluster: a fake ``ray`` whose nodes answer, hang or die,
so the re-queueing rules are checked in milliseconds, with or without Ray installed."""

from __future__ import annotations

import json
import sys
import time
import types
from collections import Counter

import pytest

from tensortune.errors import EnvironmentFailure
from tensortune.fleet import Fleet, scheduler


class ActorDied(Exception):
    pass


class GetTimeout(ActorDied):  # ray's GetTimeoutError is a RayError too
    pass


class Ref:
    """A call's result: ready with a value, ready with an error, or never ready."""

    def __init__(self, value=None, error=None, ready=True):
        self.value, self.error, self.ready = value, error, ready


class Actor:
    def __init__(self, key: str, behaviour: str):
        self.key, self.behaviour, self.ran, self.gone = key, behaviour, [], False
        for name in ("hello", "start", "run", "stats", "stop"):
            setattr(self, name, types.SimpleNamespace(remote=getattr(self, f"_{name}")))

    def _hello(self):
        return Ref({"target": self.key, "host": self.behaviour})

    def _start(self, factory, init):
        return Ref(None)

    def _run(self, task):
        self.ran.append(task["i"])
        self.gone = self.behaviour == "leaves after its work"  # its process answers on
        if self.behaviour == "hangs":
            return Ref(ready=False)
        if self.behaviour == "dies" or (self.behaviour == "dies later" and len(self.ran) > 2):
            return Ref(error=ActorDied("gone"))
        stats = {"built": 1, "measured": 1, "busy_seconds": 1.0, "up_seconds": 2.0}
        return Ref(json.dumps({"value": {"i": task["i"]}, "stats": stats}))

    def _stats(self):
        if self.behaviour == "dies after its work":
            return Ref(error=ActorDied("gone"))
        if self.behaviour == "silent after its work":
            return Ref(error=GetTimeout("no answer"))
        return Ref({"built": 0, "measured": 0, "busy_seconds": 0.0, "up_seconds": 1.0})

    def _stop(self):
        return Ref(None)


def fake_ray(actors: list[Actor]) -> types.ModuleType:
    ray = types.ModuleType("ray")
    queue = list(reversed(actors))  # actors start in the order of their nodes

    def get(ref, timeout=None):
        if ref.error is not None:
            raise ref.error
        return ref.value

    def wait(refs, num_returns=1, timeout=None):
        ready = [r for r in refs if r.ready][:num_returns]
        if not ready:
            time.sleep(0.01)
        return ready, [r for r in refs if r not in ready]

    remote = types.SimpleNamespace(options=lambda **kw: types.SimpleNamespace(remote=queue.pop))
    ray.remote = lambda cls: remote
    ray.get, ray.wait, ray.kill = get, wait, lambda actor, no_restart=True: None
    ray.is_initialized = lambda: True
    ray.nodes = lambda: [
        {
            "NodeID": f"node{i}",
            "Alive": not a.gone,
            "Resources": {"CPU": 1},
            "NodeManagerHostname": a.behaviour,
        }
        for i, a in enumerate(actors)
    ]
    ray.exceptions = types.SimpleNamespace(
        RayError=ActorDied,
        RayActorError=ActorDied,
        NodeDiedError=ActorDied,
        GetTimeoutError=GetTimeout,
    )
    return ray


@pytest.fixture
def cluster_of(monkeypatch):
    def make(*actors: Actor) -> None:
        ray = fake_ray(list(actors))
        strategies = types.ModuleType("ray.util.scheduling_strategies")
        strategies.NodeAffinitySchedulingStrategy = lambda node_id, soft: node_id
        monkeypatch.setitem(sys.modules, "ray", ray)
        monkeypatch.setitem(sys.modules, "ray.util", types.ModuleType("ray.util"))
        monkeypatch.setitem(sys.modules, "ray.util.scheduling_strategies", strategies)

    monkeypatch.setattr(scheduler, "POLL_SECONDS", 0.01)
    return make


def test_dead_and_hung_nodes_lose_only_what_they_held(cluster_of):
    good, hung, dying = Actor("k", "good"), Actor("k", "hangs"), Actor("k", "dies later")
    cluster_of(good, hung, dying, Actor("other", "foreign"))
    replies = Counter()
    with Fleet("auto", object, {}, "k", stall_seconds=0.2) as fleet:
        fleet.run([{"i": i} for i in range(12)], lambda i, reply: replies.update([reply["i"]]))
        states = {r.host: r.state for r in fleet.report()}
    assert replies == Counter(range(12))  # every task answered, none twice
    assert states == {"good": "ok", "hangs": "hung", "dies later": "died", "foreign": "refused"}
    assert hung.ran and len(dying.ran) > 2  # both held tasks when they were given up on


def test_a_node_that_dies_after_its_last_task_is_reported_dropped(cluster_of):
    cluster_of(
        Actor("k", "good"),
        Actor("k", "dies after its work"),
        Actor("k", "silent after its work"),
        Actor("k", "leaves after its work"),
    )
    with Fleet("auto", object, {}, "k", stall_seconds=5) as fleet:
        fleet.run([{"i": i} for i in range(8)], lambda i, reply: None)
        reports = {r.host: r for r in fleet.report()}
    assert {host: r.state for host, r in reports.items()} == {
        "good": "ok",
        "dies after its work": "died",
        "silent after its work": "hung",
        "leaves after its work": "died",  # its machine left; its orphaned actor still answers
    }
    # a dropped node keeps the accounts its last reply carried
    assert reports["dies after its work"].measured == reports["silent after its work"].measured == 1


def test_no_node_left_is_one_error_naming_each_node(cluster_of):
    cluster_of(Actor("k", "dies"))
    with (
        pytest.raises(EnvironmentFailure, match=r"no node of the fleet is left.*dies died"),
        Fleet("auto", object, {}, "k", stall_seconds=5) as fleet,
    ):
        fleet.run([{"i": 0}], lambda i, reply: None)


def test_a_fleet_of_foreign_nodes_is_refused_at_once(cluster_of):
    cluster_of(Actor("avx2-8t", "a"), Actor("neon-4t", "b"))
    with pytest.raises(EnvironmentFailure, match="can measure for target k: a refused"):
        Fleet("auto", object, {}, "k", stall_seconds=5).__enter__()
