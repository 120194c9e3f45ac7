"""Zero-shot compile: a workload never measured here gets the config a pretrained model ranks
first, with no measurement, recorded as a prediction that nothing mistakes for a timing."""

from __future__ import annotations

import io
import json
import shutil
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tensortune as tt
from tensortune.cost_model import CostModel, get_cost_model
from tensortune.cost_model import pretrained as pretrained_module
from tensortune.cost_model.features import transferable_features
from tensortune.cost_model.pretrained import load_pretrained, save_pretrained
from tensortune.database import Database, TuningRecord, open_database
from tensortune.search.registry import make_tuning_strategy
from tensortune.space.registry import design_space
from tensortune.target import Target
from tensortune.tuning import loop, zero_shot
from tensortune.tuning.apply import chosen_schedule

TRAIN = "matmul:M=16,N=16,K=16"
UNSEEN = "matmul:M=24,N=32,K=16"  # a different shape: never measured anywhere


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory, target: Target) -> tuple[Path, Path]:
    """(a database of 8 measured configs of TRAIN, a prior trained on them). The times are
    made up (tuning for real takes minutes on a busy host): these tests check what zero-shot
    compile does with a prior, not how good the prior is (``benchmarks/zero_shot.py`` does)."""
    folder = tmp_path_factory.mktemp("prior")
    ds = design_space(tt.workload(TRAIN), target)
    configs = [ds.default, *ds.space.sample(np.random.default_rng(0), 7)]
    features = transferable_features(ds, configs)
    costs = [1e-5 * (1 + i) for i in range(len(configs))]
    db = folder / "train.db"
    with open_database(db) as database:
        for trial, (config, seconds) in enumerate(zip(configs, costs, strict=True)):
            database.commit_record(
                TuningRecord(
                    workload=ds.workload.name, target=str(target), config=config,
                    seconds=seconds, reference_seconds=1e-5, ratio=seconds / 1e-5,
                    strategy="random", trial=trial,
                )
            )  # fmt: skip
    model = get_cost_model("lgbm-rank").fit(features, costs)
    path = folder / "prior.json"
    save_pretrained(model, path, meta={"trained_on": TRAIN, "held_out": TRUSTED})
    return db, path


#: A held-out check that trusts a model for matmul (the op of TRAIN and UNSEEN).
TRUSTED = {"pairwise_accuracy": 0.9, "per_op_class": {"matmul": {"pairwise_accuracy": 0.9}}}


