"""The whole-model commands: tune-model, run, bench and export an ONNX model.

    tensortune tune-model model.onnx --budget 20m --db tuning.db
    tensortune run model.onnx --db tuning.db --input x.npy -o y.npy
    tensortune bench model.onnx --db tuning.db
    tensortune export model.onnx --db tuning.db -o out/
    tensortune profile model.onnx --db tuning.db [--top 15]

Every command reads the model with ``tensortune.graph.from_onnx`` (``--shape`` fixes symbolic
dimensions); a model the graph stage cannot take is one ``error:`` line, exit status 2.
"""

from __future__ import annotations

import argparse
import re
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np

from .common import EXIT_OK, CLIError, db_location, detect_target
from .options import command, db_option, threads_option

_DURATION = re.compile(
    r"^\s*(?:(\d+(?:\.\d+)?)h)?\s*(?:(\d+(?:\.\d+)?)m)?\s*(?:(\d+(?:\.\d+)?)s?)?\s*$"
)


def parse_duration(text: str) -> float:
    """Seconds of ``20m``, ``1h30m``, ``90s`` or a bare number of seconds (``90``)."""
    match = _DURATION.match(text)
    if not text.strip() or match is None or not any(match.groups()):
        raise argparse.ArgumentTypeError(
            f"expected a duration such as 90, 90s, 20m or 1h30m, got {text!r}"
        )
    hours, minutes, seconds = (float(g) if g else 0.0 for g in match.groups())
    total = hours * 3600 + minutes * 60 + seconds
    if total <= 0:
        raise argparse.ArgumentTypeError(f"the budget must be positive, got {text!r}")
    return total


def _shape(text: str) -> tuple[str, tuple[int, ...]]:
    name, sep, dims = text.partition("=")
    try:
        shape = tuple(int(d) for d in dims.split(",") if d.strip())
    except ValueError:
        shape = ()
    if not sep or not name or not shape:
        raise argparse.ArgumentTypeError(
            f"expected NAME=D,D,... (e.g. input=1,3,224,224), got {text!r}"
        )
    return name, shape


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", metavar="MODEL", help="the ONNX model file")
    db_option(p)
    threads_option(p, "threads the kernels run on")
    p.add_argument(
        "--shape",
        type=_shape,
        action="append",
        default=[],
        metavar="NAME=D,D,...",
        help="concrete shape of an input with symbolic dimensions (repeatable)",
    )
    p.add_argument(
        "--layout",
        choices=("auto", "NCHW", "NHWC"),
        default="auto",
        help="the convs' activation layout (default: auto, by the convs' work and shapes); "
        "tune and run with the same one",
    )


def add_model_commands(sub: argparse._SubParsersAction) -> None:
    """The model subcommands on ``sub``."""
    p = command(
        sub,
        "tune-model",
        "tune every kernel of an ONNX model within a time budget",
        "Extracts the model's distinct kernels and tunes them one after another, sharing the\n"
        "budget by FLOPs x how often each runs (less to kernels already tuned in the\n"
        "database). Every measurement is committed at once: rerunning continues. Prints a\n"
        "line per kernel and a summary.",
    )
    _common(p)
    p.add_argument(
        "--budget",
        type=parse_duration,
        required=True,
        metavar="TIME",
        help="total tuning time: 90 (seconds), 90s, 20m, 1h30m",
    )
    p.add_argument("--strategy", default="model", metavar="NAME", help="search strategy")
    p.set_defaults(run=cmd_tune_model)

    p = command(
        sub,
        "run",
        "run an ONNX model on inputs from .npy files",
        "Compiles the model with the database's best schedules (defaults where none) and\n"
        "runs it once. --input FILE for a single-input model, or NAME=FILE per input; -o\n"
        "writes the output (.npy), or every output by name (.npz).",
    )
    _common(p)
    p.add_argument("--input", action="append", required=True, metavar="[NAME=]FILE")
    p.add_argument("-o", "--output", required=True, metavar="FILE", help=".npy or .npz")
    p.set_defaults(run=cmd_run)

    p = command(
        sub,
        "bench",
        "time an ONNX model beside ONNX Runtime",
        "Compiles the model (the database's best schedules), checks it against ONNX Runtime\n"
        "on random inputs, then times both in interleaved rounds (the order alternating) and\n"
        "prints each one's median over the rounds and the ratio (> 1: tensortune is faster).",
    )
    _common(p)
    p.add_argument("--rounds", type=int, default=10, metavar="N", help="rounds (default: 10)")
    p.set_defaults(run=cmd_bench)

    p = command(
        sub,
        "export",
        "write an ONNX model as a shared library, C header and weights file",
        "Compiles the model (the database's best schedules) and writes lib<name>.so,\n"
        "<name>.h (entry points, input and output shapes, arena size), <name>.weights and\n"
        "the entry point's C source into DIR: a C program runs it with no Python.",
    )
    _common(p)
    p.add_argument("-o", "--output", required=True, metavar="DIR", help="where to write")
    p.add_argument("--name", default=None, help="C prefix of the symbols (default: the graph's)")
    p.set_defaults(run=cmd_export)

    p = command(
        sub,
        "profile",
        "time each kernel of an ONNX model inside its run",
        "Compiles the model (the database's best schedules) and runs it on random inputs with\n"
        "every kernel call timed in place (same arena, order and inputs as a plain run): a\n"
        "table of the calls (median microseconds, share of the sum) and the time per operator\n"
        "class, beside a whole run's.",
    )
    _common(p)
    p.add_argument("--rounds", type=int, default=50, metavar="N", help="rounds (default: 50)")
    p.add_argument("--top", type=int, default=None, metavar="K", help="only the K slowest calls")
    p.set_defaults(run=cmd_profile)


