"""The HTML report: per workload and target, the best-so-far curves, the winner, who found it,
and where it sits against this machine's roofline and the fastest installed peer.

One self-contained page (charts inlined as PNG) that fits a laptop screen: the summary table
holds only short columns, long names and configs wrap anywhere, and charts scale to the width.
"""

from __future__ import annotations

import base64
import contextlib
import html
import io
import math
import re
import time
from typing import Any

from ..tuning.result import gflops
from ..version import __version__
from .common import flops_of, found_by, found_by_phrase
from .format import fmt_config, fmt_gflops, fmt_seconds

_CSS = """\
*, *::before, *::after { box-sizing: border-box; }
body { font-family: system-ui, sans-serif; margin: 0 auto; padding: 1em clamp(8px, 3vw, 32px);
       max-width: 1200px; color: #222; line-height: 1.4; }
h1, h2 { overflow-wrap: anywhere; }
h2 { font-size: 1.15em; }
code { overflow-wrap: anywhere; word-break: break-word; }
table { border-collapse: collapse; margin: 1em 0; width: 100%; }
th, td { border: 1px solid #ccc; padding: 4px 6px; text-align: left; vertical-align: top; }
th { background: #f0f0f0; }
td.num { text-align: right; white-space: nowrap; font-variant-numeric: tabular-nums; }
td[data-label="target"] { white-space: nowrap; }
img { display: block; width: 100%; max-width: 900px; height: auto; border: 1px solid #eee; }
section { margin-top: 2em; }
dl { display: grid; grid-template-columns: max-content minmax(0, 1fr); gap: 2px 1em; }
dt { font-weight: 600; }
dd { margin: 0; min-width: 0; }
.meta { color: #666; }
@media (max-width: 720px) {
  table.summary thead { display: none; }
  table.summary tr { display: block; border: 1px solid #ccc; margin-bottom: 0.5em; }
  table.summary td { display: block; border: none; text-align: left; }
  table.summary td::before { content: attr(data-label) ": "; font-weight: 600; }
  dl { grid-template-columns: minmax(0, 1fr); }
}
"""

PEER_MAX_FLOPS = 2e10
PEER_MAX_BYTES = 1 << 30
"""Peers are timed only for workloads this small: a database is untrusted input, and a record
naming a huge (but allowed) workload must not make writing a report take an hour."""

_COLUMNS = (
    "workload", "target", "best GFLOP/s", "best time", "of roofline", "vs fastest peer",
    "found by", "trials", "failures",
)  # fmt: skip


