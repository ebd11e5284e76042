"""The cross-dataset recall benchmark's own pieces: its plain BM25, its checks, its choice."""

from __future__ import annotations

import math

import pytest

from benchmarks.recall_datasets import (
    ASKED,
    Case,
    Doc,
    PlainBM25,
    Query,
    best_on,
    contradicts,
    exchanges,
    figures,
)
from memories.stores.recall import RecallConfig


def test_plain_bm25_matches_the_okapi_formula_by_hand() -> None:
    bm25 = PlainBM25(["the cat sat", "the dog", "cat cat dog bird"], k1=1.2, b=0.75)
    average = (3 + 2 + 4) / 3
    idf = math.log(1 + (3 - 2 + 0.5) / (2 + 0.5))  # "cat" is in two documents of three
    expected = idf * 2 * 2.2 / (2 + 1.2 * (1 - 0.75 + 0.75 * 4 / average))
    assert bm25.scores("Cat!")[2] == pytest.approx(expected)
    assert bm25.scores("fish") == [0.0, 0.0, 0.0]


def test_order_contradicts_scores_only_past_twice_and_point_three() -> None:
    assert contradicts([("a", 0.1), ("b", 0.5)])
    assert not contradicts([("a", 0.3), ("b", 0.5)])  # not twice as high
    assert not contradicts([("a", 0.05), ("b", 0.2)])  # the higher is below 0.3
    assert not contradicts([("a", 0.9), ("b", 0.5), ("c", 0.1)])


def test_an_exchange_pairs_a_user_message_with_the_reply_after_it() -> None:
    session = [
        {"role": "assistant", "content": "hello"},
        {"role": "user", "content": "q1", "has_answer": True},
        {"role": "assistant", "content": "a1"},
        {"role": "user", "content": "q2"},
    ]
    assert exchanges(session) == [("q1", "a1", True)]


def test_sessions_rank_by_their_first_turn_in_the_results() -> None:
    docs = tuple(Doc(f"t{i}", "x", s, i, (), None) for i, s in enumerate("aabcdef"))
    case = Case("lme-sessions", docs, (Query("q", frozenset(), ("b", "f")),))
    ranked = [(d.id, 1.0) for d in docs]
    scored = figures(case, 0, ranked)
    assert scored["any@5"] == 100.0 and scored["all@5"] == 0.0 and scored["all@10"] == 100.0


def test_a_difference_the_data_cannot_resolve_keeps_the_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(ASKED, "lme-small", 60)  # one question is 1.7 points
    configs = [RecallConfig(speaker_weight=0.0), RecallConfig()]
    same = {"lme-small": {"hit@3": 80.0}}
    assert best_on([same, same], configs, ["lme-small"]) == 1
    within = {"lme-small": {"hit@3": 81.6}}
    assert best_on([within, same], configs, ["lme-small"]) == 1
    better = {"lme-small": {"hit@3": 83.4}}
    assert best_on([better, same], configs, ["lme-small"]) == 0
