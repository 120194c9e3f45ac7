"""Zero-shot kernels on held-out workloads, timed beside the template default, the tuned best
and the peers in one run.

    python benchmarks/zero_shot.py [--workloads SPEC ...] [--limit 3] [--trials 16]
                                   [--threads 2] [--model default.json] [--db scratch.db]
                                   [--rounds 8] [--tuned-from DIR_OR_DB ...]

Workloads: the layers of ``tensortune.dataset``'s held-out families (``HELD_OUT_FAMILIES``:
never trained on, by workload key), or the specs given. Per workload:

1. the zero-shot choice (``tensortune.tuning.zero_shot.choose``, exactly what ``tt.compile``
   runs for a workload never measured here, trusting the model per op class as far as the
   model file's held-out check says), before anything of it is measured; its wall time is
   printed (issue 15: under 2 s);
2. a tune of ``--trials`` trials (random search would flatter nothing: the default strategy,
   which may itself use the pretrained prior) into ``--db``, and its best record; with
   ``--tuned-from`` (databases, or folders of them, such as ``search_savings.py --dir``: longer
   searches of the same workloads) their fastest record is timed too and the tuned reference
   is the faster of the two, so a short tune that missed the best config does not flatter the
   zero-shot (their ratios are to the default of the version that ran them, so they cannot
   rank the two). Those databases are read only here, never by the zero-shot choice;
3. the zero-shot, default and tuned kernels and every peer (``tensortune.cli.peers``) are
   checked against the NumPy reference, then timed side by side in interleaved rounds
   (``common.rounds_of``): each ratio is the median over rounds of the paired ratio, so the
   host's drift does not move it, with its noise (half the interquartile range).

Columns are speeds relative to the zero-shot kernel's (> 1: zero-shot is faster): zero-shot ÷
default (exactly 1 when the choice is the default, which is not timed against itself: the same
kernel twice differed by up to 15% here), ÷ tuned best, ÷ fastest peer; geomeans at the end.
Issue 15's bars: ≥ 0.90 of the tuned best and ≥ 0.95 of the fastest peer (geomeans), and never
below the default by more than noise.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common
import numpy as np

import tensortune as tt
from tensortune.cli.peers import peers_for
from tensortune.cost_model.pretrained import (
    PRETRAINED_PATH,
    load_pretrained,
    pretrained_exemplars,
    pretrained_meta,
)
from tensortune.database import TuningRecord, open_database
from tensortune.database.record import rank_score
from tensortune.pipeline import compile as compile_with
from tensortune.space.registry import design_space
from tensortune.tuning import zero_shot
from tensortune.tuning.apply import tuned_schedule

ZERO_SHOT = "zero-shot"
EARLIER = "tuned earlier"


def held_out() -> list[str]:
    """The held-out families' layers, each workload once."""
    from tensortune.dataset import held_out_workloads

    return held_out_workloads()


def run(spec: str, model, prior: tuple[dict, list], db: Path, args: argparse.Namespace) -> dict:
    """One workload's row: zero-shot speed relative to each contender, and the choice time."""
    wl = tt.workload(spec)
    target = tt.Target.detect(num_threads=args.threads)
    ds = design_space(wl, target)
    start = time.perf_counter()
    with open_database(db) as database:  # similar workloads tuned earlier in this run count
        prediction = zero_shot.choose(ds, model, database, str(target), *prior)
    choice = time.perf_counter() - start
    result = tt.tune(wl, trials=args.trials, db=db, target=target)
    key = ds.space.config_key
    same = key(prediction.config) == key(ds.default)
    configs = {ZERO_SHOT: prediction.config}
    if not same:  # the default's kernel timed beside itself would show only the host's noise
        configs["default"] = ds.default
    # the tuned best: this run's, or the longer searches' if faster when timed beside it (their
    # ratios are to the default of the version that ran them, so they cannot rank each other)
    for name, sources in (("tuned", [db]), (EARLIER, args.tuned_from)):
        tuned = fastest_record(wl, target, sources) if sources else None
        if tuned is not None and key(tuned.config) != key(configs.get("tuned", {})):
            configs[name] = tuned.config
    inputs = wl.random_inputs(0)
    want = wl.reference(inputs)
    contenders = []
    for name, config in configs.items():
        kernel = compile_with(wl, ds.schedule(config), target)
        out = kernel(*inputs)
        common.check(f"{spec} {name}", out, want)
        timer = common.kernel_timer(kernel, [*inputs, out])
        contenders.append(common.Contender(name, lambda: None, timer))
    peers = []
    for name, fn in peers_for(wl, inputs, args.threads).items():
        try:
            got = common.as_array(fn())
        except Exception as exc:  # a peer that cannot run this case is no peer for it
            print(f"  {name}: cannot run it ({type(exc).__name__})")
            continue
        scale = max(1.0, float(np.abs(want).max()))
        if got.shape == want.shape and np.allclose(got, want, rtol=1e-3, atol=1e-3 * scale):
            contenders.append(common.Contender(name, fn))
            peers.append(name)
        else:
            print(f"  {name}: wrong result, not timed")
    times = common.rounds_of(contenders, rounds=args.rounds)
    if EARLIER in times:  # the faster of the two is the tuned best
        if "tuned" not in times or statistics.median(times[EARLIER]) < statistics.median(
            times["tuned"]
        ):
            times["tuned"] = times[EARLIER]
        del times[EARLIER]
    row = {"choice_seconds": choice, "trials": float(result.trials)}
    if same:
        row["default"], row["default noise"] = 1.0, 0.0
    for name in [n for n in times if n != ZERO_SHOT]:
        row[name] = common.paired_ratio(times, name, ZERO_SHOT)
        row[f"{name} noise"] = common.noise(times, name, ZERO_SHOT)
    if peers:
        fastest = min(peers, key=lambda p: statistics.median(times[p]))
        row["peer"], row["peer noise"] = row[fastest], row[f"{fastest} noise"]
        row["fastest peer"] = fastest
    print(
        f"  zero-shot config from {prediction.source} ({prediction.candidates} candidates, "
        f"chosen in {choice:.2f} s); median us: "
        + ", ".join(f"{n} {statistics.median(t) * 1e6:.1f}" for n, t in times.items())
    )
    return row


