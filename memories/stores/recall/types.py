"""Small records shared by the recall pieces."""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["ScoredId"]


class ScoredId(NamedTuple):
    """A document id with the score a ranker gave it; higher is better.

    A named tuple: recall builds and sorts thousands of these per query, and a
    tuple is several times cheaper to make than a frozen dataclass.
    """

    id: str
    """The document's id, as the caller stored it."""
    score: float
    """The ranker's score; only comparable within one ranking."""
