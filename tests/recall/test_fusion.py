"""Fusion functions."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest

from memories.stores.recall import ScoredId, min_max_fusion, reciprocal_rank_fusion

Fuse = Callable[[Sequence[Sequence[ScoredId]]], list[ScoredId]]
FUSIONS: list[Fuse] = [min_max_fusion, reciprocal_rank_fusion]


def _ranking(*ids: str) -> list[ScoredId]:
    return [ScoredId(doc_id, float(len(ids) - i)) for i, doc_id in enumerate(ids)]


@pytest.mark.parametrize("fuse", FUSIONS)
def test_document_top_in_both_lists_is_top_fused(fuse: Fuse) -> None:
    dense = _ranking("x", "a", "b", "c")
    lexical = _ranking("x", "d", "c", "e")
    assert fuse([dense, lexical])[0].id == "x"


@pytest.mark.parametrize("fuse", FUSIONS)
def test_ties_do_not_depend_on_input_order(fuse: Fuse) -> None:
    one, two = _ranking("q", "p"), _ranking("b", "a")
    forward = fuse([one, two])
    backward = fuse([two, one])
    assert forward == backward
    assert [item.id for item in forward] == ["b", "q", "a", "p"]  # equal scores: by id


@pytest.mark.parametrize("fuse", FUSIONS)
def test_every_candidate_is_kept(fuse: Fuse) -> None:
    fused = fuse([_ranking("a", "b"), _ranking("c"), []])
    assert sorted(item.id for item in fused) == ["a", "b", "c"]


def test_min_max_fusion_weights_decide_between_disagreeing_lists() -> None:
    dense, lexical = _ranking("a", "b"), _ranking("b", "a")
    assert min_max_fusion([dense, lexical], weights=[0.7, 0.3])[0].id == "a"
    assert min_max_fusion([dense, lexical], weights=[0.3, 0.7])[0].id == "b"


def test_min_max_fusion_rescales_each_list() -> None:
    # Raw scores on very different scales: cosine-like and BM25-like.
    dense = [ScoredId("a", 0.31), ScoredId("b", 0.30)]
    lexical = [ScoredId("b", 12.0), ScoredId("c", 3.0)]
    fused = {item.id: item.score for item in min_max_fusion([dense, lexical])}
    assert fused == pytest.approx({"a": 1.0, "b": 1.0, "c": 0.0})


def test_reciprocal_rank_fusion_uses_ranks_not_scores() -> None:
    fused = reciprocal_rank_fusion([[ScoredId("a", 100.0), ScoredId("b", 99.0)]], k=0)
    assert [(item.id, item.score) for item in fused] == [("a", 1.0), ("b", 0.5)]


def test_wrong_number_of_weights_is_rejected() -> None:
    with pytest.raises(ValueError, match="2 weights for 1 rankings"):
        min_max_fusion([_ranking("a")], weights=[0.5, 0.5])
