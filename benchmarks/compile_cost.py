"""What the generated C costs to compile, before and after a change to the compiler.

For the design-space default and a few seeded sample configs of each standard-suite workload,
and with ``--db`` for the best config a tuning database holds for it, prints the lines of C each
candidate generates and the gcc wall time to build it, for the code of commit ``--before``
(checked out in a git worktree and run in a subprocess) and for this checkout, with their
ratios. The target is pinned (``--isa``, two threads, fixed caches) so the numbers do not
depend on this CPU; the best configs are those tuned for that ISA at two threads.

    python benchmarks/compile_cost.py --before 1260d1c --samples 2 [--db suite.db --isa avx512]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
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

# Run inside either tree: read [[spec, config], ...] on stdin, write one C file per candidate.
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
for n, (spec, config) in enumerate(json.load(sys.stdin)):
    try:
        ds = design_space(tt.workload(spec), target)
        sch = ds.schedule(config)
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
    out.append([spec, "default", dict(ds.default)])
    for k, c in enumerate(ds.space.sample(np.random.default_rng(seed), samples)):
        out.append([spec, f"sample{k}", dict(c)])
print(json.dumps(out, default=str))
"""


def run_python(code: str, tree: Path, stdin: object, *args: str) -> object:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run(
        [sys.executable, "-c", code, *args],
        input=json.dumps(stdin),
        capture_output=True,
        text=True,
        cwd=tree,
        env=env,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def gcc_seconds(path: str, repeat: int, isa: str) -> float:
    """Median wall time of building ``path`` into a shared library."""
    cc = os.environ.get("CC", "gcc")
    times = []
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(repeat):
            t0 = time.perf_counter()
            command = [cc, *CFLAGS, *ISA_FLAGS[isa], path, "-o", f"{tmp}/k.so", "-lm"]
            subprocess.run(command, check=True)
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


def c_lines(path: str) -> int:
    """Lines of the kernel function itself (the helper preamble is shared by all)."""
    text = Path(path).read_text()
    start = text.find("\nint kernel(")
    return text[start:].count("\n") if start >= 0 else text.count("\n")


def best_configs(specs: list[str], db_path: str, target_key: str) -> list[list]:
    """[spec, "best", config] for each spec the database holds a best config of."""
    import tensortune as tt
    from tensortune.database import open_database

    found = []
    with open_database(db_path) as db:
        for spec in specs:
            best = db.best(tt.workload(spec).name, target_key)
            if best is None:
                print(f"{spec}: no record for {target_key} in {db_path}")
            else:
                found.append([spec, "best", dict(best.config)])
    return found


def main() -> None:
    from tune_suite import SUITE

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", default=START_COMMIT, help="git revision of the old compiler")
    ap.add_argument("--samples", type=int, default=2, help="seeded sample configs per workload")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=3, help="gcc runs per candidate (median)")
    ap.add_argument("--only", default="", help="only workloads whose spec contains this")
    ap.add_argument("--isa", default="avx2", choices=sorted(ISA_FLAGS), help="pinned ISA level")
    ap.add_argument("--db", help="also each workload's best config tuned for --isa at 2 threads")
    args = ap.parse_args()
    specs = [s for s in SUITE if args.only in s]
    worktree = Path(tempfile.gettempdir()) / "cc_before"
    if not worktree.exists():
        subprocess.run(
            ["git", "worktree", "add", "--detach", str(worktree), args.before],
            cwd=ROOT,
            check=True,
            capture_output=True,
        )
    candidates = run_python(SAMPLE, ROOT, [specs, args.samples, args.seed], args.isa)
    if args.db:
        candidates += best_configs(specs, args.db, f"{args.isa}-2t")
    jobs = [[spec, config] for spec, _, config in candidates]
    with tempfile.TemporaryDirectory() as d_before, tempfile.TemporaryDirectory() as d_after:
        before = run_python(WORKER, worktree, jobs, d_before, args.isa)
        after = run_python(WORKER, ROOT, jobs, d_after, args.isa)
        head = f"{'workload':44} {'config':8} {'lines':>13} {'ratio':>6} {'gcc s':>13} {'ratio':>6}"
        print(head)
        sums = [0, 0, 0.0, 0.0]
        for (spec, label, _), b, a in zip(candidates, before, after, strict=True):
            if "error" in b or "error" in a:
                print(f"{spec:44} {label:8} skipped: {b.get('error') or a.get('error')}")
                continue
            lb, la = c_lines(b["path"]), c_lines(a["path"])
            tb = gcc_seconds(b["path"], args.repeat, args.isa)
            ta = gcc_seconds(a["path"], args.repeat, args.isa)
            sums = [sums[0] + lb, sums[1] + la, sums[2] + tb, sums[3] + ta]
            print(
                f"{spec:44} {label:8} {lb:>6}→{la:<6} {la / lb:6.2f} "
                f"{tb:6.2f}→{ta:<6.2f} {ta / tb:6.2f}",
                flush=True,
            )
        if sums[0]:
            print(
                f"{'total':44} {'':8} {sums[0]:>6}→{sums[1]:<6} {sums[1] / sums[0]:6.2f} "
                f"{sums[2]:6.2f}→{sums[3]:<6.2f} {sums[3] / sums[2]:6.2f}"
            )


if __name__ == "__main__":
    main()
