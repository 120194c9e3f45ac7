"""Dataset export -> train round trip, held-out exclusion and the error paths."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest

from tensortune.cost_model.features import TRANSFERABLE_FEATURES
from tensortune.cost_model.pretrained import load_pretrained, pretrained_exemplars, pretrained_meta
from tensortune.database import open_database
from tensortune.dataset import (
    DatasetError,
    check_no_held_out,
    collect,
    collection_order,
    cpu_kind,
    export_dataset,
    feature_set,
    fit,
    groups_of,
    held_out_workloads,
    measured_trials,
    on_target,
    op_class,
    read_records,
    train_pretrained,
    training_records,
    training_workloads,
)
from tensortune.dataset.card import card_text
from tensortune.dataset.train import FeatureSet, Group, cross_validated_check, workload_folds
from tensortune.dataset.workloads import HELD_OUT_FAMILIES, random_workloads
from tensortune.errors import TensorTuneError
from tensortune.target import cpu_family_model
from tensortune.workload.zoo import layers

from .conftest import SPECS


@pytest.fixture(scope="module")
def exported(tiny_db, tmp_path_factory, target):
    path = tmp_path_factory.mktemp("export") / "tiny.jsonl.gz"
    with open_database(tiny_db, readonly=True) as db:
        result = export_dataset(db, path, host=target)
    assert (result.written, result.skipped) == (36, 0)
    return path


def test_export_writes_one_record_per_measurement_without_features(exported, target):
    with gzip.open(exported, "rt") as f:
        rows = [json.loads(line) for line in f]
    assert {r["workload"] for r in rows} == set(SPECS)
    first = rows[0]
    assert first["target"] == str(target) and first["threads"] == target.num_threads
    assert first["isa"] == target.isa and first["cpu"] == target.name
    family_model = cpu_family_model()
    assert first["cpu_kind"] == cpu_kind(target.name, target.isa, family_model)
    assert (first["cpu_family"], first["cpu_model"]) == (family_model or (None, None))
    assert first["ratio"] == pytest.approx(first["seconds"] / first["reference_seconds"])
    assert first["op_class"] == "matmul" and "version" in first
    assert not any("feature" in key for key in first)
    assert sum(r["error"] == "compile" for r in rows) == 3


def test_cpu_kind_tells_cpus_of_one_brand_apart_by_family_and_model():
    zen3, zen4, zen5 = (cpu_kind("AMD EPYC", "avx2", fm) for fm in [(25, 1), (25, 17), (26, 2)])
    assert zen3 == "amd-epyc-avx2-f25m1" and len({zen3, zen4, zen5}) == 3
    assert cpu_kind("AMD EPYC", "avx512") == "amd-epyc-avx512"  # older records keep their kind
    name = "Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz"
    assert cpu_kind(name, "avx512", (6, 106)) == "intel-xeon-platinum-8375c-avx512-f6m106"


@pytest.mark.parametrize(
    ("cpuinfo", "expected"),
    [
        ("processor\t: 0\ncpu family\t: 25\nmodel\t\t: 17\nmodel name\t: AMD EPYC\n", (25, 17)),
        ("processor\t: 0\nmodel name\t: ARMv8 Processor\nCPU part\t: 0xd0c\n", None),
        ("cpu family\t: 25\nmodel\t\t: ?\n", None),
    ],
)
def test_cpu_family_model_reads_cpuinfo_where_it_has_them(monkeypatch, cpuinfo, expected):
    monkeypatch.setattr("tensortune.target._cpuinfo", lambda: cpuinfo)
    assert cpu_family_model() == expected


def test_round_trip_trains_a_loadable_prior_without_held_out_records(exported, tmp_path):
    records = read_records([exported.parent])  # a directory stands for its .jsonl.gz
    path, meta = train_pretrained(records, "lgbm-rank", tmp_path / "prior.json")
    assert meta["workloads"] == 2  # the held-out dense layer is not trained on
    assert meta["records"] == 24 and meta["records_per_op_class"] == {"matmul": 12, "softmax": 12}
    held_out = meta["held_out"]  # the held-out dense layer: one workload, one op class
    assert list(held_out["per_op_class"]) == ["dense"]
    assert held_out["per_op_class"]["dense"] == {
        key: held_out[key] for key in ("workloads", "pairwise_accuracy", "top5_score")
    }
    assert held_out["workloads"] == 1 and 0 <= held_out["pairwise_accuracy"] <= 1
    cv = meta["cross_validated"]  # two training workloads: two folds, each one's scores unseen
    assert cv["folds"] == 2 and list(cv["per_op_class"]) == ["matmul", "softmax"]
    assert all(0 <= c["pairwise_accuracy"] <= 1 for c in cv["per_op_class"].values())
    gaps = [cv["confident_gap"], *(c["confident_gap"] for c in cv["per_op_class"].values())]
    assert all(g is None or g >= 0 for g in gaps)  # None: no gap was right often enough
    model = load_pretrained(path)
    assert model is not None and pretrained_meta(path)["records"] == 24
    data = feature_set(groups_of(records), records)
    assert data.features.shape == (36, len(TRANSFERABLE_FEATURES))
    scores = model.predict(data.features)
    assert scores.shape == (36,) and np.isfinite(scores).all()


def test_a_prior_ships_its_training_workloads_fastest_configs(exported, tmp_path):
    """Each training group's two fastest configs that ran no slower than the default travel
    with the model (zero-shot candidates); a held-out layer's never do."""
    records = read_records([exported.parent])
    path, _ = train_pretrained(records, "lgbm-rank", tmp_path / "prior.json")
    shipped = pretrained_exemplars(path)
    groups = {g.key: g for g in groups_of(records)}
    held = set(held_out_workloads())
    assert shipped and not {e["workload"] for e in shipped} & held
    for key, group in groups.items():
        mine = [e["config"] for e in shipped if (e["workload"], e["target"], e["cpu_kind"]) == key]
        costs = sorted(group.costs)
        assert len(mine) <= 2
        for config in mine:
            cost = group.costs[group.configs.index(config)]
            assert cost <= 1.0 and cost <= costs[1]
        if key[0] not in held:  # every training group has a config no slower than the default
            assert len(mine) == sum(c <= 1.0 for c in costs[:2])


