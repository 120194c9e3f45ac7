"""How the terminal commands show numbers, configs and tables (rich, escaped record text)."""

from __future__ import annotations

from typing import Any, Literal

from .common import flops_of, shown

#: How a config the cost model chose without measuring it is marked wherever it is shown.
PREDICTED = "predicted (zero-shot), not measured"


def fmt_seconds(seconds: float | None) -> str:
    """A duration with a unit a person reads at a glance: ``1.23 ms``; ``-`` for none."""
    if seconds is None:
        return "-"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


def fmt_gflops(value: float | None) -> str:
    """GFLOP/s with two decimals; ``-`` when unknown."""
    return "-" if value is None else f"{value:.2f}"


def fmt_config(config: dict[str, Any] | None, sep: str = ", ") -> str:
    """Knob values sorted by name, ``k=v`` joined by ``sep``; ``-`` for none."""
    if not config:
        return "-"
    return sep.join(f"{k}={v}" for k, v in sorted(config.items()))


def esc(text: object) -> str:
    """Text from a record or the user, safe to print with rich (``[/x]`` is not markup)."""
    from rich.markup import escape

    return escape(str(text))


def console(stderr: bool = False, width: int = 160) -> Any:
    """A rich console; when not writing to a terminal, lines are not wrapped at 80 columns."""
    from rich.console import Console

    out = Console(stderr=stderr, highlight=False, soft_wrap=True)
    if not out.is_terminal:
        out.width = width
    return out


class TuneProgress:
    """A rich progress bar fed by tune()'s ``progress`` callback."""

    def __init__(self, out: Any, workload: str, total: int, already: int):
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            SpinnerColumn,
            TextColumn,
            TimeElapsedColumn,
        )

        self.progress = Progress(
            SpinnerColumn(),
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("trials"),
            TextColumn("best [green]{task.fields[best]}[/] GFLOP/s"),
            TextColumn("errors [red]{task.fields[errors]}[/]"),
            TimeElapsedColumn(),
            console=out,
            transient=False,
        )
        self.task = self.progress.add_task(
            esc(workload), total=max(total, already), completed=already, best="-", errors=0
        )

    def __enter__(self) -> TuneProgress:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def update(self, state: Any) -> None:
        """Show a TuneState (tune() calls this after every batch)."""
        self.progress.update(
            self.task,
            completed=state.trials_done,
            total=max(state.trials_total, state.trials_done),
            best=fmt_gflops(state.best_gflops),
            errors=state.errors,
        )


def print_tune_summary(out: Any, result: Any, location: str, strategy: str) -> None:
    """The human summary of a TuneResult: best time, config, ratio to default, failures."""
    out.print(f"[bold]{esc(result.workload)}[/] on {esc(result.target)} ({esc(strategy)} search)")
    out.print(f"  trials:    {result.trials} (tuning time {result.tuning_seconds:.1f} s)")
    if result.best_seconds is None:
        out.print("  best:      [red]no candidate ran successfully[/]")
    else:
        out.print(
            f"  best:      {fmt_seconds(result.best_seconds)}, {fmt_gflops(result.gflops)} GFLOP/s"
        )
        out.print(f"  config:    {esc(fmt_config(result.best_config))}", soft_wrap=True)
    if result.ratio_to_default is not None:
        interval = result.ratio_interval
        within = f" (re-measured: {interval[0]:.3f} to {interval[1]:.3f})" if interval else ""
        out.print(
            f"  vs default: {result.ratio_to_default:.3f} of the template default's time, "
            f"timed side by side{within}"
        )
    out.print(
        f"  host:      {result.disturbed_rounds} disturbed timing round(s) re-timed"
        + (
            f", {result.busy_rounds} kept from the fastest calls (the host stayed busy)"
            if result.busy_rounds
            else ""
        )
    )
    if result.errors:
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(result.errors_by_kind.items()))
        out.print(f"  failures:  {result.errors}" + (f" ({kinds})" if kinds else ""))
    else:
        out.print("  failures:  none")
    out.print(f"  database:  {esc(location)}", soft_wrap=True)


def history_table(records: list[Any], location: str) -> Any:
    """A rich Table of measurements; workload and target columns only when they vary."""
    from rich.table import Table

    from ..tuning.result import gflops

    flops: dict[str, float | None] = {}
    names = {r.workload for r in records}
    targets = {r.target for r in records}
    title = f"{len(records)} measurement(s) in {esc(shown(location))}"
    if len(names) == 1:
        title = f"{title}\nworkload {esc(next(iter(names)))}"
    if len(targets) == 1:
        title = f"{title}, target {esc(next(iter(targets)))}"
    table = Table(title=title)
    columns: list[tuple[str, Literal["left", "right"]]] = [("#", "right")]
    columns += [("workload", "left")] if len(names) > 1 else []
    columns += [("target", "left")] if len(targets) > 1 else []
    columns += [("strategy", "left"), ("config", "left"), ("time", "right")]
    columns += [("GFLOP/s", "right"), ("status", "left")]
    for column, justify in columns:
        table.add_column(column, justify=justify, min_width=24 if column == "config" else None)
    for rec in records:
        f = flops_of(rec.workload, flops)
        row = [str(rec.trial)]
        row += [esc(rec.workload)] if len(names) > 1 else []
        row += [esc(rec.target)] if len(targets) > 1 else []
        row += [esc(rec.strategy), esc(fmt_config(rec.config, " ")), fmt_seconds(rec.seconds)]
        row += [fmt_gflops(gflops(f, rec.seconds) if f else None)]
        row += ["[green]ok[/]" if rec.ok else f"[red]{rec.error}[/]"]
        table.add_row(*row)
    return table
