"""Tune your own computation in your own search space, then compile the best schedule found.

    python examples/own_search_space.py [TRIALS]   # a tiny tune: 2 trials by default

A search space is data (knobs with finite choices, named constraints); a *design space* pairs
it with the function that turns a config into a schedule, and its default config is the
reference every candidate is timed beside. ``register_space`` names it for an op: ``tune``
then searches it, measures and records every candidate like a built-in space's, and
``compile(..., db=)`` rebuilds the best record's schedule through it. A record stores the
space's name and the config, never code: in a process that has not registered the space, its
records are passed over and the op gets the generic space.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np

import tensortune as tt
from tensortune import te
from tensortune.database import open_database
from tensortune.space import Constraint, DesignSpace, Knob, SearchSpace, register_space
from tensortune.target import Target

M, N, K = 16, 32, 16


def matmul_relu(m: int = M, n: int = N, k_: int = K) -> tt.Workload:
    """relu(A @ B) as a workload: the program, its calling convention (A, B) and its flops.
    The name keys the database, so it spells out every parameter."""
    A = te.placeholder((m, k_), name="A")
    B = te.placeholder((k_, n), name="B")
    k = te.reduce_axis(k_, name="k")
    C = te.compute((m, n), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    D = te.compute((m, n), lambda i, j: te.max(C[i, j], 0.0), name="D")
    params = (("M", m), ("N", n), ("K", k_))
    name = "matmul_relu:" + ",".join(f"{key}={value}" for key, value in params)
    return tt.Workload(name, "matmul_relu", params, (A, B), (D,), flops=2.0 * m * n * k_)


def matmul_relu_space(wl: tt.Workload, target: Target) -> DesignSpace:
    """The README's "Your own search space", for any shape of the op."""
    rows = wl.outputs[0].shape[0]
    space = SearchSpace(
        [Knob("tile_i", (1, 2, 4, 8)), Knob("lanes", (4, 8, 16)), Knob("parallel", (True, False))],
        [Constraint("enough_rows", lambda c: rows % c["tile_i"] == 0)],
    )

    def build(config: dict) -> tt.Schedule:
        s = tt.Schedule(wl.outputs)
        io, _ = s.split("D", "i", config["tile_i"])
        _, lanes = s.split("D", "j", config["lanes"])
        s.vectorize("D", lanes)
        if config["parallel"]:
            s.parallel("D", io)
        return s

    default = {"tile_i": 8, "lanes": 8, "parallel": True}
    return DesignSpace(wl, target, space, build, default)


register_space("matmul_relu", matmul_relu_space)


def main(db: Path, trials: int = 2) -> None:
    """Tune, show what the database recorded, compile the winner and check it."""
    wl = matmul_relu()
    result = tt.tune(wl, trials=trials, strategy="random", db=db)
    print(f"tuned {result.workload}: {result.trials} trials, best config {result.best_config}")
    with open_database(db, readonly=True) as database:
        spaces = sorted({rec.space for rec in database.records(wl.name)})
    print(f"records name the space: {spaces}")

    kernel = tt.compile(wl, db=db)  # the best record, rebuilt through the registered space
    a, b = wl.random_inputs()
    assert np.allclose(kernel(a, b), np.maximum(a @ b, 0), rtol=1e-4, atol=1e-4)
    print("compiled the best schedule: matches NumPy")


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:  # a scratch database: leave the shared one alone
        main(Path(tmp) / "own_space.db", trials=int(sys.argv[1]) if len(sys.argv) > 1 else 2)
