"""tune_model: a tiny model tuned within a tiny budget; the records land in the database, a
rerun resumes, and compile_model(db=) builds the tuned kernels and still matches ONNX Runtime."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the graph tests need the optional onnx package")
pytest.importorskip("onnxruntime", reason="the graph tests compare against onnxruntime")

from tensortune.database import open_database  # noqa: E402
from tensortune.graph import compile_model, extract_tasks, from_onnx, tune_model  # noqa: E402
from tensortune.graph.tune import shares  # noqa: E402
from tensortune.space.registry import design_space  # noqa: E402
from tensortune.tuning.apply import tuned_schedule  # noqa: E402

from . import builders  # noqa: E402


def test_shares_follow_flops_and_shrink_with_prior_trials():
    tasks = extract_tasks(from_onnx(builders.resnet_block()))
    fresh = shares(tasks, [0] * len(tasks))
    assert sum(fresh) == pytest.approx(1.0)
    resumed = shares(tasks, [320] + [0] * (len(tasks) - 1))
    assert resumed[0] < fresh[0]  # well tuned already: a smaller share
    # measured latencies replace FLOP estimates: a task slower than its FLOPs say gets more
    rate = 1e9
    latency = [t.flops / rate for t in tasks]
    slow = shares(tasks, [0] * len(tasks), [latency[0] * 10, *latency[1:]])
    assert slow[0] > fresh[0]
    assert shares(tasks, [0] * len(tasks), latency) == pytest.approx(fresh)


def test_tune_model_records_and_compile_uses_them(target, tmp_path, capsys):
    model = builders.classifier_head()
    db = tmp_path / "tuning.db"
    result = tune_model(model, budget=20, db=db, target=target)  # kept: room to measure
    tuned = result.tasks[0]  # the Gemm first, by FLOPs
    assert tuned.task.workload.name.startswith("graph:Gemm:") and tuned.result is not None
    assert tuned.result.trials > 0
    out = capsys.readouterr().out
    assert "task 1/2 Gemm 1x10" in out and "new trials" in out and "task 2/2" in out

    database = open_database(db)
    try:
        records = database.records(tuned.task.workload.name, str(target))
    finally:
        database.close()
    assert len(records) >= tuned.result.trials

    # the Gemm is tuned as the model runs it: its weight and bias constant, in the key too
    assert tuned.task.workload.constants == ("a1", "a2")
    assert tuned.task.workload.name.endswith("|constants=a1,a2")
    compiled = compile_model(model, db=db, target=target)
    default = compile_model(model, target=target)
    units = {u.name: u for u in compiled.kernels.values()}
    plain = {u.name: u for u in default.kernels.values()}
    # GlobalAveragePool, Gemm: the pool is tuned only where its share of the budget came to a
    # measurement (the shares follow measured latencies, so a slow host may give it one)
    pool = result.tasks[1].result
    pool_recorded = pool is not None and pool.best_config is not None
    assert [u.tuned for u in units.values()] == [pool_recorded, True]
    # a model packing its weights per call reads no record timed with them packed once (the
    # pool has no weights: its key, hence its record, is the same either way)
    unpacked = compile_model(model, db=db, target=target, prepack=False)
    assert [u.tuned for u in unpacked.kernels.values()] == [pool_recorded, False]
    record, _ = tuned_schedule(tuned.task.workload, db, target)
    default_config = design_space(tuned.task.workload, target).default
    gemm = list(units.values())[1]
    if record.config != default_config:  # a busy host can leave the default the fastest
        assert gemm.source != plain[gemm.name].source
    x = np.random.default_rng(0).standard_normal((1, 16, 4, 4)).astype(np.float32)
    want = builders.run_ort(model, {"x": x})[0]
    got = compiled(x)
    assert np.abs(got - want).max() / np.abs(want).max() < 1e-4

    again = tune_model(model, budget=1, db=db, target=target, verbose=False)
    # resumed from the database (the order of the tasks follows their measured latencies)
    (gemm_again,) = [t for t in again.tasks if t.task.key == tuned.task.key]
    assert gemm_again.prior_trials >= tuned.result.trials
    assert all(r.result is None for r in again.tasks)  # 1 s: nothing worth starting
