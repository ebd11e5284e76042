"""Small records shared by the recall pieces."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ScoredId"]


@dataclass(frozen=True, order=False)
class ScoredId:
    """A document id with the score a ranker gave it; higher is better."""

    id: str
    """The document's id, as the caller stored it."""
    score: float
    """The ranker's score; only comparable within one ranking."""
