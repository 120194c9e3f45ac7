"""Best-so-far vs trials for every search strategy, 3 seeds each, on matmul 1024^3 and
conv2d C=64,H=W=56,K=64,3x3,pad 1; a table and a plot.

    python benchmarks/strategies.py [--trials 96] [--seeds 3] [--db strategies.db]
                                    [--only conv] [-o strategies.png]

Every distinct config is compiled and timed once and kept in --db (a tensortune tuning
database), so all strategies are scored against the same measurements (as Kernel Tuner does)
and a rerun costs nothing for configs already measured. Strategies are built as ``tune`` builds
them (``make_tuning_strategy``), so the model sees each candidate's lowered loop nest. Prints,
per workload, how many trials the model-based search and random search need to reach 95% of
the best config found by any run.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import tensortune as tt
from tensortune.database import open_database
from tensortune.measure.runner import Runner
from tensortune.search.registry import STRATEGIES, make_tuning_strategy
from tensortune.space.registry import design_space
from tensortune.space.space import SearchSpace
from tensortune.tuning.loop import measure_configs, record_of

WORKLOADS = ["matmul:M=1024,N=1024,K=1024", "conv2d:C=64,H=56,W=56,K=64,R=3,S=3,pad=1"]


class MeasuredCosts:
    """Seconds per config, measured on first request and remembered in the database."""

    def __init__(self, wl, target, db, runner):
        self.wl, self.target, self.db, self.runner = wl, target, db, runner
        self.ds = design_space(wl, target)
        self.inputs = wl.random_inputs(0)
        self.reference = wl.reference(self.inputs)
        self.known = {
            r.config_key: (r.seconds if r.ok else math.inf)
            for r in db.records(wl.name, str(target))
        }

    def remember(self, config: dict, trace: list, res) -> None:
        rec = record_of(
            self.wl.name, str(self.target), config, trace, res, strategy="strategies-benchmark"
        )
        self.db.commit_record(rec)
        self.known[rec.config_key] = res.seconds if res.ok else math.inf

    def __call__(self, configs: list[dict]) -> list[float]:
        todo = [c for c in configs if SearchSpace.config_key(c) not in self.known]
        todo = list({SearchSpace.config_key(c): c for c in todo}.values())
        if todo:
            measure_configs(
                self.ds,
                todo,
                self.target,
                self.runner,
                self.inputs,
                self.reference,
                lambda k, trace, res: self.remember(todo[k], trace, res),
            )
        return [self.known[SearchSpace.config_key(c)] for c in configs]


def best_so_far(strategy: str, seed: int, trials: int, costs: MeasuredCosts) -> list[float]:
    search = make_tuning_strategy(strategy, costs.ds, seed=seed)
    curve: list[float] = []
    best = math.inf
    while len(curve) < trials:
        configs = search.ask(min(8, trials - len(curve)))
        if not configs:
            break
        seconds = costs(configs)
        search.tell(configs, seconds)
        for s in seconds:
            best = min(best, s)
            curve.append(best)
    return curve


def trials_to(curve: list[float], goal_seconds: float) -> int | None:
    return next((i + 1 for i, s in enumerate(curve) if s <= goal_seconds), None)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=96)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--db", default="strategies.db")
    ap.add_argument("--strategies", default=",".join(STRATEGIES))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--only", help="run only the workloads whose spec contains this text")
    ap.add_argument("-o", "--output", default="strategies.png")
    args = ap.parse_args()
    target = tt.Target.detect(num_threads=args.threads)
    names = args.strategies.split(",")
    curves: dict[str, dict[str, list[list[float]]]] = {}
    with open_database(args.db) as db, Runner(timeout=10, target=target) as runner:
        for spec in [w for w in WORKLOADS if args.only is None or args.only in w]:
            wl = tt.workload(spec)
            costs = MeasuredCosts(wl, target, db, runner)
            curves[spec] = {
                name: [best_so_far(name, seed, args.trials, costs) for seed in range(args.seeds)]
                for name in names
            }
            print(f"{spec}: {len(costs.known)} distinct configs measured", flush=True)
    report(curves, args.trials, args.output)


def report(curves, trials: int, output: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(curves), figsize=(7 * len(curves), 4.5))
    for ax, (spec, by_strategy) in zip(np.atleast_1d(axes), curves.items(), strict=True):
        flops = tt.workload(spec).flops
        overall = min(min(c) for runs in by_strategy.values() for c in runs)
        goal = overall / 0.95  # 95% of the best throughput found by any run
        print(f"\n{spec}  (best found: {flops / overall / 1e9:.1f} GFLOP/s)")
        print(
            f"{'strategy':16s} {'best GFLOP/s (mean of seeds)':>30s} {'trials to 95% of best':>24s}"
        )
        for name, runs in by_strategy.items():
            finals = [flops / min(c) / 1e9 for c in runs if c and math.isfinite(min(c))]
            reach = [trials_to(c, goal) for c in runs]
            reach_s = ", ".join("-" if r is None else str(r) for r in reach)
            mean = statistics.mean(finals) if finals else float("nan")
            print(f"{name:16s} {mean:30.1f} {reach_s:>24s}")
            width = max(len(c) for c in runs)
            gf = np.array(
                [[flops / s / 1e9 if math.isfinite(s) else 0 for s in _pad(c, width)] for c in runs]
            )
            ax.plot(np.arange(1, width + 1), gf.mean(axis=0), label=name)
        for name in ("model", "random"):
            if name in by_strategy:
                reach = [trials_to(c, goal) for c in by_strategy[name]]
                known = [r for r in reach if r is not None]
                med = statistics.median(known) if len(known) == len(reach) else None
                print(
                    f"  {name}: median trials to 95% of best = "
                    f"{med if med else 'not reached by every seed'}"
                )
        ax.set_title(spec)
        ax.set_xlabel("trial")
        ax.set_ylabel("best-so-far GFLOP/s (mean of seeds)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(output, dpi=110)
    print(f"\nplot: {output} ({trials} trials per run)")


def _pad(curve: list[float], width: int) -> list[float]:
    return curve + [curve[-1]] * (width - len(curve)) if curve else [math.inf] * width


if __name__ == "__main__":
    main()
