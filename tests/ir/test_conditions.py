"""Guards as conjuncts: the split the vectorize pass, the IR printer and the C printer share."""

from __future__ import annotations

from tensortune.ir.conditions import conjunction, conjuncts, split_conjuncts
from tensortune.te.expr import Var

i, j, v = Var("i"), Var("j"), Var("v")


def test_conjuncts_of_a_conjunction_are_its_terms_in_order():
    terms = [i < 4, v < 3, j > 0]
    assert conjuncts(conjunction(terms)) == terms
    assert conjuncts(i < 4) == [i < 4]


def test_a_disjunction_is_one_conjunct():
    either = (i < 4) | (v < 3)
    assert conjuncts(either & (j > 0)) == [either, j > 0]


def test_split_keeps_order_and_sends_any_use_of_a_loop_var_inside():
    cond = conjunction([v < 3, i < 4, (i + v) < 9, j > 0])
    assert split_conjuncts(cond, {v}) == ([i < 4, j > 0], [v < 3, (i + v) < 9])
    assert split_conjuncts(cond, {v, j}) == ([i < 4], [v < 3, (i + v) < 9, j > 0])
    assert split_conjuncts(cond, set()) == (conjuncts(cond), [])
