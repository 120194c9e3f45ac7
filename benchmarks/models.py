"""Whole-model latency (issue 16): five models defined in PyTorch, exported to ONNX, tuned and
compiled by tensortune, beside ONNX Runtime, PyTorch eager and torch.compile in the same run.

    python benchmarks/models.py [--models resnet18,mobilenet_v2,bert_layer,dqn,lstm_lm]
        [--exporter torchscript|dynamo] [--budget 20m] [--db PATH] [--threads 2] [--rounds 10]
        [--check] [--profile]

Per model (batch 1, seeded random weights, no downloads; ``torch_models.py``): export to ONNX
(the other exporter when the chosen one fails, with the reason), ``tune_model`` within
``--budget`` into ``--db`` (default: the user's tuning database; ``--budget 0``: no tuning, the
design-space defaults, or ``--db``'s records when it is given), ``compile_model``, then a check
against ONNX Runtime: the max error relative to the output's largest magnitude must be below
1e-4, else the model is WRONG and not timed (PyTorch's outputs are checked the same way).
Then every contender is timed in ``--rounds`` interleaved rounds (``common.rounds_of``), all
with ``--threads`` threads: median ms per call, ORT's time over ours (> 1: we are faster; the
median of the per-round ratios, with its noise) and the tuning time. Last, the geomean of
those ratios and the issue's two bars: geomean >= 1.0, and no model below 1/1.5.

``--check`` only compiles and compares (no tuning, no timing). ``--profile`` adds each timed
model's time per operator class (``CompiledModel.profile``; per node beside ONNX Runtime's:
``profile_model.py``). The defaults are the issue's measurement: 20 minutes of tuning a model,
about two hours in all with torch.compile's builds.
Needs torch, onnx and onnxruntime (and onnxscript for ``--exporter dynamo``).
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common
import torch
from torch_models import EXPORTERS, MODELS, build, export_onnx, input_names

from tensortune.cli.model_commands import parse_duration
from tensortune.database import default_db_path
from tensortune.graph import compile_model, extract_tasks, from_onnx, tune_model
from tensortune.graph.profile import summary_lines
from tensortune.target import Target

TOLERANCE = 1e-4
"""Max error relative to the output's largest magnitude, against ONNX Runtime."""
GEOMEAN_BAR = 1.0
"""ORT's time over ours, geometric mean over the models: at least ONNX Runtime's speed."""
WORST_BAR = 1 / 1.5
"""No model slower than 1.5x ONNX Runtime's time."""
MAX_BUDGET = 20 * 60
"""The issue's largest tuning budget per model."""


@dataclass
class Row:
    model: str
    exporter: str
    error: float
    ms: dict[str, float]  # contender -> median ms per call
    ratio: float | None = None  # ORT's time over ours
    noise: float | None = None
    tuned: str = "-"  # tuning seconds, "-" without tuning


def budget(text: str) -> float:
    """``--budget``: a duration (``20m``, ``90``), or 0 / none for no tuning."""
    return 0.0 if text.strip().lower() in ("0", "none") else parse_duration(text)


def relative_error(got: Any, want: np.ndarray) -> float:
    """Max error relative to the largest magnitude of ``want``; inf for a wrong shape or NaNs."""
    got = common.as_array(got)
    if got.shape != want.shape:
        return math.inf
    error = float(np.abs(got - want).max() / max(float(np.abs(want).max()), 1e-30))
    return error if math.isfinite(error) else math.inf


def ab_model(name: str, threads: int) -> tuple[Any, dict, Any, np.ndarray]:
    """What an A/B of two builds of model ``name`` starts from: its torchscript ONNX export,
    the feeds, an ONNX Runtime session on ``threads`` threads and its output (the truth)."""
    if name not in MODELS:
        raise SystemExit(f"unknown model {name}; known: {', '.join(MODELS)}")
    module, inputs = build(name)
    proto = export_onnx(module, inputs, "torchscript")
    feeds = {n: t.numpy() for n, t in zip(input_names(module), inputs, strict=True)}
    session = ort_session(proto, threads)
    return proto, feeds, session, session.run(None, feeds)[0]


def beside_ort(
    name: str, builds: dict[str, Any], feeds: dict, want: np.ndarray, session: Any, rounds: int
) -> dict[str, list[float]]:
    """Each compiled model of ``builds`` (checked against ONNX Runtime's ``want`` first) and
    ONNX Runtime (``"ort"``) timed in ``rounds`` interleaved rounds: an A/B of two builds of
    one model beside the peer, in one process."""
    contenders = []
    for label, model in builds.items():
        error = relative_error(model.run(feeds)[model.outputs[0].name], want)
        if error >= TOLERANCE:
            raise SystemExit(f"{name} [{label}]: WRONG against ONNX Runtime ({error:.1e})")
        contenders.append(common.Contender(label, lambda m=model, f=feeds: m.run(f)))
    contenders.append(common.Contender("ort", lambda s=session, f=feeds: s.run(None, f)))
    return common.rounds_of(contenders, rounds=rounds)


