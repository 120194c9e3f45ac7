"""What the generated C costs to compile, before and after a change to the compiler.

For the design-space default and a few seeded sample configs of each standard-suite workload,
and with ``--db`` for the best config a tuning database holds for it, prints the lines of C each
candidate generates and the gcc wall time to build it, for the code of commit ``--before``
(extracted with ``git archive`` into a temporary folder and run in a subprocess, so the
repository's checkout and worktrees stay as they are) and for this checkout, with their ratios.
The configs are drawn from this checkout's design spaces; one the old code refuses is listed as
skipped. The target is pinned (``--isa``, two threads, fixed caches) so the numbers do not
depend on this CPU; the best configs are those tuned for that ISA at two threads. ``--only``
(repeatable) splits a long run by workload.

    python benchmarks/compile_cost.py --samples 2 [--only matmul --only conv2d] [--db suite.db]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
START_COMMIT = "1260d1ce874c2b840b45ef7d4f455cbd5e6e3a5c"  # before issue 13's codegen passes
CFLAGS = ("-O3", "-std=gnu11", "-fopenmp", "-fPIC", "-shared")
ISA_FLAGS = {  # fixed spellings, so the figures do not depend on this CPU
    "avx2": ("-mavx2", "-mfma"),
    "avx512": ("-march=x86-64-v4", "-mprefer-vector-width=512"),
}

# Run inside either tree: read [[spec, config, neutral], ...] on stdin, write one C file per
# candidate. A knob this tree's space lacks is dropped where the config sets it to the choice that
# means "absent" (``neutral``, from this checkout's Knob.absent_means): the same program either way.
WORKER = r"""
import dataclasses, json, sys
import tensortune as tt
from tensortune.space.registry import design_space
from tensortune.pipeline import build_source
try:
    from tensortune.target import Target
except ImportError:
    from tensortune.target.target import Target
target = dataclasses.replace(Target.cross(sys.argv[2], num_threads=2), name="pinned",
    l1d_bytes=32768, l2_bytes=1048576, l3_bytes=33554432)
out = []
for n, (spec, config, neutral) in enumerate(json.load(sys.stdin)):
    try:
        ds = design_space(tt.workload(spec), target)
        known = {k.name for k in ds.space.knobs}
        new = [k for k in config if k not in known and config[k] != neutral.get(k, config[k])]
        if new:
            raise ValueError(f"knob {new[0]}={config[new[0]]!r} is newer than this code")
        sch = ds.schedule({k: v for k, v in config.items() if k in known})
        src, _ = build_source(sch, "kernel", target)
    except Exception as e:
        out.append({"error": f"{type(e).__name__}: {e}"})
        continue
    path = f"{sys.argv[1]}/c{n}.c"
    open(path, "w").write(src)
    out.append({"path": path})
print(json.dumps(out))
"""

SAMPLE = r"""
import dataclasses, json, sys
import numpy as np
import tensortune as tt
from tensortune.space.registry import design_space
from tensortune.target import Target
target = dataclasses.replace(Target.cross(sys.argv[1], num_threads=2), name="pinned",
    l1d_bytes=32768, l2_bytes=1048576, l3_bytes=33554432)
specs, samples, seed = json.load(sys.stdin)
out = []
for spec in specs:
    ds = design_space(tt.workload(spec), target)
    neutral = {k.name: k.absent_means for k in ds.space.knobs if k.absent_means is not None}
    out.append([spec, "default", dict(ds.default), neutral])
    for k, c in enumerate(ds.space.sample(np.random.default_rng(seed), samples)):
        out.append([spec, f"sample{k}", dict(c), neutral])
