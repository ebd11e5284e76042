"""Small records shared by the recall pieces."""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["RankParts", "ScoredId"]


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