def render_report(
    records: list[Any], location: str, peers: bool = False, roofline: bool = False
) -> str:
    """The HTML page for ``records`` (TuningRecords, in insertion order). ``peers`` times the
    installed peers of each winner now; ``roofline`` measures (once, then cached) this
    machine's peak FLOP/s and bandwidth. Both are off here so that rendering alone is cheap."""
    from ..database.record import rank_configs
    from ..tuning.loop import CONFIRM

    esc = html.escape
    flops: dict[str, float | None] = {}
    roofs: dict[str, Any] = {}
    groups: dict[tuple[str, str], list] = {}
    for rec in records:
        groups.setdefault((rec.workload, rec.target), []).append(rec)

    sections, rows = [], []
    for (name, target), recs in sorted(groups.items()):
        f = flops_of(name, flops)
        ok = [r for r in recs if r.ok]
        ranked = rank_configs(ok, order=lambda r: r.created_at)
        best = ranked[0][0] if ranked else None  # the rule `best` and `compile` use
        speed = gflops(f, best.seconds) if best and f else None
        finder = found_by(recs, best.config_key) if best else "-"
        failures = len(recs) - len(ok)
        trials = sum(r.strategy != CONFIRM for r in recs)
        roof_cell, roof_text = "-", ""
        if roofline and speed is not None:
            if target not in roofs:
                roofs[target] = _roofline(target)
            roof_cell, roof_text = _roofline_place(name, speed, roofs[target])
        peer_cell, peer_text = "-", ""
        if peers and best is not None and best.seconds:
            peer_cell, peer_text = _peer_place(name, target, best.seconds, f)
        cells = [
            f"<code>{esc(name)}</code>", esc(target), fmt_gflops(speed),
            esc(fmt_seconds(best.seconds if best else None)), roof_cell, peer_cell, esc(finder),
            str(trials), str(failures),
        ]  # fmt: skip
        numeric = {"best GFLOP/s", "best time", "of roofline", "vs fastest peer", "trials"}
        numeric.add("failures")
        rows.append(
            "<tr>"
            + "".join(
                f'<td data-label="{c}"{" class=num" if c in numeric else ""}>{v}</td>'
                for c, v in zip(_COLUMNS, cells, strict=True)
            )
            + "</tr>"
        )
        details = [
            ("best config", f"<code>{esc(fmt_config(best.config if best else None))}</code>")
        ]
        details.append(("found by", esc(found_by_phrase(finder)) if best else "-"))
        details += [("roofline", roof_text)] if roof_text else []
        details += [("peers", peer_text)] if peer_text else []
        details.append(
            ("measurements", f"{len(recs)}, {failures} failed{_failure_breakdown(recs)}")
        )
        png = _curve_png(name, target, recs, f)
        sections.append(
            f"<section><h2><code>{esc(name)}</code> on {esc(target)}</h2>"
            f'<img alt="best GFLOP/s so far vs trial for {esc(name)} on {esc(target)}" '
            f'src="data:image/png;base64,{png}">'
            "<dl>" + "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in details) + "</dl></section>"
        )

    head = "".join(f"<th>{c}</th>" for c in _COLUMNS)
    table = (
        f'<table class="summary"><thead><tr>{head}</tr></thead><tbody>'
        + "".join(rows)
        + "</tbody></table>"
        if rows
        else "<p>The database holds no records yet: run <code>tensortune tune</code>.</p>"
    )
    notes = (
        "<p class=meta>Times are the database's: the median measurement of the winning config "
        "when it was tuned. <em>found by</em> is the strategy of the config's first "
        "measurement, not the final re-measurement of the finalists."
        + (" <em>of roofline</em> is the winner's GFLOP/s over min(peak, intensity &times; "
           "bandwidth) as measured on this machine." if roofline else "")
        + (" <em>vs fastest peer</em> is the peer's time over the winner's, the peer timed "
           "now on the same inputs: above 1&times; the winner is faster." if peers else "")
        + "</p>"
    )  # fmt: skip
    generated = time.strftime("%Y-%m-%d %H:%M:%S")
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>tensortune tuning report</title>
<style>
{_CSS}</style>
</head>
<body>
<h1>tensortune tuning report</h1>
<p class="meta">Database <code>{esc(location)}</code>: {len(records)} record(s).
Generated {esc(generated)} by tensortune {esc(__version__)}.</p>
<h2>Best configuration per workload</h2>
{table}
{notes if rows else ""}
{"".join(sections)}
</body>
</html>
"""


def _roofline(target: str) -> Any:
    """The cached or measured roofline of a record's target, or None (another machine's ISA,
    or no working compiler: the report then goes on without it)."""
    from ..errors import TensorTuneError
    from .roofline import machine_roofline, target_of

    found = target_of(target)
    if found is None:
        return None
    try:
        return machine_roofline(found)
    except (TensorTuneError, OSError):
        return None


def _roofline_place(name: str, speed: float, roof: Any) -> tuple[str, str]:
    """(table cell, sentence): the winner's share of what the roofline allows it."""
    from ..errors import TensorTuneError
    from ..workload import workload
    from .roofline import min_bytes

    if roof is None:
        return "-", "not measured (this machine cannot run this target)"
    try:
        wl = workload(name)
    except (TensorTuneError, ValueError):
        return "-", ""
    intensity = wl.flops / min_bytes(wl)
    attainable = roof.attainable(intensity)
    share = speed / attainable
    text = (
        f"{speed:.1f} GFLOP/s is {share:.0%} of this machine's {roof.bound(intensity)} roof: "
        f"min({roof.peak_gflops:.1f} GFLOP/s peak, {intensity:.2f} FLOP/B &times; "
        f"{roof.bandwidth_gbs:.1f} GB/s) = {attainable:.1f} GFLOP/s "
        f"(theoretical peak {roof.theoretical_gflops:.1f} GFLOP/s)"
    )
    return f"{share:.0%} ({roof.bound(intensity)})", text


