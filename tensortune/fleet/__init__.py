"""Measuring on a fleet of machines through Ray: one actor per node builds candidates on the
node's cores and times them one at a time; the coordinator hands out the work, re-queues what a
dead or hung node held, refuses nodes whose CPU differs from the run's, and keeps the accounts.

Only plain data crosses the wire: a task is a dict (a config, a threshold), a reply is a JSON
string; kernels are built on the node that runs them. Ray is an optional extra
(``pip install "tensortune[fleet]"``): this package imports it only when a fleet is opened.
"""

from __future__ import annotations

from .accounting import NodeReport, trials_per_minute
from .cluster import FLEET_EXTRA, import_ray, require
from .node import TARGET_KEY_ENV, NodeActor, node_target_key
from .scheduler import Fleet

__all__ = [
    "FLEET_EXTRA",
    "TARGET_KEY_ENV",
    "Fleet",
    "NodeActor",
    "NodeReport",
    "import_ray",
    "node_target_key",
    "require",
    "trials_per_minute",
]
