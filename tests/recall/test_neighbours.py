"""Neighbour smoothing and the rank_candidates pipeline."""

from __future__ import annotations

from dataclasses import replace
from datetime import date

import pytest

from memories.errors import ConfigError
from memories.stores.recall import (
    RecallConfig,
    ScoredId,
    TurnPosition,
    neighbour_positions,
    rank_candidates,
    rank_parts,
    smooth_neighbours,
)

POSITIONS = {f"s1-{i}": TurnPosition("s1", i) for i in range(6)} | {
    f"s2-{i}": TurnPosition("s2", i) for i in range(3)
}


def test_turn_next_to_a_strong_match_is_lifted() -> None:
    scored = [ScoredId("s1-2", 1.0), ScoredId("s1-5", 0.6), ScoredId("s2-0", 0.55)]
    smoothed = smooth_neighbours(scored, POSITIONS, weight=0.5, window=1)
    scores = {item.id: item.score for item in smoothed}
    assert scores["s1-1"] == scores["s1-3"] == 0.5  # reached although never retrieved
    assert scores["s1-2"] == 1.0  # no scored neighbours: unchanged
    assert scores["s1-4"] == pytest.approx(0.3)
    assert "s1-0" not in scores  # two turns away, outside the window
    assert "s2-1" in scores and "s1-5" in scores


def test_neighbours_of_other_sessions_lend_nothing() -> None:
    scored = [ScoredId("s1-0", 1.0), ScoredId("s2-1", 1.0)]
    smoothed = {i.id: i.score for i in smooth_neighbours(scored, POSITIONS, weight=1, window=1)}
    assert smoothed["s1-0"] == 1.0 and smoothed["s2-1"] == 1.0
    assert smoothed["s1-1"] == 1.0 and smoothed["s2-0"] == 1.0 and smoothed["s2-2"] == 1.0


def test_evidence_between_two_matches_overtakes_them() -> None:
    scored = [ScoredId("s1-1", 0.8), ScoredId("s1-3", 0.8), ScoredId("s2-0", 0.9)]
    smoothed = smooth_neighbours(scored, POSITIONS, weight=0.7, window=1)
    assert smoothed[0].id == "s1-2"  # 0.7 * (0.8 + 0.8) = 1.12


def test_zero_weight_only_sorts() -> None:
    scored = [ScoredId("s1-1", 0.2), ScoredId("s1-2", 0.9)]
    assert smooth_neighbours(scored, POSITIONS, weight=0.0, window=2) == sorted(
        scored, key=lambda i: -i.score
    )


def test_neighbour_positions_within_window_excluding_given() -> None:
    around = neighbour_positions([TurnPosition("s", 0), TurnPosition("s", 1)], window=2)
    assert around == {TurnPosition("s", 2), TurnPosition("s", 3)}


def test_rank_candidates_modes_use_their_lists() -> None:
    dense = [ScoredId("d", 0.9), ScoredId("x", 0.5)]
    lexical = [ScoredId("l", 7.0), ScoredId("x", 6.0)]
    plain = RecallConfig(neighbour_weight=0.0)
    assert [i.id for i in rank_candidates(replace(plain, mode="dense"), dense=dense)] == ["d", "x"]
    only_lexical = rank_candidates(replace(plain, mode="bm25"), dense=dense, lexical=lexical)
    assert [i.id for i in only_lexical] == ["l", "x"]
    hybrid = rank_candidates(plain, dense=dense, lexical=lexical, limit=3)
    # l: 0.6 lexical; x: 0.6 * 6/7 lexical (BM25 rescaled from 0, not from its weakest hit);
    # d: dense 0.4 and no lexical match.
    assert [i.id for i in hybrid] == ["l", "x", "d"]


def test_rank_candidates_smooths_when_given_positions() -> None:
    dense = [
        ScoredId("s1-1", 0.9), ScoredId("s1-3", 0.9), ScoredId("s1-2", 0.3), ScoredId("s2-0", 0.2)
    ]  # fmt: skip
    config = RecallConfig(mode="dense", neighbour_weight=0.75, neighbour_window=1)
    assert rank_candidates(config, dense=dense)[0].id == "s1-1"
    assert rank_candidates(config, dense=dense, positions=POSITIONS)[0].id == "s1-2"


def test_a_turn_no_ranker_found_never_rises_above_one_that_was() -> None:
    # s1-3 sits two turns from two strong matches but neither ranker found it or a turn beside it.
    dense = [ScoredId("s1-1", 0.9), ScoredId("s1-5", 0.9), ScoredId("s2-0", 0.2)]
    lexical = [ScoredId("s1-1", 3.0), ScoredId("s2-0", 0.5)]
    config = RecallConfig(neighbour_weight=0.75, neighbour_window=2)
    ranked = rank_candidates(config, dense=dense, lexical=lexical, positions=POSITIONS)
    order = [item.id for item in ranked]
    assert order.index("s1-3") > max(order.index(i) for i in ("s1-1", "s1-5", "s2-0"))


def test_the_turn_beside_a_match_is_its_exchanges_other_half_and_may_rise() -> None:
    """Between utterances, a question and its reply are one exchange split in two documents."""
    lexical = [ScoredId("s1-1", 5.0), ScoredId("s2-0", 1.0)]  # the question, a weak match
    config = RecallConfig(neighbour_weight=0.5, neighbour_window=2)
    ranked = rank_candidates(config, lexical=lexical, positions=POSITIONS)
    order = [item.id for item in ranked]
    assert order[:3] == ["s1-1", "s1-0", "s1-2"]  # the reply (and the turn before) borrow
    assert order.index("s1-3") > order.index("s2-0")  # two turns away: still held below


