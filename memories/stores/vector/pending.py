"""This process's queued documents: searchable by their embedding before the store has them.

Every process finds a queued document lexically (it is in the recall index at once);
the one that queued it keeps its embedding here, for its own dense searches.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from memories.stores.recall.types import ScoredId, best_first
from memories.stores.vector.recall_index import document_date
from memories.stores.vector.scoring import cosines

__all__ = ["PendingDocument", "PendingDocuments", "document_date"]


@dataclass
class PendingDocument:
    """A document this process has queued for the store, searchable before the store has it."""

    text: str
    metadata: dict[str, Any]
    """Its metadata as the store will return it (namespace and turn included)."""
    vector: list[float] | None = None
    """Its embedding once computed, else None."""
    claimed: bool = False
    """Whether someone is computing its embedding now (others wait rather than redo it)."""


class PendingDocuments:
    """The documents of one namespace that this process queued and the store does not have yet.

    Each change takes :attr:`lock` (re-entrant: hold it over several calls that must be
    one step); :attr:`changed`, on that lock, is notified when embeddings arrive or
    claims are given up.
    """

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)
        self._documents: dict[str, PendingDocument] = {}

    def __len__(self) -> int:
        return len(self._documents)

    def add(self, documents: Iterable[tuple[str, str, dict[str, Any]]]) -> None:
        """Hold documents about to be written (one held already with the same content stays)."""
        with self.lock:
            for doc_id, text, metadata in documents:
                old = self._documents.get(doc_id)
                if old is None or old.text != text or old.metadata != metadata:
                    self._documents[doc_id] = PendingDocument(text, metadata)

    def get(self, doc_id: str) -> PendingDocument | None:
        """The pending document with that id, if it is one."""
        return self._documents.get(doc_id)

    def claim(self, ids: Iterable[str]) -> dict[str, list[float]]:
        """Take the embedding work of pending ``ids``; return the embeddings already known.

        The caller claims the others (even claimed ones: it may not wait), and must
        :meth:`publish` or :meth:`release` them.
        """
        known = {}
        with self.lock:
            for doc_id in ids:
                document = self._documents.get(doc_id)
                if document is not None and document.vector is not None:
                    known[doc_id] = document.vector
                elif document is not None:
                    document.claimed = True
        return known

    def unembedded(self) -> tuple[set[str], list[str]]:
        """Pending documents without an embedding: (claimed by someone, unclaimed)."""
        waiting = [(i, d.claimed) for i, d in self._documents.items() if d.vector is None]
        free = [i for i, claimed in waiting if not claimed]
        return {i for i, claimed in waiting if claimed}, free

    def publish(self, ids: Sequence[str], vectors: Sequence[Sequence[float]]) -> None:
        """Give pending documents their embeddings and wake whoever waits for them."""
        with self.lock:
            for doc_id, vector in zip(ids, vectors, strict=True):
                document = self._documents.get(doc_id)
                if document is not None:
                    document.vector, document.claimed = list(vector), False
            self.changed.notify_all()

    def release(self, ids: Iterable[str]) -> None:
        """Give up claims (the embedding failed) so that someone else may try."""
        with self.lock:
            for doc_id in ids:
                document = self._documents.get(doc_id)
                if document is not None:
                    document.claimed = False
            self.changed.notify_all()

    def stored(self, documents: Iterable[tuple[str, str, dict[str, Any]]]) -> None:
        """The store has these ``(id, text, metadata)`` documents now: no longer pending
        (one queued again meanwhile with other content stays)."""
        with self.lock:
            for doc_id, text, metadata in documents:
                old = self._documents.get(doc_id)
                if old is not None and old.text == text and old.metadata == metadata:
                    del self._documents[doc_id]

    def forget(self, ids: Iterable[str] | None = None) -> None:
        """Forget pending documents that will not be written (all when ``ids`` is None)."""
        with self.lock:
            if ids is None:
                self._documents.clear()
            for doc_id in ids or ():
                self._documents.pop(doc_id, None)
            self.changed.notify_all()

    def nearest(self, vector: Sequence[float], *, n: int) -> list[ScoredId]:
        """The ``n`` embedded pending documents most similar to ``vector``, by cosine.

        One of another width (another model's, which the store will refuse) is left out.
        """
        with self.lock:
            embedded = {
                i: d.vector
                for i, d in self._documents.items()
                if d.vector is not None and len(d.vector) == len(vector)
            }
        return best_first(cosines(vector, embedded), n)
