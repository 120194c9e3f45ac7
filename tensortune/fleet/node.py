"""What runs on each node: an actor that hosts the node's worker (which builds and times the
candidates it is sent) and keeps the node's accounts.

The actor itself knows nothing of tuning: it is started with a factory (a class importable on
the node, sent by name) and the plain-data arguments that build the worker there; it answers
every task with a JSON string, so the coordinator never unpickles what a node sends back.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from ..target import Target

TARGET_KEY_ENV = "TENSORTUNE_FLEET_TARGET_KEY"
"""Set in a node's environment (``ray start`` inherits it), it stands in for the node's detected
target key: tests simulate a node with another CPU on one machine this way."""


def node_target_key() -> str:
    """The key this node's measurements would be stored under: ``str(Target.detect())``."""
    return os.environ.get(TARGET_KEY_ENV) or str(Target.detect())


class NodeWorker(Protocol):
    """Builds and times one task's candidate on this node; replies with plain data whose
    ``built`` and ``measured`` say whether it was compiled and timed here."""

    def __call__(self, task: dict[str, Any]) -> dict[str, Any]: ...

    def close(self) -> None: ...


class NodeActor:
    """One per node (pinned to it): hosts the node's worker and counts what the node did.

    Tasks arrive on several threads (the actor's concurrency is the node's cores plus one), so
    compiles overlap; the worker times one candidate at a time."""

    def __init__(self) -> None:
        self.key = node_target_key()
        self._worker: NodeWorker | None = None
        self._lock = threading.Lock()
        self._start = time.monotonic()
        self._active = 0
        self._busy = 0.0
        self._busy_since = 0.0
        self._built = 0
        self._measured = 0

    def hello(self) -> dict[str, Any]:
        """Who this node is: its target key and host name."""
        return {"target": self.key, "host": socket.gethostname()}

    def start(self, factory: Callable[..., NodeWorker], init: dict[str, Any]) -> None:
        """Build the worker here (it sets up its inputs and reference kernel on this node)."""
        self._worker = factory(**init)
        self._start = time.monotonic()

    def run(self, task: dict[str, Any]) -> str:
        """Do one task; the reply (JSON) carries the worker's answer and the node's accounts."""
        if self._worker is None:
            raise RuntimeError("NodeActor.run before start")
        self._account(+1)
        try:
            value = self._worker(task)
        finally:
            self._account(-1)
        with self._lock:
            self._built += bool(value.get("built"))
            self._measured += bool(value.get("measured"))
        return json.dumps({"value": value, "stats": self.stats()})

    def stats(self) -> dict[str, float]:
        """Candidates built and measured, seconds busy (some task running) and seconds up."""
        with self._lock:
            now = time.monotonic()
            busy = self._busy + (now - self._busy_since if self._active else 0.0)
            return {
                "built": self._built,
                "measured": self._measured,
                "busy_seconds": busy,
                "up_seconds": now - self._start,
            }

    def stop(self) -> None:
        """Stop the worker's measurement process before the actor goes."""
        if self._worker is not None:
            self._worker.close()
            self._worker = None

    def _account(self, step: int) -> None:
        with self._lock:
            if step > 0 and self._active == 0:
                self._busy_since = time.monotonic()
            self._active += step
            if step < 0 and self._active == 0:
                self._busy += time.monotonic() - self._busy_since