def ab_summary(times: dict[str, list[float]], old: str, new: str) -> str:
    """``beside_ort``'s times as one line: each build's and ORT's median, and the paired ratios
    new/old, ORT/old and ORT/new with their noise."""
    ms = {c: statistics.median(t) * 1e3 for c, t in times.items()}
    return (
        f"{old} {ms[old]:.3f} ms, {new} {ms[new]:.3f} ms, ORT {ms['ort']:.3f} ms; "
        f"{new}/{old} {common.paired_ratio(times, new, old):.2f} "
        f"(+-{common.noise(times, new, old):.0%}), "
        f"ORT/{old} {common.paired_ratio(times, 'ort', old):.2f}, "
        f"ORT/{new} {common.paired_ratio(times, 'ort', new):.2f} "
        f"(+-{common.noise(times, 'ort', new):.0%})"
    )


def why(exc: Exception) -> str:
    """An exception in one line."""
    return f"{type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0][:200]}"


def ort_session(proto: Any, threads: int) -> Any:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    return ort.InferenceSession(proto.SerializeToString(), opts, providers=["CPUExecutionProvider"])


def exported(name: str, module: torch.nn.Module, inputs: tuple, exporter: str) -> tuple[Any, str]:
    """The ONNX export by ``exporter``, else by the other one (saying why)."""
    order = [exporter, *(e for e in EXPORTERS if e != exporter)]
    for which in order:
        try:
            return export_onnx(module, inputs, which), which
        except Exception as exc:  # an exporter's limitation: report it, try the other one
            print(f"{name}: the {which} exporter cannot export it: {why(exc)}", flush=True)
    raise SystemExit(f"{name}: neither exporter could export it")


def torch_contenders(
    name: str, module: torch.nn.Module, inputs: tuple, want: np.ndarray
) -> list[common.Contender]:
    """PyTorch eager and torch.compile, each checked against ONNX Runtime's output first."""

    def call(fn: Any) -> Any:
        def run() -> Any:
            with torch.inference_mode():
                return fn(*inputs)

        return run

    found = [common.Contender("eager", call(module))]
    try:
        compiled = torch.compile(module)
        start = time.perf_counter()
        call(compiled)()
        print(f"{name}: torch.compile built in {time.perf_counter() - start:.0f} s", flush=True)
        found.append(common.Contender("torch.compile", call(compiled)))
    except Exception as exc:  # inductor needs a C++ toolchain; any failure only drops it
        print(f"{name}: torch.compile failed ({why(exc)}); not timed", flush=True)
    kept = []
    for c in found:
        error = relative_error(c.run(), want)
        if error < TOLERANCE:
            kept.append(c)
        else:
            print(f"{name}: {c.name} differs from ONNX Runtime by {error:.1e}: WRONG, not timed")
    return kept


def run_model(name: str, args: argparse.Namespace, target: Target, db: Any) -> Row:
    module, inputs = build(name)
    proto, exporter = exported(name, module, inputs, args.exporter)
    graph = from_onnx(proto)
    tasks = extract_tasks(graph, args.layout, target)
    opset = next(o.version for o in proto.opset_import if o.domain in ("", "ai.onnx"))
    print(
        f"\n{name} ({exporter} export, opset {opset}): {len(proto.graph.node)} ONNX nodes -> "
        f"{sum(t.weight for t in tasks)} kernel calls, {len(tasks)} tasks",
        flush=True,
    )
    tuned = "-"
    if args.budget and not args.check:
        result = tune_model(graph, budget=args.budget, db=db, target=target, layout=args.layout)
        tuned = f"{result.seconds:.0f}"
        print(f"{name}: tuned {result.trials} trials in {result.seconds:.0f} s", flush=True)
    start = time.perf_counter()
    model = compile_model(graph, db=db, target=target, layout=args.layout)
    from_db = sum(u.tuned for u in model.kernels.values())
    print(
        f"{name}: compiled in {time.perf_counter() - start:.1f} s, {from_db} of "
        f"{len(model.kernels)} kernels from the database, arena "
        f"{model.memory.size / 2**20:.1f} MiB (without reuse {model.memory.unplanned / 2**20:.1f})",
        flush=True,
    )
    feeds = {n: t.numpy() for n, t in zip(input_names(module), inputs, strict=True)}
    session = ort_session(proto, args.threads)
    want = session.run(None, feeds)[0]
    error = relative_error(model.run(feeds)[graph.outputs[0].name], want)
    verdict = "ok" if error < TOLERANCE else "WRONG"
    print(f"{name}: max error relative to the largest output {error:.1e} ({verdict})", flush=True)
    if args.check:
        with torch.inference_mode():
            eager = relative_error(module(*inputs), want)
        print(f"{name}: PyTorch eager's output differs from ONNX Runtime's by {eager:.1e}")
    if error >= TOLERANCE or args.check:
        return Row(name, exporter, error, {}, tuned=tuned)
    contenders = [
        common.Contender("tensortune", lambda: model.run(feeds)),
        common.Contender("onnxruntime", lambda: session.run(None, feeds)),
        *torch_contenders(name, module, inputs, want),
    ]
    times = common.rounds_of(contenders, rounds=args.rounds)
    if args.profile:
        print("\n".join(summary_lines(model.profile(feeds, rounds=args.rounds))), flush=True)
    ms = {c: statistics.median(t) * 1e3 for c, t in times.items()}
    ratio = common.paired_ratio(times, "onnxruntime", "tensortune")
    noise = common.noise(times, "onnxruntime", "tensortune")
    return Row(name, exporter, error, ms, ratio, noise, tuned)


