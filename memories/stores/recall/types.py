"""Small records shared by the recall pieces."""

from __future__ import annotations

import heapq
from collections.abc import Mapping
from typing import NamedTuple

__all__ = ["RankParts", "ScoredId", "best_first"]


class ScoredId(NamedTuple):
    """A document id with the score a ranker gave it; higher is better.

    A named tuple: recall builds and sorts thousands of these per query, and a
    tuple is several times cheaper to make than a frozen dataclass.
    """

    id: str
    """The document's id, as the caller stored it."""
    score: float
    """The ranker's score; only comparable within one ranking."""


class RankParts(NamedTuple):
    """Why a search result ranked where it did: its fused score, split by where it came from.

    The parts add up to the score recall ranked it by (and, put on the calibrated scale
    with it, to the result's ``score``: :func:`~memories.stores.recall.scores.calibrated_scale`).
    """

    dense: float
    """From the embedding ranker: its weight times its rescaled similarity (its fused share)."""
    lexical: float
    """From BM25, the same way."""
    neighbours: float
    """Lent by the turns around it in its session (and a boost when the query named its speaker)."""


def best_first(scores: Mapping[str, float], limit: int | None = None, /) -> list[ScoredId]:
    """Scored ids best first, ties by id (not input order); only the best ``limit`` if given."""
    ranked = heapq.nsmallest(len(scores) if limit is None else limit, scores.items(), key=_order)
    return [ScoredId(doc_id, score) for doc_id, score in ranked]


def _order(item: tuple[str, float]) -> tuple[float, str]:
    return -item[1], item[0]