def _peer_place(name: str, target: str, seconds: float, flops: float | None) -> tuple[str, str]:
    """(table cell, sentence): the fastest correct peer's time beside the winner's."""
    from ..errors import TensorTuneError
    from ..workload import workload
    from .peers import fastest_peer
    from .roofline import min_bytes

    match = re.search(r"-([0-9]{1,4})t$", target)
    threads = int(match[1]) if match else 1
    found = None
    with contextlib.suppress(TensorTuneError, ValueError):
        wl = workload(name)
        if wl.flops > PEER_MAX_FLOPS or min_bytes(wl) > PEER_MAX_BYTES:
            return "-", "not timed: too large to time for a report (see benchmarks/)"
        found = fastest_peer(wl, threads)
    if found is None:
        return "-", "none installed that computes this workload"
    peer, peer_seconds = found
    ratio = peer_seconds / seconds
    speed = f", {fmt_gflops(gflops(flops, peer_seconds))} GFLOP/s" if flops else ""
    text = (
        f"fastest installed: {html.escape(peer)}, {fmt_seconds(peer_seconds)}{speed} "
        f"({threads} thread(s)); the winner runs at {ratio:.2f}&times; its speed"
    )
    return f"{ratio:.2f}&times; {html.escape(peer)}", text


def _failure_breakdown(recs: list[Any]) -> str:
    kinds: dict[str, int] = {}
    for r in recs:
        if r.error:
            kinds[r.error] = kinds.get(r.error, 0) + 1
    if not kinds:
        return ""
    return " (" + ", ".join(f"{html.escape(k)}: {n}" for k, n in sorted(kinds.items())) + ")"


def _no_math(text: str) -> str:
    """Record text for matplotlib, which would parse ``$...$`` in it as (possibly bad) math."""
    return text.replace("$", r"\$")


def _wrapped(text: str, width: int = 72) -> str:
    """A long spec on several lines, broken after commas, so a chart title is never cut."""
    lines, line = [], ""
    for part in re.split(r"(?<=,)", text):
        if line and len(line) + len(part) > width:
            lines.append(line)
            line = ""
        line += part
    return "\n".join([*lines, line])


def _curve_png(name: str, target: str, recs: list[Any], flops: float | None) -> str:
    """Best-so-far GFLOP/s vs trial, one line per (strategy, run_id), as base64 PNG."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    from ..tuning.loop import CONFIRM

    runs: dict[tuple[str, str], list] = {}
    for rec in recs:
        if rec.strategy != CONFIRM:  # re-measurements of the winners are not trials
            runs.setdefault((rec.strategy, rec.run_id), []).append(rec)

    fig = Figure(figsize=(9, 4.2), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    drawn = 0
    for (strategy, run_id), run in runs.items():
        xs, ys, best = [], [], math.nan  # NaN (not drawn) until the run's first success
        for i, rec in enumerate(run, 1):
            value = gflops(flops, rec.seconds) if flops and rec.ok else None
            if value is not None and (math.isnan(best) or value > best):
                best = value
            xs.append(rec.trial if rec.trial > 0 else i)
            ys.append(best)
        label = _no_math(f"{strategy or 'unknown'} (run {run_id[:8] or '?'})")
        if all(math.isnan(y) for y in ys):
            label += ", no success"
        ax.plot(xs, ys, drawstyle="steps-post", marker="o", markersize=3, label=label)
        drawn += 1
    ax.set_title(_no_math(_wrapped(f"{name} on {target}")), fontsize=9)
    ax.set_xlabel("trial")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel("best GFLOP/s so far" if flops else "best GFLOP/s so far (FLOPs unknown)")
    ax.grid(True, alpha=0.3)
    ax.set_ylim(bottom=0)
    if drawn:
        ax.legend(title="strategy (run)", fontsize=8, loc="best")
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    return base64.b64encode(buffer.getvalue()).decode("ascii")