HEADER = (
    f"{'model':13} {'exporter':11} {'tensortune':>10} {'onnxruntime':>11} {'eager':>8} "
    f"{'compile':>8} {'ORT/ours':>8} {'noise':>6} {'tuned s':>7} {'error':>8}"
)


def line(row: Row) -> str:
    def cell(contender: str, width: int) -> str:
        value = row.ms.get(contender)
        return f"{value:{width}.2f}" if value is not None else f"{'-':>{width}}"

    ratio = f"{row.ratio:7.2f}x" if row.ratio is not None else f"{'WRONG':>8}"
    noise = f"{row.noise:6.1%}" if row.noise is not None else f"{'-':>6}"
    return (
        f"{row.model:13} {row.exporter:11} {cell('tensortune', 10)} {cell('onnxruntime', 11)} "
        f"{cell('eager', 8)} {cell('torch.compile', 8)} {ratio} {noise} {row.tuned:>7} "
        f"{row.error:8.1e}"
    )


def summary(rows: list[Row], seconds: float) -> list[str]:
    """The geomean and the two bars, met or MISSED (a WRONG model misses both)."""
    ratios = [r.ratio for r in rows if r.ratio is not None]
    wrong = [r.model for r in rows if r.ratio is None]
    geomean = math.exp(statistics.fmean(math.log(r) for r in ratios)) if ratios else math.nan
    slow = [
        f"{r.model} {r.ratio:.2f}x" for r in rows if r.ratio is not None and r.ratio < WORST_BAR
    ]
    lines = [f"geomean speed against ONNX Runtime: {geomean:.3f}x over {len(ratios)} models"]
    ok = not wrong and geomean >= GEOMEAN_BAR
    lines.append(f"bar geomean >= {GEOMEAN_BAR:.1f}: {'met' if ok else 'MISSED'}")
    ok = not wrong and not slow
    worst = ", ".join(slow + [f"{m} WRONG" for m in wrong])
    lines.append(
        f"bar no model below 1/1.5 = {WORST_BAR:.3f}: {'met' if ok else 'MISSED'}"
        + (f" ({worst})" if worst else "")
    )
    if not seconds:
        lines.append("(untuned run: the issue's bars are for models tuned within <= 20 min)")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--models", default=",".join(MODELS), help="comma-separated, of: %(default)s"
    )
    parser.add_argument("--exporter", choices=EXPORTERS, default="torchscript")
    parser.add_argument(
        "--budget", type=budget, default=MAX_BUDGET, help="per model: 90, 20m; 0: no tuning"
    )
    parser.add_argument("--db", default=None, help="tuning database (default: the user's)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument(
        "--layout",
        choices=("auto", "NCHW", "NHWC"),
        default="auto",
        help="the convs' layout (compile_model's; tuned and compiled alike)",
    )
    parser.add_argument(
        "--check", action="store_true", help="only compare outputs: no tuning, no timing"
    )
    parser.add_argument(
        "--profile", action="store_true", help="print each model's time per operator class"
    )
    args = parser.parse_args()
    names = [m.strip() for m in args.models.split(",") if m.strip()]
    unknown = [m for m in names if m not in MODELS]
    if unknown or not names:
        parser.error(f"unknown models {unknown}; models: {', '.join(MODELS)}")
    if args.rounds < 2:
        parser.error("--rounds must be at least 2 (the noise of a ratio needs two rounds)")
    if args.budget > MAX_BUDGET:
        print(f"note: --budget above the issue's {MAX_BUDGET // 60} min a model", flush=True)
    db = args.db if args.db or not args.budget else default_db_path()
    common.limit_threads(args.threads)
    target = Target.detect(num_threads=args.threads)
    import onnxruntime

    print(
        f"target: {target}; {args.threads} threads each; onnxruntime {onnxruntime.__version__}, "
        f"torch {torch.__version__}; budget {args.budget:.0f} s a model; database: "
        f"{db if db is not None else 'none (design-space defaults)'}",
        flush=True,
    )
    rows = []
    for name in names:
        rows.append(run_model(name, args, target, db))
        if not args.check:
            print(line(rows[-1]), flush=True)
    if args.check:
        wrong = [r.model for r in rows if r.error >= TOLERANCE]
        print(
            f"\n{len(rows) - len(wrong)} of {len(rows)} models match ONNX Runtime (< {TOLERANCE:g})"
        )
        raise SystemExit(f"WRONG: {', '.join(wrong)}" if wrong else 0)
    print(f"\nmedian ms per call over {args.rounds} interleaved rounds, batch 1")
    print(HEADER + "\n" + "-" * len(HEADER))
    for row in rows:
        print(line(row))
    print("\n".join(["", *summary(rows, args.budget)]))


if __name__ == "__main__":
    main()
