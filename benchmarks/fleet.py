"""Trials per minute tuning one workload here, on a one-node fleet (``--fleet auto``: a local
Ray cluster with this machine's cores) and on a local multi-node cluster (several raylets on
this machine, each with its own logical CPUs); and the time from ``tune(fleet="auto")`` to its
first committed measurement.

On one machine the nodes share its cores and its timing lock (measurements never overlap), so
a fleet can only gain by overlapping compiles with timing: each node keeps its cores plus one
candidates in flight, building the next while one is timed, where a run here builds a batch and
then times it. Every run starts from an empty database and includes its start-up and its final
re-measurement; the "search" rate counts from the first to the last trial only.

    pip install "tensortune[fleet]"
    python benchmarks/fleet.py [--workload SPEC] [--trials N] [--nodes N] [--short-final]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tensortune.tuning import TuneState, loop, tune  # after the sys.path line

STORE = 80 * 2**20


def timed_tune(spec: str, trials: int, db: Path, fleet: str | None) -> dict[str, Any]:
    """One run from an empty database: its end-to-end and search-phase rates, and when its
    first trial was committed (seconds after the call)."""
    stamps: list[float] = []

    def progress(state: TuneState) -> None:
        stamps.append(time.perf_counter())

    start = time.perf_counter()
    result = tune(spec, trials=trials, strategy="random", db=db, fleet=fleet, progress=progress)
    search = (
        (len(stamps) - 1) * 60 / (stamps[-1] - stamps[0])
        if len(stamps) > 1 and stamps[-1] > stamps[0]
        else None
    )
    return {
        "result": result,
        "first": stamps[0] - start if stamps else None,
        "search_rate": search,
    }


def show(label: str, run: dict[str, Any]) -> None:
    result = run["result"]
    rate = result.trials_per_minute
    search = run["search_rate"]
    print(
        f"{label:<28} {result.trials:>3} trials in {result.tuning_seconds:6.1f} s: "
        f"{rate or 0:5.1f} trials/min end to end, "
        f"{search or 0:5.1f} in the search, first trial after {run['first'] or 0:5.1f} s"
    )
    for node in result.nodes:
        idle = "-" if node.idle_share is None else f"{node.idle_share:.0%}"
        print(
            f"    node {node.node} {node.state}: built {node.built}, measured {node.measured}, "
            f"idle {idle}"
        )


def multi_node(nodes: int, spec: str, trials: int, db: Path) -> dict[str, Any]:
    """A run on a local cluster of ``nodes`` one-CPU raylets (the head only coordinates)."""
    import ray
    from ray.cluster_utils import Cluster

    head = {"num_cpus": 0, "include_dashboard": False, "object_store_memory": STORE}
    cluster = Cluster(initialize_head=True, head_node_args=head)
    try:
        for _ in range(nodes):
            cluster.add_node(num_cpus=1, object_store_memory=STORE)
        return timed_tune(spec, trials, db, cluster.address)
    finally:
        ray.shutdown()
        cluster.shutdown()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workload", default="matmul:M=64,N=64,K=64")
    parser.add_argument("--trials", type=int, default=8)
    parser.add_argument("--nodes", type=int, default=2, help="nodes of the local cluster")
    parser.add_argument(
        "--short-final",
        action="store_true",
        help="re-time only the default at the end (the same work in every mode; a short run)",
    )
    args = parser.parse_args()
    if args.short_final:
        loop.CONFIRM_ROUNDS, loop.CONFIRM_TOP = 0, 1
    with tempfile.TemporaryDirectory(prefix="tensortune-fleet-bench-") as tmp:
        dbs = Path(tmp)
        print(f"{args.workload}, {args.trials} trials, random search, each from an empty database")
        show("here (no fleet)", timed_tune(args.workload, args.trials, dbs / "here.db", None))
        auto = timed_tune(args.workload, args.trials, dbs / "auto.db", "auto")
        show("fleet auto (1 node)", auto)
        show(
            f"local cluster ({args.nodes} nodes)",
            multi_node(args.nodes, args.workload, args.trials, dbs / "nodes.db"),
        )
        print(f"--fleet auto to the first committed measurement: {auto['first']:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
