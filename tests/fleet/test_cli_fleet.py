"""``tensortune tune --fleet``: the address reaches tune(), the summary accounts for each node."""

from __future__ import annotations

import json

from tensortune import cli
from tensortune.fleet import NodeReport
from tensortune.tuning import TuneResult

SPEC = "matmul:M=8,N=16,K=8"


def fake_tune(calls: list):
    def tune(workload, **kwargs):
        calls.append(kwargs)
        nodes = (
            NodeReport("a1", "gpu-box", "avx512-16t", built=9, measured=7, idle_share=0.25),
            NodeReport("b2", "old-box", "avx2-8t", "refused", "its target key differs"),
        )
        return TuneResult(
            workload=workload.name, target=str(kwargs["target"]), best_config={"x": 1},
            best_seconds=1e-6, gflops=2.0, trials=7, errors=0, tuning_seconds=60.0,
            trials_per_minute=7.0, nodes=nodes,
        )  # fmt: skip

    return tune


def test_fleet_address_reaches_tune_and_each_node_is_summarised(tmp_path, capsys, monkeypatch):
    calls: list = []
    monkeypatch.setattr("tensortune.tuning.tune", fake_tune(calls))
    db = str(tmp_path / "t.db")
    assert cli.main(["tune", SPEC, "--trials", "7", "--db", db, "--fleet", "ray://head:10001"]) == 0
    out = capsys.readouterr().out
    assert calls[0]["fleet"] == "ray://head:10001"
    assert "7.0 trials/min" in out
    assert "gpu-box a1: built 9, measured 7, idle 25%" in out
    assert "old-box" in out and "refused" in out

    assert cli.main(["tune", SPEC, "--trials", "7", "--db", db, "--json"]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert "fleet" not in calls[1], "no --fleet: tune() is called as before"
    assert result["trials_per_minute"] == 7.0
    assert [n["state"] for n in result["nodes"]] == ["ok", "refused"]