def fastest_record(wl, target: tt.Target, sources: list[Path]) -> TuningRecord | None:
    """The fastest valid record of ``wl`` among the databases (a folder: every ``*.db`` in it),
    by the project's one rule for "best" (``rank_score``: the ratio to the paired reference,
    which the host's drift between runs taken hours apart does not move)."""
    files = [f for s in sources for f in (sorted(s.glob("*.db")) if s.is_dir() else [s])]
    found = [r for f in files if (r := tuned_schedule(wl, f, target)[0]) is not None]
    return min(found, key=rank_score(found), default=None)


def cell(row: dict, key: str) -> str:
    if key not in row:
        return f"{'-':>15s}"
    return f"{row[key]:6.2f} ±{row[f'{key} noise']:5.1%} "


def geomean(values: list[float]) -> float:
    return math.exp(statistics.fmean(math.log(v) for v in values)) if values else math.nan


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workloads", nargs="+", metavar="SPEC", help="default: held out")
    parser.add_argument("--limit", type=int, default=None, help="first N workloads only")
    parser.add_argument("--trials", type=int, default=16, help="tuning trials per workload")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--model", type=Path, default=None, help=f"default: {PRETRAINED_PATH}")
    parser.add_argument("--db", type=Path, default=None, help="default: a fresh scratch file")
    parser.add_argument("--rounds", type=int, default=8, help="interleaved timing rounds")
    parser.add_argument(
        "--tuned-from",
        type=Path,
        nargs="+",
        default=[],
        metavar="DIR_OR_DB",
        help="more databases (or folders of them) whose fastest record can be the tuned best",
    )
    args = parser.parse_args()
    specs = (args.workloads or held_out())[: args.limit]
    model = load_pretrained(args.model)
    if model is None:
        raise SystemExit("no pretrained model loads: pass --model FILE (see save_pretrained)")
    prior = (pretrained_meta(args.model) or {}, pretrained_exemplars(args.model))
    common.limit_threads(args.threads)
    db = args.db or Path(tempfile.mkdtemp(prefix="zero_shot_")) / "tuning.db"
    print(f"model {args.model or PRETRAINED_PATH}; {args.trials} trials; database {db}")
    if args.tuned_from:
        print(f"tuned best also from {', '.join(map(str, args.tuned_from))}")
    print(f"{common.openblas_info()}; {args.threads} thread(s)\n")
    rows: dict[str, dict] = {}
    for spec in specs:
        print(spec)
        rows[spec] = run(spec, model, prior, db, args)
    print(
        f"\n{'workload':70s} {'÷ default':>15s} {'÷ tuned best':>15s} {'÷ fastest peer':>15s} "
        f"{'choice':>7s}"
    )
    for spec, row in rows.items():
        peer = f" ({row['fastest peer']})" if "fastest peer" in row else ""
        print(
            f"{spec[:70]:70s} {cell(row, 'default')} {cell(row, 'tuned')} {cell(row, 'peer')} "
            f"{row['choice_seconds']:6.2f}s{peer}"
        )
    print(
        f"{'geomean':70s} "
        + " ".join(
            f"{geomean([r[k] for r in rows.values() if k in r]):14.2f} "
            for k in ("default", "tuned", "peer")
        )
        + f"{max((r['choice_seconds'] for r in rows.values()), default=math.nan):6.2f}s max"
    )


if __name__ == "__main__":
    main()
