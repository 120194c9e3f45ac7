"""``tensortune report``: the HTML page, who found each winner, roofline, peers, and how the page
renders at 1280 px in headless Chromium."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest

from tensortune import cli
from tensortune.database import DB_ENV_VAR, TuningRecord, open_database

from .conftest import LONG_SPEC, run_cli, write_records

pytest.importorskip("matplotlib")


def _cell(page: str, column: str) -> list[str]:
    """The text of every summary-table cell of ``column``."""
    return re.findall(rf'<td data-label="{re.escape(column)}"[^>]*>(.*?)</td>', page)


def test_report_writes_html_with_curves(mixed_db, tmp_path, capsys):
    out = tmp_path / "report" / "report.html"
    assert cli.main(["report", "--db", str(mixed_db), "-o", str(out), "--no-peers"]) == 0
    assert "wrote" in capsys.readouterr().out
    page = out.read_text()
    assert page.startswith("<!DOCTYPE html>")
    assert page.count("<img") == 2, "one chart per workload"
    assert 'src="data:image/png;base64,' in page
    assert "matmul:M=8,N=16,K=8" in page and "softmax:rows=4,cols=8" in page
    assert '<table class="summary">' in page and "best config" in page
    assert "crash: 1" in page and "compile: 1" in page
    assert _cell(page, "found by") == ["random", "-"]
    assert _cell(page, "vs fastest peer") == ["-", "-"], "--no-peers times no peer"


def test_report_names_the_strategy_that_found_the_winner(tmp_path, capsys):
    """The winner's final re-measurements (strategy ``confirm``) are not who found it."""
    db = tmp_path / "found.db"
    with open_database(db) as database:
        rows = [("evolutionary", 1.0), ("random", 1.1), ("confirm", 0.9), ("confirm", 0.9)]
        for trial, (strategy, ratio) in enumerate(rows):
            database.commit_record(
                TuningRecord(
                    workload="matmul:M=8,N=16,K=8", target="avx2-2t",
                    config={"t": 1 if strategy != "random" else 2}, seconds=ratio * 1e-6,
                    reference_seconds=1e-6, ratio=ratio, strategy=strategy, trial=trial,
                )
            )  # fmt: skip
    out = tmp_path / "r.html"
    args = ["report", "--db", str(db), "-o", str(out), "--no-peers", "--no-roofline"]
    assert cli.main(args) == 0, capsys.readouterr().err
    page = out.read_text()
    assert _cell(page, "found by") == ["evolutionary"]
    assert "<dt>found by</dt><dd>evolutionary search</dd>" in page


def test_report_places_winners_against_roofline_and_peers(tuned, tmp_path):
    """End to end on a real tuning run: the roofline is measured once and cached as JSON in the
    cache directory keyed by the target; NumPy is timed as a peer of the matmul."""
    from tensortune.build.compiler import cache_dir
    from tensortune.cli.roofline import CACHE_FILE, target_of

    db, result = tuned
    out = tmp_path / "report.html"
    proc = run_cli("report", "-o", str(out), env={DB_ENV_VAR: str(db)})
    assert proc.returncode == 0, proc.stderr
    page = out.read_text()
    (share,) = _cell(page, "of roofline")
    assert re.fullmatch(r"[0-9]+% \((compute|memory)\)", share), share
    (peer,) = _cell(page, "vs fastest peer")
    assert re.fullmatch(r"[0-9.]+&times; (numpy|pytorch|onnxruntime)", peer), peer
    assert "theoretical peak" in page and "GB/s" in page

    cache = json.loads((cache_dir() / CACHE_FILE).read_text())
    key = target_of(result["target"]).key()
    assert cache[key]["target"] == result["target"]
    assert cache[key]["peak_gflops"] > 0 and cache[key]["bandwidth_gbs"] > 0
    again = run_cli("report", "-o", str(out), "--no-peers", env={DB_ENV_VAR: str(db)})
    assert again.returncode == 0, again.stderr
    assert json.loads((cache_dir() / CACHE_FILE).read_text()) == cache, "measured only once"


