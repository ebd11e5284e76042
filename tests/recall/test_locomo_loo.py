"""The LoCoMo benchmark's choice by leave-one-out, and its score calibration fit."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from benchmarks.locomo import (
    PREVIOUS_DEFAULT,
    Candidates,
    Search,
    Turn,
    Variant,
    _logistic,
    leave_one_out,
    lexical_keys,
    refinements,
    sentence_keys,
    time_expanded,
)
from memories.stores.recall import ScoredId, TurnPosition

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
        dense={(False, 0.0): tuple(dense)},
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


def _turn(text: str, caption: str | None = None) -> Turn:
    return Turn("D1:1", 1, 0, "Ann", text, caption, "1:56 pm on 8 May, 2023")


def test_sentence_keys_give_each_sentence_and_the_photo_a_key() -> None:
    turn = _turn("Wow! I adopted a dog last week. She loves the beach.", caption="a dog on sand")
    assert sentence_keys(turn) == [
        "Ann: Wow! I adopted a dog last week.",  # the one-word fragment joins its neighbour
        "Ann: She loves the beach.",
        "Ann: [shared a photo: a dog on sand]",
    ]


def test_a_turn_of_one_sentence_keeps_one_key_its_whole_text() -> None:
    assert sentence_keys(_turn("Great, thanks! See you.")) == ["Ann: Great, thanks! See you."]


def test_sentence_weights_are_tried_only_around_a_variant_with_sentence_keys() -> None:
    keyed = replace(DENSE, sentence_weight=0.5)
    assert {v.sentence_weight for v in refinements(keyed)} == {0.25, 0.5, 0.75, 1.0}
    assert {v.sentence_weight for v in refinements(DENSE)} == {0.0}


def test_the_logistic_fit_recovers_known_weights() -> None:
    rng = np.random.default_rng(7)
    x = rng.uniform(0, 1, 20_000)
    y = (rng.uniform(0, 1, x.size) < 1 / (1 + np.exp(-(-2.0 + 4.0 * x)))).astype(np.float64)
    bias, weight = _logistic([x], y)
    assert abs(bias + 2.0) < 0.2 and abs(weight - 4.0) < 0.3