def test_exchanges_neither_lend_nor_borrow() -> None:
    # Each turn holds a question and its reply (save_context): no evidence next door.
    dense = [
        ScoredId("s1-1", 0.9), ScoredId("s1-3", 0.9), ScoredId("s1-2", 0.3), ScoredId("s2-0", 0.2)
    ]  # fmt: skip
    config = RecallConfig(mode="dense", neighbour_weight=0.75, neighbour_window=1)
    both = frozenset({"human", "ai"})
    ranked = rank_candidates(
        config, dense=dense, positions=POSITIONS, speakers={i: both for i in POSITIONS}
    )
    assert [item.id for item in ranked] == ["s1-1", "s1-3", "s1-2", "s2-0"]
    said_alone = {i: frozenset({"maya"}) for i in POSITIONS}
    lent = rank_candidates(config, dense=dense, positions=POSITIONS, speakers=said_alone)
    assert lent[0].id == "s1-2"  # utterances still lend


def test_config_round_trips_and_validates() -> None:
    config = RecallConfig(mode="bm25", dense_weight=0.3)
    assert RecallConfig.from_dict(config.to_dict()) == config
    with pytest.raises(ConfigError, match="dense, bm25, hybrid"):
        RecallConfig(mode="sparse")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="Unknown RecallConfig option"):
        RecallConfig.from_dict({"nope": 1})
    with pytest.raises(ConfigError, match="dense_weight"):
        RecallConfig(dense_weight=2.0)


def test_config_builds_a_matching_lexical_index() -> None:
    index = RecallConfig(bm25_k1=0.9, bm25_b=0.3, stopwords="lucene", stem=False).lexical_index()
    assert (index.k1, index.b) == (0.9, 0.3)
    assert index.analyzer.terms("What did they paint?") == ["what", "did", "paint"]


def test_lexical_text_leads_with_the_date() -> None:
    assert RecallConfig().lexical_text("Hi", when=date(2023, 5, 8)) == "On 8 May 2023, Hi"
    assert RecallConfig(lexical_dates=False).lexical_text("Hi", when=date(2023, 5, 8)) == "Hi"
    assert RecallConfig().lexical_text("Hi") == "Hi"


def test_a_position_map_kept_by_the_caller_ranks_as_gathered_positions() -> None:
    scored = [ScoredId("s1-2", 1.0), ScoredId("s1-5", 0.6), ScoredId("s2-0", 0.55)]
    candidates = {i.id: POSITIONS[i.id] for i in scored}
    doc_at = {(p.session, p.index): doc_id for doc_id, p in POSITIONS.items()}
    kept = smooth_neighbours(scored, candidates, weight=0.5, window=2, doc_at=doc_at)
    assert kept == smooth_neighbours(scored, POSITIONS, weight=0.5, window=2)
    # Only documents of the map can be returned.
    narrow = smooth_neighbours(scored, candidates, weight=0.5, window=2, doc_at={})
    assert {i.id for i in narrow} == set(candidates)


def test_a_limit_keeps_the_best_in_the_same_order() -> None:
    scored = [ScoredId("s1-2", 1.0), ScoredId("s1-5", 0.6), ScoredId("s2-0", 0.55)]
    everything = smooth_neighbours(scored, POSITIONS, weight=0.5, window=2)
    assert smooth_neighbours(scored, POSITIONS, weight=0.5, window=2, limit=3) == everything[:3]


@pytest.mark.parametrize("fusion", ["min_max", "rrf"])
def test_rank_parts_add_up_to_the_score_each_result_ranked_by(fusion: str) -> None:
    config = RecallConfig(fusion=fusion, neighbour_weight=0.5, neighbour_window=1)  # type: ignore[arg-type]
    dense = [ScoredId("s1-2", 0.9), ScoredId("s1-5", 0.4), ScoredId("s2-0", 0.2)]
    lexical = [ScoredId("s2-0", 7.0), ScoredId("s1-2", 3.0), ScoredId("s2-2", 1.0)]
    ranked = rank_candidates(config, dense=dense, lexical=lexical, positions=POSITIONS, limit=9)
    parts = rank_parts(config, dense=dense, lexical=lexical, ranked=ranked)
    assert list(parts) == [s.id for s in ranked]
    for item in ranked:
        assert sum(parts[item.id]) == pytest.approx(item.score)
    assert parts["s1-1"] == (
        0.0,
        0.0,
        pytest.approx(ranked[[s.id for s in ranked].index("s1-1")].score),
    )
    assert parts["s1-5"].lexical == 0.0 and parts["s1-2"].dense > 0  # s1-5: no BM25 hit
    assert parts["s2-2"].dense == 0.0 and parts["s2-0"].lexical > 0  # s2-2: no dense hit
    alone = rank_candidates(replace(config, neighbour_weight=0.0), dense=dense, lexical=lexical)
    unsmoothed = rank_parts(config, dense=dense, lexical=lexical, ranked=alone)
    assert all(p.neighbours == pytest.approx(0.0) for p in unsmoothed.values())
