"""The record a vector memory's search returns."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from langchain_core.documents import Document

from memories.stores.recall.types import RankParts

__all__ = ["SearchResult"]


@dataclass(frozen=True)
class SearchResult:
    """One stored document, as a search found it."""

    text: str
    """The stored text, e.g. ``"input: hi\\noutput: hello"``."""
    metadata: dict[str, Any] = field(default_factory=dict)
    """Its metadata: namespace, session, turn, timestamp, speakers and the caller's own keys."""
    score: float = 0.0
    """How well it matched, 0 to 1: with the default (Chroma) backend, recall's score on a
    calibrated scale, the best result's about the probability that it answers the query, so
    it compares across searches and namespaces (:mod:`memories.stores.recall.scores`); 0 from
    a LangChain vector store's retriever."""
    id: str = ""
    """Its id in the store (for :meth:`~memories.long_term.vector.VectorMemory.delete`)."""
    ranking: RankParts | None = None
    """Why it ranked where it did: the dense, lexical and neighbour parts of its ``score``,
    which add up to it (None from a backend that does not say)."""

    def to_document(self) -> Document:
        """A LangChain ``Document`` with the same text, metadata and id."""
        return Document(page_content=self.text, metadata=dict(self.metadata), id=self.id or None)
