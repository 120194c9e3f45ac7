"""The coordinator's side of a fleet: start one actor per node, refuse nodes of another target,
hand out tasks, re-queue what a dead or hung node held, and account for every node.

Each node holds at most its cores plus one tasks, so its compiles overlap the one candidate it
is timing; a task is answered once: a reply from a node that was given up on never arrives (its
actor is killed first), and a task is re-queued only when its node is dropped.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..errors import EnvironmentFailure
from .accounting import NodeReport
from .cluster import NodeInfo, alive_nodes, connect, import_ray
from .node import NodeActor, NodeWorker

log = logging.getLogger("tensortune.fleet")

START_SECONDS = 300.0
"""How long a node may take to start its actor and worker (import, reference kernel build)."""
POLL_SECONDS = 1.0
REPORT_SECONDS = 30.0
"""How long a live node may take to send its accounts at the end of a run."""


@dataclass(eq=False)
class _Node:
    info: NodeInfo
    actor: Any
    target: str = ""
    state: str = "ok"
    reason: str = ""
    in_flight: dict[Any, int] = field(default_factory=dict)
    """Object ref of each task the node holds -> the task's index."""
    last_heard: float = 0.0
    stats: dict[str, Any] | None = None

    @property
    def slots(self) -> int:
        return self.info.cpus + 1

    def report(self) -> NodeReport:
        return NodeReport.from_stats(
            self.stats,
            node=self.info.node_id[:12],
            host=self.info.host,
            target=self.target,
            state=self.state,
            reason=self.reason,
        )