@pytest.fixture
def prior(trained: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """The trained prior as the package's model; returns a copy of the training database."""
    db, path = trained
    monkeypatch.setattr(zero_shot, "pretrained_model", lambda: load_pretrained(path))
    monkeypatch.setattr(zero_shot, "package_model_meta", lambda: {"held_out": TRUSTED})
    copy = tmp_path / "tuning.db"
    shutil.copy(db, copy)
    return copy


@pytest.fixture
def no_prior(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """The package's model file is missing (loaded afresh, as in a new process)."""
    monkeypatch.setattr(pretrained_module, "PRETRAINED_PATH", tmp_path / "missing.json")
    zero_shot.pretrained_model.cache_clear()
    yield
    zero_shot.pretrained_model.cache_clear()


def _check(kernel: tt.Kernel, spec: str) -> None:
    wl = tt.workload(spec)
    inputs = wl.random_inputs(0)
    np.testing.assert_allclose(kernel(*inputs), wl.reference(inputs), rtol=1e-4, atol=1e-5)


def _prediction(db: Path, target: Target, spec: str = UNSEEN):  # type: ignore[no-untyped-def]
    with open_database(db, readonly=True) as database:
        return database.prediction(tt.workload(spec).name, str(target))


def test_an_unseen_shape_gets_a_recorded_prediction_and_no_trial(prior: Path, target) -> None:
    kernel = tt.compile(UNSEEN, db=prior, target=target)
    _check(kernel, UNSEEN)
    found = _prediction(prior, target)
    assert found is not None and found.candidates > 1 and found.model.startswith("pretrained")
    assert found.config == chosen_schedule(tt.workload(UNSEEN), prior, target).prediction.config  # type: ignore[union-attr]
    with open_database(prior, readonly=True) as database:
        assert database.records(found.workload) == [], "a prediction is never a trial"
        assert database.best(found.workload, str(target)) is None
        out = io.StringIO()
        database.export_jsonl(out)
        assert found.workload not in out.getvalue(), "nor exported as a measurement"
    again = tt.compile(UNSEEN, db=prior, target=target)
    assert again.library_path == kernel.library_path, "the second compile reuses the choice"
    assert _prediction(prior, target) == found


def test_similar_workloads_best_configs_are_candidates(prior: Path, target) -> None:
    ds = design_space(tt.workload(UNSEEN), target)
    with open_database(prior, readonly=True) as database:
        best = database.best(tt.workload(TRAIN).name, str(target))
        similar = zero_shot.similar_configs(ds, database, str(target))
    assert best is not None and ds.space.is_valid(best.config)
    assert (best.config, f"similar {tt.workload(TRAIN).name}") in similar
    near, far = (tt.workload(s) for s in ("matmul:M=24,N=32,K=32", "matmul:M=512,N=32,K=16"))
    assert zero_shot.shape_distance(ds.workload, near) < zero_shot.shape_distance(ds.workload, far)


def test_a_later_tune_measures_the_predicted_config_and_then_wins(prior: Path, target) -> None:
    tt.compile(UNSEEN, db=prior, target=target)
    found = _prediction(prior, target)
    assert found is not None
    with open_database(prior) as database:  # what the tuner asks before measuring
        assert database.measured_keys(found.workload, found.target) == set()
        assert not database.has(found.workload, found.target, found.config_key)
        database.commit_record(  # ... and what it records after measuring
            TuningRecord(
                workload=found.workload, target=found.target, config=found.config,
                seconds=2e-5, strategy="model", trial=0,
            )
        )  # fmt: skip
    chosen = chosen_schedule(tt.workload(UNSEEN), prior, target)
    assert chosen.record is not None and chosen.prediction is None


def test_without_a_model_the_default_is_used_with_one_warning(
    no_prior: None, tmp_path: Path, target
) -> None:
    db = tmp_path / "empty.db"
    open_database(db).close()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        kernels = [tt.compile(UNSEEN, db=db, target=target) for _ in range(2)]
    assert len(caught) == 1, [str(w.message) for w in caught]
    assert "template default" in str(caught[0].message)
    assert "missing.json" in str(caught[0].message)
    _check(kernels[0], UNSEEN)
    chosen = chosen_schedule(tt.workload(UNSEEN), db, target)
    ds = design_space(tt.workload(UNSEEN), target)
    assert chosen.prediction is None and chosen.schedule.trace == ds.schedule(ds.default).trace
    assert _prediction(db, target) is None


def test_a_choice_that_cannot_be_recorded_still_compiles(prior: Path, target) -> None:
    with open_database(prior, readonly=True) as database:
        assert isinstance(database, Database)
        with pytest.warns(tt.RecordWarning, match="was not recorded"):
            kernel = tt.compile(UNSEEN, db=database, target=target)
    _check(kernel, UNSEEN)
    assert _prediction(prior, target) is None


def test_a_recorded_prediction_that_no_longer_builds_is_chosen_again(prior: Path, target) -> None:
    from tensortune.database import Prediction

    wl = tt.workload(UNSEEN)
    with open_database(prior) as database:
        database.record_prediction(
            Prediction(
                workload=wl.name, target=str(target), config={"no_such_knob": 1},
                source="sample", model="an older model", candidates=3, choice_seconds=0.1,
            )
        )  # fmt: skip
    with pytest.warns(tt.RecordWarning, match="skipped the recorded zero-shot prediction"):
        _check(tt.compile(UNSEEN, db=prior, target=target), UNSEEN)
    found = _prediction(prior, target)
    assert found is not None and found.model.startswith("pretrained")


@pytest.mark.parametrize(("held_out", "trusted"), [(None, False), (0.6, False), (0.9, True)])
def test_the_shipped_model_chooses_only_as_far_as_its_held_out_check_allows(
    trained: tuple[Path, Path],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    held_out: float | None,
    trusted: bool,
) -> None:
    """A model that could not rank the held-out families' configs keeps the default."""
    doc = json.loads(trained[1].read_text())
    doc["meta"]["held_out"] = {"pairwise_accuracy": held_out}
    path = tmp_path / "default.json"
    path.write_text(json.dumps(doc))
    monkeypatch.setattr(pretrained_module, "PRETRAINED_PATH", path)
    zero_shot.pretrained_model.cache_clear()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # the shipped state of a young dataset: no warning
            assert (zero_shot.pretrained_model() is not None) is trusted
    finally:
        zero_shot.pretrained_model.cache_clear()


class _LastFirst(CostModel):
    """Scores candidates in their order, so the last one ranked wins: never the default, which
    ``choose`` ranks first."""

    def _fit(self, features: np.ndarray, costs: np.ndarray, groups: np.ndarray) -> None:
        """Nothing to learn."""

    def predict(self, features: np.ndarray) -> np.ndarray:
        return np.arange(len(features), dtype=np.float64)

    def _get_state(self) -> dict[str, Any]:
        return {}

    @classmethod
    def _from_state(cls, state: dict[str, Any]) -> _LastFirst:
        return cls()


#: Ranking checks (a model meta's "held_out" or "cross_validated") below the bar for matmul, and
#: with a figure for dense only.
POOR_MATMUL = {"per_op_class": {"matmul": {"pairwise_accuracy": 0.6}}}
ONLY_DENSE = {"per_op_class": {"dense": {"pairwise_accuracy": 0.9}}}


@pytest.mark.parametrize(
    ("meta", "reason"),
    [
        ({"held_out": TRUSTED}, None),
        ({"held_out": POOR_MATMUL}, "matmul below trust bar: held-out pairwise 0.600 < 0.75"),
        ({"held_out": ONLY_DENSE}, "matmul below trust bar: no held-out or cross-validated"),
        # no held-out workload of the class: its cross-validated figure decides
        ({"held_out": ONLY_DENSE, "cross_validated": TRUSTED}, None),
        (
            {"held_out": ONLY_DENSE, "cross_validated": POOR_MATMUL},
            "matmul below trust bar: cross-validated pairwise 0.600 < 0.75",
        ),
        # a held-out figure outranks the cross-validated one, either way
        ({"held_out": POOR_MATMUL, "cross_validated": TRUSTED}, "held-out pairwise 0.600"),
        ({"held_out": TRUSTED, "cross_validated": POOR_MATMUL}, None),
    ],
)
def test_an_op_class_below_the_trust_bar_keeps_the_default(
    target: Target, meta: dict, reason: str | None
) -> None:
    """The model picks only for an op class whose held-out accuracy (or, with no held-out
    workload of the class, its cross-validated accuracy) passed the bar; elsewhere the default
    stays, and the prediction says which figure decided."""
    ds = design_space(tt.workload(UNSEEN), target)
    found = zero_shot.choose(ds, _LastFirst(), None, str(target), meta)
    if reason is None:
        assert found.config != ds.default and found.candidates > 1
    else:
        assert found.config == ds.default and found.candidates == 1
        assert found.source.startswith("default (") and reason in found.source


@pytest.mark.parametrize(
    ("gaps", "keeps_default"),
    [
        ({}, False),  # a file from before the gap was stored: the trust bar alone decides
        ({"confident_gap": 1e9}, True),  # the overall gap, with no figure for the class
        ({"per_op_class": {"matmul": {**TRUSTED, "confident_gap": 1e9}}}, True),
        ({"per_op_class": {"matmul": {**TRUSTED, "confident_gap": None}}}, True),  # never sure
        ({"confident_gap": 1e9, "per_op_class": {"matmul": {"confident_gap": 0.5}}}, False),
    ],
)
def test_a_candidate_leaves_the_default_only_when_scored_a_confident_gap_above_it(
    target: Target, gaps: dict, keeps_default: bool
) -> None:
    """``_LastFirst`` scores the last candidate highest, len - 1 above the default: a gap the
    model's cross-validation says it is seldom sure of keeps the default, and says so."""
    ds = design_space(tt.workload(UNSEEN), target)
    meta = {"held_out": TRUSTED, "cross_validated": gaps}
    found = zero_shot.choose(ds, _LastFirst(), None, str(target), meta)
    assert (found.config == ds.default) == keeps_default and found.candidates > 1
    assert found.source.startswith("default (no candidate scored") == keeps_default


def test_slow_candidates_end_the_choice_within_the_budget(
    target: Target, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Featurising stops before a chunk that would end past the budget at the time candidates
    have taken so far, not only once the budget is spent: a chunk of four slow candidates begun
    just inside it ran a depthwise layer's choice 0.6 s over. Here the first two chunks (always
    featurised) take 2 s and a third would end at 3 s, past the 2.6 s budget."""
    featurise = zero_shot.transferable_features

    def slowly(ds: Any, configs: list) -> np.ndarray:
        time.sleep(0.25 * len(configs))
        return featurise(ds, configs)

    monkeypatch.setattr(zero_shot, "transferable_features", slowly)
    monkeypatch.setattr(zero_shot, "BUDGET_SECONDS", 2.6)
    ds = design_space(tt.workload(UNSEEN), target)
    found = zero_shot.choose(ds, _LastFirst(), None, str(target), {"held_out": TRUSTED})
    assert found.candidates == 2 * zero_shot.CHUNK
    assert found.choice_seconds < zero_shot.BUDGET_SECONDS


def test_similar_workloads_share_the_loop_structure_and_op_class(target: Target) -> None:
    """A stride-2 layer of nearly the same size is farther than a stride-1 layer of a quite
    different size; a dense convolution is never the neighbour of a depthwise one."""
    layer = tt.workload("conv2d:N=1,C=32,H=112,W=112,K=32,R=3,S=3,stride=1,pad=1,groups=32")
    names = [
        tt.workload(spec).name
        for spec in (
            "conv2d:N=1,C=32,H=112,W=112,K=32,R=3,S=3,stride=2,pad=1,groups=32",
            "conv2d:N=1,C=32,H=112,W=112,K=64,R=3,S=3,stride=1,pad=1,groups=1",
            "conv2d:N=1,C=192,H=14,W=14,K=192,R=3,S=3,stride=1,pad=1,groups=192",
            "conv2d:N=1,C=32,H=112,W=112,K=32,R=5,S=5,stride=1,pad=2,groups=32",
        )
    ]
    assert zero_shot.nearest(layer, names) == [names[2], names[0], names[3]]


class _Prefers(CostModel):
    """Scores candidates by how close their features are to one config's."""

    def __init__(self, features: np.ndarray) -> None:
        super().__init__()
        self.wanted = features

    def _fit(self, features: np.ndarray, costs: np.ndarray, groups: np.ndarray) -> None:
        """Nothing to learn."""

    def predict(self, features: np.ndarray) -> np.ndarray:
        return -np.nansum(np.abs(features - self.wanted), axis=1)

    def _get_state(self) -> dict[str, Any]:
        return {}

    @classmethod
    def _from_state(cls, state: dict[str, Any]) -> _Prefers:
        raise NotImplementedError


def test_the_models_exemplars_of_similar_workloads_are_candidates(target: Target) -> None:
    """A model file's exemplars of the training workloads nearest in shape (same op, valid
    here) join the candidates even with no database, and the model may pick one."""
    ds = design_space(tt.workload(UNSEEN), target)
    good = next(c for c in ds.space.sample(np.random.default_rng(1), 8) if c != ds.default)
    train = tt.workload(TRAIN).name

    def shipped(workload: str, config: dict[str, Any]) -> dict[str, Any]:
        return {"workload": workload, "target": "avx2-1t", "cpu_kind": "zen", "config": config}

    exemplars = [
        shipped(train, good),
        shipped(train, {"not_a_knob": 1}),  # not a point of this space
        shipped(tt.workload("dense:M=24,N=32,K=16").name, good),  # another op
        shipped("matmul:M=banana", good),  # a name this version cannot parse
        *(shipped(tt.workload(f"matmul:M={m},N=32,K=16").name, good) for m in (512, 1024, 2048)),
    ]
    found = zero_shot.shipped_configs(ds, exemplars)
    assert found[0] == (good, f"exemplar {train} (zen)")
    assert len(found) == 3, "the nearest three workloads only: M=2048 is the farthest"
    model = _Prefers(transferable_features(ds, [good]))
    chosen = zero_shot.choose(ds, model, None, str(target), {"held_out": TRUSTED}, exemplars)
    assert chosen.config == good and chosen.source == f"exemplar {train} (zen)"


def test_a_tune_starts_its_prior_from_similar_workloads_best_configs(
    prior: Path, target: Target, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a zero-shot compile ranks (the database's best of similar workloads, then the
    model's exemplars) seeds the model search's first pool; strategies without a prior to rank
    them are not given any."""
    ds = design_space(tt.workload(UNSEEN), target)
    with open_database(prior, readonly=True) as database:
        best = database.best(tt.workload(TRAIN).name, str(target))
        seeds = zero_shot.transfer_seeds(ds, database, str(target))
    assert best is not None and seeds[0] == best.config
    assert all(ds.space.is_valid(c) for c in seeds)
    assert len({ds.space.config_key(c) for c in seeds}) == len(seeds)
    built: dict[str, Any] = {}

    def spy(name: str, *args: Any, **options: Any) -> Any:
        built[name] = make_tuning_strategy(name, *args, **options)
        return built[name]

    monkeypatch.setattr(loop, "make_tuning_strategy", spy)
    for strategy in ("model", "random"):
        tt.tune(UNSEEN, trials=0, db=prior, target=target, strategy=strategy)
    assert built["model"].seeds == seeds
    assert not hasattr(built["random"], "seeds")
