"""An incremental BM25 index with per-namespace isolation.

Scores are exact Okapi BM25 with Lucene's idf, ``log(1 + (N - df + 0.5) / (df + 0.5))``,
computed from the statistics at query time. Adding or deleting a document
touches only that document's postings, so there is no rebuild, and a sequence
of adds and deletes ranks exactly as a fresh build of the same documents.
Its layout and size: docs/architecture.md, "The recall index".
"""

from __future__ import annotations

import math
import sys
from array import array
from collections import Counter
from collections.abc import Iterable
from typing import Any

from memories.errors import ConfigError, MissingDependencyError

try:
    import numpy as np
    import numpy.typing as npt
except ImportError as exc:  # pragma: no cover - numpy comes with the chroma extra
    raise MissingDependencyError(
        "memories.stores.recall", "pip install 'chat-memories[chroma]'"
    ) from exc

from memories.stores.recall.text import Analyzer
from memories.stores.recall.types import ScoredId, best_first

__all__ = ["BM25Index", "at_least_nth"]

_FloatArray = npt.NDArray[np.float64]
# Packed array type codes: slots and term frequencies both fit 32 bits unsigned.
_UINT32 = "I" if array("I").itemsize == 4 else "L"


def at_least_nth(scores: npt.NDArray[Any], n: int) -> npt.NDArray[np.bool_]:
    """Which ``scores`` are at least the ``n``-th highest: the best ``n`` and the last's ties."""
    if len(scores) <= n:
        return np.ones(len(scores), dtype=bool)
    return scores >= np.partition(scores, len(scores) - n)[len(scores) - n]


class _Postings:
    """The documents holding one term: their slots and the term's frequency in each."""

    __slots__ = ("slots", "tfs")

    def __init__(self) -> None:
        self.slots = array(_UINT32)
        self.tfs = array(_UINT32)

    def __len__(self) -> int:
        return len(self.slots)

    def remove(self, slot: int) -> None:
        where = np.frombuffer(self.slots, dtype=np.uint32)
        at = int(np.flatnonzero(where == slot)[0])
        del where  # an array cannot shrink while numpy views it
        del self.slots[at]
        del self.tfs[at]


class _Corpus:
    """The postings and length statistics of one namespace.

    Documents occupy integer slots so that per-document values sit in arrays;
    a deleted document's slot is reused by a later add.
    """

    def __init__(self) -> None:
        self.slot_of: dict[str, int] = {}
        self.id_at: list[str | None] = []
        self.terms_at: list[tuple[str, ...]] = []
        """Each slot's distinct terms, so that a delete finds its postings."""
        self.free: list[int] = []
        self.lengths: _FloatArray = np.zeros(64)
        self.postings: dict[str, _Postings] = {}
        self.total_length = 0

    def __len__(self) -> int:
        return len(self.slot_of)

    def add(self, doc_id: str, terms: list[str]) -> None:
        if self.free:
            slot = self.free.pop()
            self.id_at[slot] = doc_id
        else:
            slot = len(self.id_at)
            self.id_at.append(doc_id)
            self.terms_at.append(())
            if slot >= len(self.lengths):
                self.lengths = np.concatenate([self.lengths, np.zeros(len(self.lengths))])
        self.slot_of[doc_id] = slot
        self.lengths[slot] = len(terms)
        self.total_length += len(terms)
        counts = Counter(terms)
        # Interned, a term's text is held once however many documents use it.
        self.terms_at[slot] = tuple(sys.intern(term) for term in counts)
        for term, tf in counts.items():
            postings = self.postings.get(term)
            if postings is None:
                postings = self.postings[sys.intern(term)] = _Postings()
            postings.slots.append(slot)
            postings.tfs.append(tf)

    def remove(self, doc_id: str) -> bool:
        slot = self.slot_of.pop(doc_id, None)
        if slot is None:
            return False
        self.total_length -= int(self.lengths[slot])
        self.lengths[slot] = 0.0
        self.id_at[slot] = None
        for term in self.terms_at[slot]:
            postings = self.postings[term]
            postings.remove(slot)
            if not postings:
                del self.postings[term]
        self.terms_at[slot] = ()
        self.free.append(slot)
        return True