class Fleet:
    """The nodes of a Ray cluster measuring one run's candidates (a context manager).

    ``worker`` is a class importable on every node, built there from ``init`` (plain data);
    nodes whose target key is not ``target_key`` are refused with one line on the
    ``tensortune.fleet`` logger. A node that answers nothing for ``stall_seconds`` while it
    holds tasks is dropped as hung."""

    def __init__(
        self,
        address: str,
        worker: Callable[..., NodeWorker],
        init: dict[str, Any],
        target_key: str,
        stall_seconds: float,
    ) -> None:
        self.address = address
        self.worker = worker
        self.init = init
        self.target_key = target_key
        self.stall_seconds = stall_seconds
        self.nodes: list[_Node] = []
        self._owns = False
        self._ray: Any = None

    def __enter__(self) -> Fleet:
        self._ray = import_ray()
        self._owns = connect(self.address)
        try:
            self._start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def run(
        self, tasks: list[dict[str, Any]], on_reply: Callable[[int, dict[str, Any]], None]
    ) -> None:
        """Do every task on some node; ``on_reply(index, reply)`` hears of each once, as soon
        as it is answered. Raises EnvironmentFailure when no node is left to do the rest."""
        ray = self._ray
        queue = deque(range(len(tasks)))
        owner: dict[Any, _Node] = {}
        while queue or owner:
            self._hand_out(queue, tasks, owner)
            if not owner:
                raise EnvironmentFailure(
                    f"no node of the fleet is left to measure {len(queue)} candidate(s): "
                    + "; ".join(f"{n.info.host} {n.state}: {n.reason}" for n in self.nodes)
                )
            ready, _ = ray.wait(list(owner), num_returns=1, timeout=POLL_SECONDS)
            for ref in ready:
                node = owner.pop(ref)
                index = node.in_flight.pop(ref)
                try:
                    reply = json.loads(ray.get(ref))
                except ray.exceptions.RayError as exc:
                    queue.appendleft(index)
                    self._drop(node, _death(exc), owner, queue)
                    continue
                node.last_heard, node.stats = time.monotonic(), reply["stats"]
                on_reply(index, reply["value"])
            now = time.monotonic()
            for node in self._live():
                if node.in_flight and now - node.last_heard > self.stall_seconds:
                    self._drop(
                        node, ("hung", f"no answer for {self.stall_seconds:g} s"), owner, queue
                    )

    def report(self) -> list[NodeReport]:
        """Every node's accounts, refused and dropped ones included. A node that died after its
        last task (so no task of the run failed on it) is found here, and reported as dropped
        with its last accounts: its machine has left the cluster (its actor's process may live
        on for seconds and still answer), or its actor fails or says nothing."""
        ray = self._ray
        alive = {info.node_id for info in alive_nodes()}
        for node in self._live():
            if node.info.node_id not in alive:
                self._drop(node, ("died", "its machine left the cluster"), {}, deque())
                continue
            try:
                node.stats = ray.get(node.actor.stats.remote(), timeout=REPORT_SECONDS)
            except ray.exceptions.GetTimeoutError:
                self._drop(node, ("hung", f"no accounts in {REPORT_SECONDS:g} s"), {}, deque())
            except ray.exceptions.RayError as exc:
                self._drop(node, _death(exc), {}, deque())
        return [node.report() for node in self.nodes]

    def close(self) -> None:
        """Stop every node's worker and actor; disconnect if this fleet connected."""
        ray = self._ray
        if ray is None:
            return
        stops = [n.actor.stop.remote() for n in self._live()]
        with contextlib.suppress(Exception):
            ray.wait(stops, num_returns=len(stops), timeout=30)
        for node in self.nodes:
            with contextlib.suppress(Exception):
                ray.kill(node.actor, no_restart=True)
        if self._owns:
            ray.shutdown()
        self._ray = None

    def _start(self) -> None:
        """One actor per node; refuse the nodes of another target, start the others' workers."""
        ray = self._ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        remote = ray.remote(NodeActor)
        for info in alive_nodes():
            actor = remote.options(
                num_cpus=0,  # builds and timing use the node's cores; Ray schedules nothing else
                max_concurrency=info.cpus + 1,
                scheduling_strategy=NodeAffinitySchedulingStrategy(info.node_id, soft=False),
            ).remote()
            self.nodes.append(_Node(info, actor))
        if not self.nodes:
            raise EnvironmentFailure(
                f"the Ray cluster at {self.address} has no live node with a CPU to build on"
            )
        hellos = {n.actor.hello.remote(): n for n in self.nodes}
        for node, hello in self._answers(hellos):
            node.target = hello["target"]
            if node.target != self.target_key:
                node.state, node.reason = (
                    "refused",
                    f"its target key {node.target!r} differs from the run's {self.target_key!r}",
                )
                log.warning("fleet: node %s refused: %s", node.info.host, node.reason)
                with contextlib.suppress(Exception):
                    ray.kill(node.actor, no_restart=True)
        starts = {n.actor.start.remote(self.worker, self.init): n for n in self._live()}
        self._answers(starts)
        now = time.monotonic()
        for node in self._live():
            node.last_heard = now
        if not self._live():
            raise EnvironmentFailure(
                f"no node of the fleet at {self.address} can measure for target "
                f"{self.target_key}: "
                + "; ".join(f"{n.info.host} {n.state}: {n.reason}" for n in self.nodes)
            )

    def _answers(self, calls: dict[Any, _Node]) -> list[tuple[_Node, Any]]:
        """Wait for one call per node: the answer of each node that gave one; a node that fails
        or does not answer within START_SECONDS is dropped."""
        ray = self._ray
        ready, late = ray.wait(list(calls), num_returns=len(calls), timeout=START_SECONDS)
        answers = []
        for ref in ready:
            try:
                answers.append((calls[ref], ray.get(ref)))
            except ray.exceptions.RayError as exc:
                self._drop(calls[ref], _death(exc), {}, deque())
        for ref in late:
            self._drop(calls[ref], ("hung", f"did not start in {START_SECONDS:g} s"), {}, deque())
        return answers

    def _hand_out(self, queue: deque[int], tasks: list[dict[str, Any]], owner: dict) -> None:
        """Give queued tasks to the live nodes in turn, each up to its slots."""
        while queue:
            free = [n for n in self._live() if len(n.in_flight) < n.slots]
            if not free:
                return
            for node in free:
                if not queue:
                    return
                index = queue.popleft()
                if not node.in_flight:
                    node.last_heard = time.monotonic()  # the stall clock runs while it holds work
                ref = node.actor.run.remote(tasks[index])
                node.in_flight[ref] = index
                owner[ref] = node

    def _drop(self, node: _Node, why: tuple[str, str], owner: dict, queue: deque[int]) -> None:
        """Give up on ``node``: kill its actor and put the tasks it held back in the queue."""
        if node.state != "ok":
            return
        node.state, node.reason = why
        held = list(node.in_flight.values())
        for ref in node.in_flight:
            owner.pop(ref, None)
        node.in_flight.clear()
        queue.extendleft(sorted(held, reverse=True))
        log.warning(
            "fleet: node %s dropped (%s: %s); %d candidate(s) it held re-queued",
            node.info.host,
            node.state,
            node.reason,
            len(held),
        )
        with contextlib.suppress(Exception):
            self._ray.kill(node.actor, no_restart=True)

    def _live(self) -> list[_Node]:
        return [n for n in self.nodes if n.state == "ok"]


def _death(exc: Exception) -> tuple[str, str]:
    """How a node failed, from the error its call raised: its actor or machine died, or the
    worker raised (a broken environment on that node)."""
    ray = import_ray()
    if isinstance(exc, ray.exceptions.RayActorError | ray.exceptions.NodeDiedError):
        return "died", "its actor or machine went away"
    first = str(exc).strip().splitlines()
    return "failed", first[-1] if first else type(exc).__name__
