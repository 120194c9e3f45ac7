"""SearchSpace: validity, walking (sample/mutate/crossover/neighbours), features, JSON."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tensortune.space import Constraint, Knob, SearchSpace

TILES = (1, 2, 4, 8, 16, 32)


def fits(c: dict) -> bool:
    return c["ti"] * c["tj"] <= 32


def make_space() -> SearchSpace:
    return SearchSpace(
        [
            Knob("ti", TILES),
            Knob("tj", TILES),
            Knob("order", ("ijk", "ikj", "jik")),
            Knob("vec", (False, True)),
            Knob("unroll", (0, 1, 2)),
        ],
        [Constraint("fits_registers", fits)],
    )


SPACE = make_space()
VALID = list(SPACE.enumerate())

valid_configs = st.sampled_from(VALID)
seeds = st.integers(0, 2**32 - 1)


def differing(a: dict, b: dict) -> list[str]:
    return [k for k in a if SPACE.knob(k).lookup(a[k]) != SPACE.knob(k).lookup(b[k])]


# -- knobs -------------------------------------------------------------------------------


def test_knob_kinds_are_inferred() -> None:
    assert (Knob("t", (1, 2, 4)).kind, Knob("t", (1, 2, 4)).ordered) == ("int", True)
    assert (Knob("o", ("a", "b")).kind, Knob("o", ("a", "b")).ordered) == ("categorical", False)
    assert (Knob("v", (False, True)).kind, Knob("v", (False, True)).ordered) == ("bool", False)
    assert Knob("c", [3, 1, 2], ordered=False).choices == (3, 1, 2)  # lists become tuples
    assert Knob("s", ("small", "big"), ordered=True).ordered


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (("", (1,)), "non-empty"),
        (("k", ()), "no choices"),
        (("k", (1, 1)), "duplicate"),
        (("k", (1.5, 2)), "JSON scalar"),
        (("k", (4, 2, 1)), "strictly increasing"),
        (("k", (1, "a"), "int"), "non-int"),
        (("k", (0, 1), "bool"), "non-bool"),
        (("k", (1, 2), "float"), "kind must be"),
    ],
)
def test_bad_knobs_are_rejected(args: tuple, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        Knob(*args)


def test_true_and_one_are_different_choices() -> None:
    knob = Knob("k", (1, True, "1"))
    assert knob.kind == "categorical"
    assert [knob.lookup(v) for v in (1, True, "1", 1.0, [1])] == [0, 1, 2, None, None]


def test_duplicate_names_are_rejected() -> None:
    with pytest.raises(ValueError, match="duplicate knob"):
        SearchSpace([Knob("a", (1,)), Knob("a", (2,))])
    with pytest.raises(ValueError, match="duplicate constraint"):
        SearchSpace([Knob("a", (1,))], [Constraint("c", bool), Constraint("c", bool)])


# -- validity ----------------------------------------------------------------------------


def test_size_and_enumerate() -> None:
    assert SPACE.size == 6 * 6 * 3 * 2 * 3
    brute = [
        dict(zip(SPACE.names, values, strict=True))
        for values in itertools.product(*(k.choices for k in SPACE.knobs))
    ]
    assert [c for c in brute if fits(c)] == VALID  # lexicographic, valid only, each once
    assert len({SPACE.config_key(c) for c in VALID}) == len(VALID)


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"ti": 3}, "knob 'ti' has no choice 3"),
        ({"vec": 1}, "knob 'vec' has no choice 1"),
        ({"tj": True}, "knob 'tj' has no choice True"),
        ({"extra": 1}, "unknown knob 'extra'"),
        ({"ti": 32, "tj": 32}, "constraint 'fits_registers' violated"),
    ],
)
def test_validate_names_the_problem(change: dict, match: str) -> None:
    config = {**VALID[0], **change}
    assert not SPACE.is_valid(config)
    with pytest.raises(ValueError, match=match):
        SPACE.validate(config)


def test_missing_knob_is_reported() -> None:
    config = dict(VALID[0])
    del config["order"]
    with pytest.raises(ValueError, match="missing knob 'order'"):
        SPACE.validate(config)
    SPACE.validate(VALID[0])


# -- sampling and moves ------------------------------------------------------------------


def test_sample_is_valid_deterministic_and_covers_choices() -> None:
    configs = SPACE.sample(np.random.default_rng(0), 500)
    assert len(configs) == 500 and all(SPACE.is_valid(c) for c in configs)
    assert configs == SPACE.sample(0, 500)
    for knob in SPACE.knobs:
        assert {c[knob.name] for c in configs} == set(knob.choices)


def test_sample_gives_up_on_impossible_constraints() -> None:
    space = SearchSpace([Knob("a", (1, 2))], [Constraint("never", lambda c: False)])
    assert space.sample(0, 5, max_tries=100) == []
    assert list(space.enumerate()) == []


@settings(max_examples=200, deadline=None)
@given(valid_configs, seeds, st.integers(1, 4))
def test_mutate_is_valid_and_local(config: dict, seed: int, n_knobs: int) -> None:
    child = SPACE.mutate(config, seed, n_knobs=n_knobs)
    assert SPACE.is_valid(child)
    changed = differing(config, child)
    assert 1 <= len(changed) <= n_knobs  # every config here has a valid mutant
    for name in changed:
        knob = SPACE.knob(name)
        if knob.ordered:
            assert 1 <= abs(knob.lookup(child[name]) - knob.lookup(config[name])) <= 2


@settings(max_examples=200, deadline=None)
@given(valid_configs, valid_configs, seeds)
def test_crossover_is_valid_and_inherits(a: dict, b: dict, seed: int) -> None:
    child = SPACE.crossover(a, b, seed)
    assert SPACE.is_valid(child)
    assert all(child[k] in (a[k], b[k]) for k in SPACE.names)


@settings(max_examples=100, deadline=None)
@given(valid_configs)
def test_neighbours_differ_in_one_knob_by_one_step(config: dict) -> None:
    for other in SPACE.neighbours(config):
        assert SPACE.is_valid(other)
        (name,) = differing(config, other)
        knob = SPACE.knob(name)
        if knob.ordered:
            assert abs(knob.lookup(other[name]) - knob.lookup(config[name])) == 1


def test_neighbours_of_a_corner() -> None:
    corner = {"ti": 1, "tj": 32, "order": "ijk", "vec": False, "unroll": 0}
    got = {SPACE.config_key(c) for c in SPACE.neighbours(corner)}
    # ti=2 would break the constraint; unroll is an ordered int, so only 0 -> 1 is one step;
    # unordered knobs reach every other value
    expected = [{"tj": 16}, {"order": "ikj"}, {"order": "jik"}, {"vec": True}, {"unroll": 1}]
    assert got == {SPACE.config_key({**corner, **e}) for e in expected}


def test_mutate_returns_a_copy_when_nothing_else_is_valid() -> None:
    space = SearchSpace([Knob("a", (1, 2, 4))], [Constraint("only_two", lambda c: c["a"] == 2)])
    assert space.mutate({"a": 2}, 0) == {"a": 2}


# -- features ----------------------------------------------------------------------------


def test_encode_columns() -> None:
    assert SPACE.feature_names == (
        "ti.log2", "ti.index", "tj.log2", "tj.index",
        "order=ijk", "order=ikj", "order=jik", "vec", "unroll.slog2", "unroll.index",
    )  # fmt: skip
    vec = SPACE.encode({"ti": 8, "tj": 2, "order": "jik", "vec": True, "unroll": 2})
    np.testing.assert_allclose(vec, [3, 3, 1, 1, 0, 0, 1, 1, np.log2(3), 2])
    assert SPACE.encode_batch(VALID[:5]).shape == (5, len(SPACE.feature_names))


# -- serialisation -----------------------------------------------------------------------


def test_json_round_trip() -> None:
    text = SPACE.to_json()
    json.loads(text)
    again = SearchSpace.from_json(text, {"fits_registers": fits})
    assert again == SPACE
    assert again.to_json() == text
    assert list(again.enumerate()) == VALID
    assert [Knob(**k.to_dict()) for k in SPACE.knobs] == list(SPACE.knobs)


def test_from_json_needs_every_constraint() -> None:
    with pytest.raises(ValueError, match="'fits_registers' not in the registry"):
        SearchSpace.from_json(SPACE.to_json())


def test_config_key_is_canonical() -> None:
    a = {"ti": 1, "tj": 2, "order": "ijk", "vec": True, "unroll": 0}
    b = dict(reversed(list(a.items())))
    assert SPACE.config_key(a) == SPACE.config_key(b)
    assert SPACE.config_key(a) == '{"order":"ijk","ti":1,"tj":2,"unroll":0,"vec":true}'


def test_a_knob_added_later_fills_configs_recorded_without_it():
    """A config stored before ``pack`` existed validates, encodes and builds as ``absent_means``
    says; a knob without ``absent_means`` is still required."""
    old = SearchSpace([Knob("tile", (4, 8))])
    new = SearchSpace([Knob("tile", (4, 8)), Knob("pack", (True, False), absent_means=False)])
    recorded = {"tile": 8}
    assert old.is_valid(recorded) and new.is_valid(recorded)
    assert new.complete(recorded) == {"tile": 8, "pack": False}
    assert (new.indices([recorded]) == new.indices([{"tile": 8, "pack": False}])).all()
    required = SearchSpace([Knob("tile", (4, 8)), Knob("pack", (True, False))])
    with pytest.raises(ValueError, match="missing knob 'pack'"):
        required.validate(recorded)
    with pytest.raises(ValueError, match="absent_means 1 is not one of its choices"):
        Knob("pack", (True, False), absent_means=1)
    assert Knob(**new.knob("pack").to_dict()) == new.knob("pack")
