"""Connecting to a Ray cluster and listing the nodes that can take work."""

from __future__ import annotations

import os
import re
import socket
from dataclasses import dataclass
from types import ModuleType

from ..errors import EnvironmentFailure, MissingDependency, TensorTuneError

FLEET_EXTRA = 'pip install "tensortune[fleet]"'
_ADDRESS = re.compile(r"(ray://)?[A-Za-z0-9._\-\[\]:]+:\d+")
_LOCAL_OBJECT_STORE = 80 * 2**20
"""Bytes of object store a local cluster started by ``auto`` gets: tasks and replies are small."""


def import_ray() -> ModuleType:
    """The ``ray`` module, or a MissingDependency that names the extra to install."""
    try:
        import ray
    except ImportError:
        raise MissingDependency(
            f"tuning on a fleet (--fleet / tune(fleet=)) needs Ray: {FLEET_EXTRA}"
        ) from None
    return ray


def check_address(address: str) -> str:
    """``address`` if it names a cluster: ``auto``, ``ray://HOST:PORT`` or ``HOST:PORT``."""
    if address == "auto" or _ADDRESS.fullmatch(address):
        return address
    raise TensorTuneError(
        f"fleet address {address!r} is not one: use 'auto' (a local cluster), "
        "'ray://HOST:PORT' (Ray client) or 'HOST:PORT' (the head node's GCS address)"
    )


def require(address: str) -> None:
    """Fail now, before any work, if ``address`` names no cluster or Ray is not installed."""
    check_address(address)
    import_ray()


def connect(address: str) -> bool:
    """Connect this process to the cluster at ``address``; True if this call connected it (and
    so must disconnect), False when the caller had already connected to one.

    ``auto`` joins the cluster running on this machine (``ray start --head``) or, when there is
    none, starts one with this machine's cores."""
    require(address)
    ray = import_ray()
    if ray.is_initialized():
        return False
    quiet = {"log_to_driver": False, "logging_level": "WARNING"}
    try:
        if address != "auto":
            ray.init(address=address, **quiet)
            return True
        running = _running_cluster(ray)
        if running is not None:
            ray.init(address=running, **quiet)
        else:  # "local": Ray would otherwise wait minutes on the head a stale record names
            local = {"include_dashboard": False, "object_store_memory": _LOCAL_OBJECT_STORE}
            ray.init(address="local", **local, **quiet)
    except (ConnectionError, RuntimeError, ValueError, TimeoutError) as exc:
        raise EnvironmentFailure(
            f"cannot connect to the Ray cluster at {address}: {exc}; start one with "
            "`ray start --head` (see the README's 'Tuning on a fleet')"
        ) from exc
    return True


def _running_cluster(ray: ModuleType) -> str | None:
    """The cluster ``auto`` joins: $RAY_ADDRESS, else the one ``ray start`` last recorded on
    this machine, if its head answers (a cluster that was killed leaves its record behind)."""
    address = os.environ.get("RAY_ADDRESS")
    if not address:
        try:
            address = ray._private.utils.read_ray_address()
        except (AttributeError, OSError):  # Ray moved its record: start a local cluster
            return None
    if not address or address.startswith("ray://"):
        return address or None
    host, _, port = address.rpartition(":")
    try:
        socket.create_connection((host, int(port)), timeout=2).close()
    except (OSError, ValueError):
        return None
    return address


@dataclass(frozen=True)
class NodeInfo:
    """A live node of the cluster, as Ray lists it."""

    node_id: str
    host: str
    cpus: int


def alive_nodes() -> list[NodeInfo]:
    """The live nodes with at least one CPU to build on (a head node started with
    ``--num-cpus=0`` only coordinates, so it takes no candidates)."""
    ray = import_ray()
    nodes = []
    for node in ray.nodes():
        cpus = int(node.get("Resources", {}).get("CPU", 0))
        if node.get("Alive") and cpus >= 1:
            host = node.get("NodeManagerHostname") or node.get("NodeManagerAddress", "?")
            nodes.append(NodeInfo(node["NodeID"], str(host), cpus))
    return nodes