def _graph(args: argparse.Namespace) -> Any:
    from ..graph import from_onnx

    return from_onnx(args.model, shapes=dict(args.shape) or None)


def _compiled(args: argparse.Namespace, name: str | None = None) -> Any:
    from ..graph import compile_model

    target = detect_target(args.threads)
    return compile_model(
        _graph(args), db=db_location(args.db), target=target, name=name, layout=args.layout
    )


def cmd_tune_model(args: argparse.Namespace) -> int:
    from ..graph import tune_model

    result = tune_model(
        _graph(args),
        budget=args.budget,
        db=db_location(args.db),
        target=detect_target(args.threads),
        strategy=args.strategy,
        layout=args.layout,
    )
    tuned = sum(r.result is not None for r in result.tasks)
    print(
        f"tuned {tuned} of {len(result.tasks)} kernels of {result.model!r} in "
        f"{result.seconds:.0f} s ({result.trials} trials recorded in {db_location(args.db)})"
    )
    return EXIT_OK


def _load_inputs(args: argparse.Namespace, inputs: tuple) -> dict[str, np.ndarray]:
    names = [v.name for v in inputs]
    feeds: dict[str, np.ndarray] = {}
    for item in args.input:
        name, sep, path = item.rpartition("=") if "=" in item else ("", "", item)
        if not sep:
            if len(names) != 1:
                raise CLIError(f"the model has inputs {names}: give --input NAME=FILE for each")
            name = names[0]
        if name not in names:
            raise CLIError(f"--input {item}: the model has no input {name!r} (inputs: {names})")
        try:
            feeds[name] = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise CLIError(f"cannot read input {name!r} from {path!r}: {exc}") from None
    return feeds


def cmd_run(args: argparse.Namespace) -> int:
    compiled = _compiled(args)
    out = compiled.run(_load_inputs(args, compiled.inputs))
    path = Path(args.output)
    if path.suffix == ".npz":
        np.savez(path, **out)
    elif len(out) == 1:
        np.save(path, next(iter(out.values())), allow_pickle=False)
    else:
        raise CLIError(f"the model has {len(out)} outputs: write them to a .npz file")
    shapes = ", ".join(f"{k} {list(v.shape)} {v.dtype}" for k, v in out.items())
    print(f"wrote {shapes} to {path}")
    return EXIT_OK


def _block(fn: Any, seconds: float = 0.05) -> float:
    """Median seconds per call over calls filling about ``seconds``."""
    start = time.perf_counter()
    fn()
    once = max(time.perf_counter() - start, 1e-7)
    times = []
    for _ in range(max(3, min(200, int(seconds / once)))):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def cmd_bench(args: argparse.Namespace) -> int:
    from ..graph.profile import random_feeds

    try:
        import onnxruntime as ort
    except ImportError:
        raise CLIError("bench compares with ONNX Runtime: pip install onnxruntime") from None
    compiled = _compiled(args)
    threads = compiled_threads = detect_target(args.threads).num_threads
    opts = ort.SessionOptions()
    opts.intra_op_num_threads, opts.inter_op_num_threads = compiled_threads, 1
    session = ort.InferenceSession(args.model, opts, providers=["CPUExecutionProvider"])
    feeds = random_feeds(compiled.inputs)
    ours, theirs = compiled.run(feeds), session.run(None, feeds)
    error = max(
        float(np.abs(ours[v.name] - t).max() / max(float(np.abs(t).max()), 1e-6))
        for v, t in zip(compiled.outputs, theirs, strict=True)
    )
    contenders = {
        "tensortune": lambda: compiled.run(feeds),
        "onnxruntime": lambda: session.run(None, feeds),
    }
    rounds: dict[str, list[float]] = {name: [] for name in contenders}
    for r in range(max(1, args.rounds)):
        order = list(contenders) if r % 2 == 0 else list(contenders)[::-1]
        for name in order:
            rounds[name].append(_block(contenders[name]))
    ms = {name: statistics.median(t) * 1e3 for name, t in rounds.items()}
    print(
        f"model {compiled.graph.name!r}: {len(compiled.steps)} kernel calls of "
        f"{len(compiled.kernels)} kernels, {threads} threads; max error vs ONNX Runtime "
        f"{error:.1e} (relative to the largest output)"
    )
    for name, value in ms.items():
        print(f"{name:12} {value:10.4f} ms  (median of {len(rounds[name])} interleaved rounds)")
    print(f"speed vs ONNX Runtime: {ms['onnxruntime'] / ms['tensortune']:.2f}x (> 1: faster)")
    return EXIT_OK


def cmd_export(args: argparse.Namespace) -> int:
    compiled = _compiled(args, args.name)
    files = compiled.export(args.output)
    for role, path in files.items():
        print(f"{role:8} {path}")
    return EXIT_OK


def cmd_profile(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from ..graph.profile import profile_table, summary_lines

    compiled = _compiled(args)
    prof = compiled.profile(rounds=max(1, args.rounds))
    rows = profile_table(prof, args.top)
    table = Table(title=f"{compiled.graph.name}: {len(prof.rows)} kernel calls")
    for k, head in enumerate(rows[0]):
        table.add_column(head, justify="right" if k in (0, 5, 6) else "left")
    for row in rows[1:]:
        table.add_row(*row)
    console = Console(width=200)
    console.print(table)
    print("\n".join(summary_lines(prof)))
    return EXIT_OK


__all__ = ["add_model_commands", "parse_duration"]