print(json.dumps(out, default=str))
"""


def extract(revision: str, dest: Path) -> None:
    """The package as it was at ``revision``, written below ``dest`` (no checkout, no worktree)."""
    try:
        archive = subprocess.run(
            ["git", "archive", "--format=tar", revision, "tensortune"],
            cwd=ROOT,
            capture_output=True,
            check=True,
        ).stdout
    except subprocess.CalledProcessError as e:
        sys.exit(f"error: cannot read revision {revision!r}: {e.stderr.decode().strip()}")
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(dest, filter="data")


def run_python(code: str, tree: Path, stdin: object, *args: str) -> object:
    """Run ``code`` with ``tree``'s tensortune; its last line of stdout, parsed as JSON."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run(
        [sys.executable, "-c", code, *args],
        input=json.dumps(stdin),
        capture_output=True,
        text=True,
        cwd=tree,
        env=env,
    )
    if done.returncode != 0:
        sys.exit(f"error: the worker failed in {tree}:\n{done.stderr.strip()}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def gcc_seconds(paths: list[str], repeat: int, isa: str) -> list[float]:
    """Median wall time of building each of ``paths`` into a shared library; they are built in
    turn (before, after, before, ...) so a drift in the machine's speed falls on all alike."""
    cc = os.environ.get("CC", "gcc")
    times: list[list[float]] = [[] for _ in paths]
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(repeat):
            for path, mine in zip(paths, times, strict=True):
                t0 = time.perf_counter()
                command = [cc, *CFLAGS, *ISA_FLAGS[isa], path, "-o", f"{tmp}/k.so", "-lm"]
                subprocess.run(command, check=True)
                mine.append(time.perf_counter() - t0)
    return [statistics.median(t) for t in times]


def c_lines(path: str) -> int:
    """Lines of the kernel function itself (the helper preamble is shared by all)."""
    text = Path(path).read_text()
    start = text.find("\nint kernel(")
    return text[start:].count("\n") if start >= 0 else text.count("\n")


def best_configs(neutral: dict[str, dict], db_path: str, target_key: str) -> list[list]:
    """[spec, "best", config, neutral knobs] for each spec (a key of ``neutral``) the database
    holds a best config of."""
    import tensortune as tt
    from tensortune.database import open_database

    found = []
    with open_database(db_path, readonly=True) as db:
        for spec in neutral:
            best = db.best(tt.workload(spec).name, target_key)
            if best is None:
                print(f"{spec}: no record for {target_key} in {db_path}")
            else:
                found.append([spec, "best", dict(best.config), neutral[spec]])
    return found


def main() -> None:
    from tune_suite import SUITE

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", default=START_COMMIT, help="git revision of the old compiler")
    ap.add_argument("--samples", type=int, default=2, help="seeded sample configs per workload")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=5, help="gcc runs per candidate (median)")
    ap.add_argument(
        "--only",
        action="append",
        default=[],
        help="only workloads whose spec contains this (repeatable: any of them)",
    )
    ap.add_argument("--isa", default="avx2", choices=sorted(ISA_FLAGS), help="pinned ISA level")
    ap.add_argument("--db", help="also each workload's best config tuned for --isa at 2 threads")
    args = ap.parse_args()
    specs = [s for s in SUITE if not args.only or any(part in s for part in args.only)]
    if not specs:
        sys.exit(f"error: no suite workload contains any of {args.only}")
    candidates = run_python(SAMPLE, ROOT, [specs, args.samples, args.seed], args.isa)
    if args.db:
        neutral = {spec: knobs for spec, _, _, knobs in candidates}
        candidates += best_configs(neutral, args.db, f"{args.isa}-2t")
    jobs = [[spec, config, knobs] for spec, _, config, knobs in candidates]
    with (
        tempfile.TemporaryDirectory() as old_tree,
        tempfile.TemporaryDirectory() as d_before,
        tempfile.TemporaryDirectory() as d_after,
    ):
        extract(args.before, Path(old_tree))
        before = run_python(WORKER, Path(old_tree), jobs, d_before, args.isa)
        after = run_python(WORKER, ROOT, jobs, d_after, args.isa)
        w = max(len(spec) for spec, *_ in candidates)
        print(f"{'workload':{w}} {'config':8} {'lines':>13} {'ratio':>6} {'gcc s':>13} ratio")
        sums = [0, 0, 0.0, 0.0]
        for (spec, label, _, _), b, a in zip(candidates, before, after, strict=True):
            if "error" in b or "error" in a:
                print(f"{spec:{w}} {label:8} skipped: {b.get('error') or a.get('error')}")
                continue
            lb, la = c_lines(b["path"]), c_lines(a["path"])
            tb, ta = gcc_seconds([b["path"], a["path"]], args.repeat, args.isa)
            sums = [sums[0] + lb, sums[1] + la, sums[2] + tb, sums[3] + ta]
            print(
                f"{spec:{w}} {label:8} {lb:>6}→{la:<6} {la / lb:6.2f} "
                f"{tb:6.2f}→{ta:<6.2f} {ta / tb:6.2f}",
                flush=True,
            )
        if sums[0]:
            print(
                f"{'total':{w}} {'':8} {sums[0]:>6}→{sums[1]:<6} {sums[1] / sums[0]:6.2f} "
                f"{sums[2]:6.2f}→{sums[3]:<6.2f} {sums[3] / sums[2]:6.2f}"
            )


if __name__ == "__main__":
    main()
