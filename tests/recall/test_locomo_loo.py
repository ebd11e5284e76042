"""The LoCoMo benchmark's choice by leave-one-out, and its score calibration fit."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from benchmarks.locomo import (
    PREVIOUS_DEFAULT,
    Candidates,
    Search,
    Variant,
    _logistic,
    leave_one_out,
    lexical_keys,
    refinements,
    time_expanded,
)
from memories.recall import ScoredId, TurnPosition

DENSE = Variant(replace(PREVIOUS_DEFAULT, dense_weight=1.0, neighbour_weight=0.0))
LEXICAL = Variant(replace(PREVIOUS_DEFAULT, dense_weight=0.0, neighbour_weight=0.0))


def _question(found_by: str) -> Candidates:
    """A question whose evidence only the ``found_by`` ranker puts in its top 10."""
    others = [ScoredId(f"d{i}", 1.0 - i / 100) for i in range(30)]
    hit = [ScoredId("evidence", 2.0), *others]
    miss = [*others, ScoredId("evidence", 0.0)]
    dense, lexical = (hit, miss) if found_by == "dense" else (miss, hit)
    keys = lexical_keys([DENSE, LEXICAL, *refinements(DENSE), *refinements(LEXICAL)])
    ids = ["evidence", *(f"d{i}" for i in range(30))]
    return Candidates(
        category=4,
        evidence=("evidence",),
        dense={False: tuple(dense)},
        lexical=dict.fromkeys(keys, tuple(lexical)),
        positions={i: TurnPosition(i, 0) for i in ids},
        doc_at={},
        speakers={},
        named=frozenset(),
    )


def test_a_held_out_conversation_never_counts_in_its_own_choice() -> None:
    # Dense finds the evidence of conversation "a" (3 questions), lexical that of "b" and
    # "c" (2 each): with "b" held out the others favour dense 3 to 2, although lexical
    # would win 4 to 3 had "b" been counted.
    search = Search(
        {
            "a": [_question("dense")] * 3,
            "b": [_question("lexical")] * 2,
            "c": [_question("lexical")] * 2,
        }
    )
    chosen, on_all = leave_one_out(search, [DENSE, LEXICAL])
    assert chosen["a"] == LEXICAL
    assert chosen["b"] == chosen["c"] == DENSE
    assert search.pooled(chosen).rate("any", 10) == 0.0  # every fold chose what misses it
    assert on_all == LEXICAL  # 4 to 3 on all three


def test_time_expansion_touches_only_questions_about_when() -> None:
    assert time_expanded("When did Ann adopt the dog?").endswith("ago recently")
    assert time_expanded("What is the dog called?") == "What is the dog called?"


def test_the_logistic_fit_recovers_known_weights() -> None:
    rng = np.random.default_rng(7)
    x = rng.uniform(0, 1, 20_000)
    y = (rng.uniform(0, 1, x.size) < 1 / (1 + np.exp(-(-2.0 + 4.0 * x)))).astype(np.float64)
    bias, weight = _logistic([x], y)
    assert abs(bias + 2.0) < 0.2 and abs(weight - 4.0) < 0.3
