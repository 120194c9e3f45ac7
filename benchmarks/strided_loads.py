"""Strided window reads before/after: the same schedules printed by an earlier revision (stride 3
and 4 read as lane-by-lane gathers, strided tails lane by lane) and by this tree (contiguous
loads and shuffles, ``tt_load<k>_``, and masked ones in tails, ``tt_maskload<k>_``).

    python benchmarks/strided_loads.py [--before HEAD] [--only LAYER] [--threads 2] [--rounds 30]
                                       [--repeat 5]

``--before`` names the git revision whose printer is "before" (HEAD while the change is not
committed; its parent once it is). For each strided layer of the zoo and schedule below, the
"before" C comes from that revision (``git archive`` into a temporary directory, run in a
subprocess) and is built here with this tree's compiler flags; both kernels are checked against
NumPy and timed in interleaved rounds (``common.rounds_of``). Printed: the median over rounds
of before/after (> 1: this tree is faster) with half its interquartile range, and the ratio of
the two kernels' best rounds, the steadier of the two on a heavily shared host (there, two
identical kernels can differ by tens of percent in the paired median, not in the best round).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common

import tensortune as tt
from tensortune.backend import Artifact, arg_specs, backend_for
from tensortune.pipeline import build_source
from tensortune.space import design_space
from tensortune.workload import zoo

REPO = Path(__file__).resolve().parents[1]

# (zoo layer, config over the design-space default). The stems' defaults run vectors along
# output channels (no strided vector read), so they are timed with tiles along output columns
# (rows fit AVX2's 16 registers); the depthwise convs and the pool are their defaults.
CASES = [
    ("convnext_tiny/features.0.0", {"vector_axis": "columns", "rows": 1, "vectors": 7, "lanes": 8}),
    ("alexnet/features.0", {"vector_axis": "columns", "rows": 1, "vectors": 7, "lanes": 8}),
    ("mobilenet_v2/features.4.conv.1.0", {}),
    ("efficientnet_b0/features.3.0.block.1.0", {}),
    ("inception_v3/maxpool1", {}),
]

PRINT_SOURCE = """
import json, sys
import tensortune as tt
from tensortune.pipeline import build_source
from tensortune.space import design_space
spec, config, threads = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3])
target = tt.Target.detect(num_threads=threads)
space = design_space(tt.workload(spec), target)
sys.stdout.write(build_source(space.schedule({**space.default, **config}), "k", target)[0])
"""


def snapshot(rev: str, into: str) -> None:
    """The ``tensortune`` package as of ``rev``, extracted under ``into``."""
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", rev, "tensortune"], capture_output=True, check=True
    )
    subprocess.run(["tar", "-x", "-C", into], input=archive.stdout, check=True)


def kernels(spec: str, config: dict, target: tt.Target, before_tree: str) -> dict[str, tt.Kernel]:
    """The kernels of one schedule: "before" printed by the snapshot, "after" by this tree."""
    wl = tt.workload(spec)
    space = design_space(wl, target)
    schedule = space.schedule({**space.default, **config})
    source, func = build_source(schedule, "k", target)
    env = {**os.environ, "PYTHONPATH": before_tree}
    old = subprocess.run(
        [sys.executable, "-c", PRINT_SOURCE, spec, json.dumps(config), str(target.num_threads)],
        capture_output=True,
        text=True,
        env=env,
        check=True,
        cwd=before_tree,
    ).stdout
    backend = backend_for(target)
    flags = tuple(backend.flags(schedule))
    out = {}
    for name, src in (("before", old), ("after", source)):
        library = backend.build(src, flags)
        out[name] = backend.load(Artifact(library, func.name, arg_specs(func), src, target, flags))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", default="HEAD", help="git revision printing the 'before' C")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--only", default="", help="substring filter on the zoo layer keys")
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    common.limit_threads(args.threads)
    target = tt.Target.detect(num_threads=args.threads)
    print(f"cpu: {target.name} ({target.isa}, {target.vector_bits}-bit vectors), {target}")
    layers = zoo.by_key()
    with tempfile.TemporaryDirectory() as before_tree:
        snapshot(args.before, before_tree)
        for key, config in (case for case in CASES if args.only in case[0]):
            wl = tt.workload(layers[key].spec)
            pair = kernels(wl.name, config, target, before_tree)
            if pair["before"].source == pair["after"].source:
                print(f"{key:40s} same C before and after", flush=True)
                continue
            inputs = wl.random_inputs(0)
            want = wl.reference(inputs)
            contenders = []
            for name, k in pair.items():
                out = k(*inputs)
                common.check(f"{key} [{name}]", out, want)
                timer = common.kernel_timer(k, [*inputs, out])
                contenders.append(common.Contender(name, lambda: None, timer))
            times = common.rounds_of(contenders, rounds=args.rounds, repeat=args.repeat)
            ms = {n: statistics.median(t) * 1e3 for n, t in times.items()}
            gain = common.paired_ratio(times, "before", "after")
            noise = common.noise(times, "before", "after")
            best = min(times["before"]) / min(times["after"])
            print(
                f"{key:40s} {wl.name}\n  config {config or 'default'}: median before "
                f"{ms['before']:.3f} ms, after {ms['after']:.3f} ms, paired before/after "
                f"{gain:.2f}x +- {noise:.0%}; best round before/after {best:.2f}x",
                flush=True,
            )


if __name__ == "__main__":
    main()