def test_a_restricted_prior_trains_on_one_target_and_is_checked_on_the_others(exported, tmp_path):
    records = read_records([exported.parent])
    more = records[0]["threads"] + 1  # the same measurements, as if taken with one more thread
    copies = [{**r, "threads": more, "target": f"{r['target']}+{more}t"} for r in records]
    _, meta = train_pretrained(
        records + copies, "lgbm-rank", tmp_path / "r.json", f"threads={more}"
    )
    assert meta["restricted"] == f"threads={more}" and meta["records"] == 24
    assert meta["targets"] == [f"{records[0]['target']}+{more}t"]
    assert meta["held_out"]["workloads"] == 1  # the held-out dense layer on the other target only
    with pytest.raises(DatasetError, match="other than 'avx512_bf16'"):
        train_pretrained(records, "lgbm-rank", tmp_path / "x.json", "avx512_bf16")
    with pytest.raises(DatasetError, match="threads=N wants a positive count"):
        on_target("threads=0")
    with pytest.raises(DatasetError, match="give an ISA"):
        on_target("AVX 2")


def _groups(*keys: tuple[str, str, str]) -> FeatureSet:
    """A FeatureSet of one row per (workload, target, op class) key, for fold assignment."""
    info = [Group((w, t, "cpu"), cls, [{}], [1.0], 1) for w, t, cls in keys]
    n = len(info)
    return FeatureSet(np.zeros((n, 1)), np.ones(n), np.arange(n), info)


def test_cross_validation_folds_hold_out_whole_workloads_of_every_class():
    data = _groups(
        *[(f"mm{i}", t, "matmul") for i in range(4) for t in ("avx2", "avx512")],
        *[(f"sm{i}", "avx2", "softmax") for i in range(3)],
    )
    folds = workload_folds(data, 3)
    fold_sets: dict[str, set[int]] = {}
    for group, fold in zip(data.info, folds, strict=True):
        fold_sets.setdefault(group.key[0], set()).add(int(fold))
    assert all(len(f) == 1 for f in fold_sets.values())  # both targets of a workload together
    assert set(folds) == {0, 1, 2}
    assert len({folds[i] for i in range(8, 11)}) == 3  # the 3 softmax workloads spread out


def test_one_training_workload_gives_no_cross_validated_figure():
    check = cross_validated_check(
        _groups(("mm", "avx2", "matmul"), ("mm", "avx512", "matmul")), "lgbm-rank"
    )
    assert (
        check["folds"] == 0 and check["pairwise_accuracy"] is None and check["per_op_class"] == {}
    )


def test_a_feature_cache_lowers_each_config_once_and_changes_no_row(exported):
    records = read_records([exported])
    plain = feature_set(groups_of(records), records)
    cache: dict = {}
    cached = feature_set(groups_of(records), records, cache)
    assert set(cache) == {g.key for g in plain.info}
    np.testing.assert_array_equal(cached.features, plain.features)
    spent = {key: extractor.seconds for key, extractor in cache.items()}
    subset = [r for r in records if r["op_class"] == "softmax"]
    again = feature_set(groups_of(subset), subset, cache)
    softmax = [i for i, g in enumerate(plain.info) if g.op_class == "softmax"]
    np.testing.assert_array_equal(again.features, plain.features[plain.groups == softmax[0]])
    assert {key: extractor.seconds for key, extractor in cache.items()} == spent