class BM25Index:
    """Okapi BM25 over short documents, with incremental adds and deletes.

    Each namespace is an independent corpus with its own statistics: a search
    in one never sees, and is never scored against, another's documents.

    Args:
        k1: Term-frequency saturation; 0 makes a term count once however often it occurs.
        b: Length normalisation, from 0 (none) to 1 (full).
        analyzer: Turns documents and queries into terms.
    """

    def __init__(
        self, *, k1: float = 1.2, b: float = 0.75, analyzer: Analyzer | None = None
    ) -> None:
        if k1 < 0:
            raise ConfigError(f"BM25 k1 must be >= 0, got {k1!r}.")
        if not 0 <= b <= 1:
            raise ConfigError(f"BM25 b must be between 0 and 1, got {b!r}.")
        self.k1 = k1
        self.b = b
        self.analyzer = analyzer if analyzer is not None else Analyzer()
        self._corpora: dict[str, _Corpus] = {}

    def add(self, namespace: str, doc_id: str, text: str, /) -> None:
        """Index ``text`` under ``doc_id``, replacing any document with that id."""
        corpus = self._corpora.setdefault(namespace, _Corpus())
        corpus.remove(doc_id)
        corpus.add(doc_id, self.analyzer.terms(text))

    def add_many(self, namespace: str, docs: Iterable[tuple[str, str]], /) -> None:
        """Index several ``(doc_id, text)`` pairs; the same as calling :meth:`add` for each."""
        for doc_id, text in docs:
            self.add(namespace, doc_id, text)

    def delete(self, namespace: str, doc_id: str, /) -> bool:
        """Remove a document; return whether it was there."""
        corpus = self._corpora.get(namespace)
        if corpus is None or not corpus.remove(doc_id):
            return False
        if not corpus:
            del self._corpora[namespace]
        return True

    def count(self, namespace: str, /) -> int:
        """Number of documents in ``namespace``."""
        corpus = self._corpora.get(namespace)
        return 0 if corpus is None else len(corpus)

    def search(self, namespace: str, query: str, /, *, limit: int = 10) -> list[ScoredId]:
        """Return up to ``limit`` documents with a positive score, best first.

        Ties are broken by id so that the order never depends on insertion history.
        """
        if limit < 1:
            raise ValueError(f"limit must be >= 1, got {limit!r}.")
        corpus = self._corpora.get(namespace)
        if corpus is None:
            return []
        scores = self._scores(corpus, self.analyzer.query_terms(query))
        hits = np.flatnonzero(scores > 0)
        hits = hits[at_least_nth(scores[hits], limit)]  # the ties too: cut by id below
        found = {i: float(scores[s]) for s in hits.tolist() if (i := corpus.id_at[s]) is not None}
        return best_first(found, limit)

    def _scores(self, corpus: _Corpus, query_terms: list[str]) -> _FloatArray:
        """BM25 score of every slot (0 for empty slots and non-matching documents)."""
        n_docs = len(corpus)
        scores = np.zeros(len(corpus.id_at))
        k1, b = self.k1, self.b
        avg_length = corpus.total_length / n_docs
        slope = k1 * b / avg_length if avg_length else 0.0
        # A repeated query term counts once per repeat, as in Lucene's BooleanQuery.
        for term, repeats in Counter(query_terms).items():
            postings = corpus.postings.get(term)
            if postings is None:
                continue
            slots = np.frombuffer(postings.slots, dtype=np.uint32)
            tfs = np.frombuffer(postings.tfs, dtype=np.uint32).astype(np.float64)
            idf = math.log(1.0 + (n_docs - len(slots) + 0.5) / (len(slots) + 0.5))
            # tf * (k1 + 1) / (tf + k1 * (1 - b + b * length / avg_length))
            denominator = tfs + k1 * (1.0 - b) + slope * corpus.lengths[slots]
            scores[slots] += (repeats * idf * (k1 + 1.0)) * tfs / denominator
        return scores