_LAYOUT_PROBE = """
<script>
window.addEventListener("load", () => {
  const doc = document.documentElement, width = doc.clientWidth;
  const box = (e) => e.getBoundingClientRect();
  const result = {
    width, scrollWidth: Math.max(doc.scrollWidth, document.body.scrollWidth),
    sections: document.querySelectorAll("section").length,
    images: [...document.images].map((i) => ({
      loaded: i.complete && i.naturalWidth > 0, left: box(i).left, right: box(i).right,
      shown: box(i).width })),
    tables: [...document.querySelectorAll("table")].map((t) => box(t).right),
    headers: [...document.querySelectorAll("th")].map((h) => [h.textContent, box(h).right]),
    cut: [...document.querySelectorAll("td, th, h2, dd")]
      .filter((e) => e.scrollWidth > e.clientWidth + 1).map((e) => e.textContent),
  };
  const out = document.createElement("pre");
  out.id = "layout";
  out.style.cssText = "white-space: pre-wrap; word-break: break-all";
  out.textContent = JSON.stringify(result);
  document.body.appendChild(out);
});
</script>
"""


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(
    _chromium() is None,
    reason="headless Chromium is not installed (Debian: apt-get install -y chromium)",
)
def test_report_fits_a_1280px_screen_in_headless_chromium(tmp_path):
    """Long workload names, long configs, roofline and peer columns: at 1280 px every chart is
    drawn and within the page, every table fits, nothing is cut, no horizontal scrolling."""
    db = write_records(
        tmp_path / "wide.db",
        [
            (LONG_SPEC, "optuna-cmaes", "c1", 1, 4e-3, None),
            (LONG_SPEC, "optuna-cmaes", "c1", 2, 3e-3, None),
            (LONG_SPEC, "evolutionary", "e1", 1, None, "wrong_result"),
            ("matmul:M=256,N=256,K=256", "model", "m1", 1, 2e-3, None),
            ("matmul:M=256,N=256,K=256", "model", "m1", 2, 1e-3, None),
            ("softmax:rows=1024,cols=1024", "annealing", "a1", 1, 1e-3, None),
        ],
    )
    with open_database(db) as database:  # a config as long as the GEMM space's
        knobs = {f"knob_with_a_long_name_{i}": "value_" * 4 + str(i) for i in range(12)}
        database.commit_record(
            TuningRecord(
                workload="matmul:M=256,N=256,K=256", target="avx2-2t", config=knobs,
                seconds=5e-4, strategy="model", trial=3, run_id="m1",
            )
        )  # fmt: skip
    page = tmp_path / "report.html"
    proc = run_cli("report", "--db", str(db), "-o", str(page))
    assert proc.returncode == 0, proc.stderr
    html = page.read_text()
    probed = tmp_path / "probed.html"
    probed.write_text(html.replace("</body>", _LAYOUT_PROBE + "</body>"))

    dom = subprocess.run(
        [
            _chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
            "--hide-scrollbars", "--window-size=1280,900", "--virtual-time-budget=10000",
            "--dump-dom", probed.as_uri(),
        ],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    found = re.search(r'<pre id="layout"[^>]*>(.*?)</pre>', dom.stdout, re.DOTALL)
    assert found, f"the page did not render: {dom.stderr[-2000:]}"
    layout = json.loads(found.group(1).replace("&amp;", "&").replace("&lt;", "<"))
    width = layout["width"]
    assert 1200 <= width <= 1280, layout
    assert layout["scrollWidth"] <= width, f"horizontal overflow: {layout}"
    assert layout["sections"] == 3 and len(layout["images"]) == 3, "one curve per workload"
    for image in layout["images"]:
        assert image["loaded"] and image["shown"] > 400, image
        assert image["left"] >= 0 and image["right"] <= width, image
    assert all(right <= width for right in layout["tables"]), layout["tables"]
    assert [h for h, _ in layout["headers"]][-2:] == ["trials", "failures"]
    assert all(right <= width for _, right in layout["headers"]), layout["headers"]
    assert layout["cut"] == [], "text overflowing its cell"
    assert html.count(LONG_SPEC) >= 2, "the long name is shown whole, in the table and heading"