def test_groups_take_the_median_ratio_and_mark_failures_inf(exported):
    records = read_records([exported])
    groups = groups_of(records)
    assert len(groups) == 3 and all(len(g.configs) == 12 for g in groups)
    assert all(np.isinf(g.costs).sum() == 1 for g in groups)
    # each timing again, three times slower: every config holds both, in record order
    slower = [{**r, "seconds": r["seconds"] and 3 * r["seconds"]} for r in records]
    slower = [{**r, "ratio": r["ratio"] and 3 * r["ratio"]} for r in slower]
    twice = groups_of(records + slower)
    for once, both in zip(groups, twice, strict=True):
        assert [len(t) for t in both.timings] == [0 if np.isinf(c) else 2 for c in once.costs]
        assert all(t[1] > t[0] for t in both.timings if t)


def test_groups_leave_out_timeouts_and_records_timed_in_a_stall(exported):
    """A timeout and a success whose reference ran many times its usual time measured the
    host: neither changes a cost, and a config known only by a timeout is not ranked at all."""
    records = read_records([exported])
    plain = groups_of(records)
    ok = [r for r in records if r["error"] is None]
    stalled = [  # both blocks waited out one time slice: a ratio near 1 whatever the config
        {**r, "seconds": 0.02, "reference_seconds": 0.02, "ratio": 1.0, "strategy": "confirm"}
        for r in ok[::4]
    ]
    timeouts = [{**r, "error": "timeout", "seconds": None, "ratio": None} for r in ok]
    unknown = {**ok[0], "config": {**ok[0]["config"], "never": "timed"}}
    unknown.update(error="timeout", seconds=None, ratio=None, reference_seconds=None)
    noisy = groups_of(records + stalled + timeouts + [unknown])
    assert [g.key for g in noisy] == [g.key for g in plain]
    for before, after in zip(plain, noisy, strict=True):
        assert after.configs == before.configs and after.costs == before.costs
        assert after.timings == before.timings and after.records == before.records


def test_held_out_families_never_reach_training():
    held = set(held_out_workloads())
    assert held and all(layer.spec for layer in layers(HELD_OUT_FAMILIES))
    assert not held & set(training_workloads(random_per_class=20))
    check_no_held_out(training_workloads())
    with pytest.raises(TensorTuneError, match="held-out workload"):
        check_no_held_out([*training_workloads()[:3], next(iter(held))])
    records = [{"workload": w} for w in (next(iter(held)), SPECS[0])]
    assert training_records(records) == [{"workload": SPECS[0]}]
    with pytest.raises(TensorTuneError, match="held-out workload"):
        fit(records)  # the guard every trained model goes through


def test_workload_set_covers_every_op_class_and_is_seeded():
    assert random_workloads(2, seed=1) == random_workloads(2, seed=1)
    classes = {op_class(s) for s in training_workloads()}
    assert {"matmul", "batch_matmul", "dense", "conv2d", "depthwise_conv2d"} <= classes
    assert {"maxpool2d", "softmax", "layernorm"} <= classes
    first = collection_order(training_workloads())[: len(classes)]
    assert {op_class(s) for s in first} == classes  # a short chunk covers them all


def test_card_counts_records_per_op_class(exported):
    text = card_text(read_records([exported]), notes=["loaded host"])
    assert "| matmul | 12 | 11 | 1 | 0 |" in text and "| dense | 12 | 11 | 0 | 1 |" in text
    assert "mobilenet_v2" in text and "- loaded host" in text
    first = read_records([exported])[0]
    assert f"| {first['cpu']} | 36 | {first['target']}: 36 |" in text  # records per target


def test_bad_files_are_one_clear_error(tmp_path):
    with pytest.raises(DatasetError, match="no dataset file"):
        read_records([tmp_path / "missing.jsonl.gz"])
    with pytest.raises(DatasetError, match="no dataset records"):
        read_records([tmp_path])
    bad = tmp_path / "bad.jsonl.gz"
    bad.write_text("not gzip")
    with pytest.raises(DatasetError, match="cannot read"):
        read_records([bad])
    with gzip.open(bad, "wt") as f:
        f.write('{"workload": "matmul:M=1,N=1,K=1"}\n')
    with pytest.raises(DatasetError, match="lacks"):
        read_records([bad])


def test_collect_counts_from_the_database_and_resumes(tiny_db, target):
    with open_database(tiny_db) as db:
        assert measured_trials(db, SPECS[0], target) == 12
        assert collect(db, [SPECS[0], SPECS[1]], target, trials=12) == []  # nothing to measure
        assert collect(db, [SPECS[0]], target, trials=13, max_seconds=1e-9) == []  # out of time
