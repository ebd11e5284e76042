"""What the recall-indexed backends (Chroma, pgvector) share: their fields, search and ranking."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass
from functools import cached_property, partial
from typing import Any

from langchain_core.embeddings import Embeddings

from memories.kernel.embeddings import query_vector
from memories.kernel.namespaces import namespace_key
from memories.kernel.steps import Steps, blocking_twin, step, twins
from memories.stores.recall import RecallConfig, ScoredId
from memories.stores.recall.types import RankParts
from memories.stores.vector.backend import VectorBackend, VectorQuery
from memories.stores.vector.outbox import OutboxRow
from memories.stores.vector.recall_index import IndexedDocument, RecallIndex, Space, bookkeeping
from memories.stores.vector.records import SearchResult
from memories.stores.vector.scoring import calibrated, read_first

__all__ = ["RecallBackend"]


@dataclass(eq=False)
class RecallBackend(VectorBackend):
    """One namespace of a store whose documents are ranked by hybrid recall over a recall index.

    Implementing a subclass
    -----------------------
    Give the recall index (:attr:`_index`) and the store's name in it
    (:attr:`_target`), the dense candidates (:meth:`_nearest`), which ids pass
    a filter (:meth:`_passing`) and the ranked ids' records (:meth:`_results`);
    :meth:`search`, :meth:`get` and the calibrated ranking are written here.

    Args:
        namespace: the namespace the memory reads and writes.
        session_id: the conversation new turns belong to (numbered within it).
        embedder: embeds documents and queries.
        recall: how documents are ranked.
        k: how many results a search gives when the query does not say.
    """

    calibrated_scores = True

    _: KW_ONLY
    namespace: tuple[str, ...]
    session_id: str
    embedder: Embeddings
    recall: RecallConfig
    k: int

    @property
    @abstractmethod
    def _index(self) -> RecallIndex:
        """The recall index the namespace's documents are ranked with."""

    @property
    @abstractmethod
    def _target(self) -> str:
        """The store's name in :attr:`_index` (one index may rank several stores' documents)."""

    @cached_property
    def _key(self) -> str:
        return namespace_key(self.namespace)

    @cached_property
    def _space(self) -> Space:
        """The namespace's space in :attr:`_index` (indexed from the store once, if older)."""

        def stored() -> list[IndexedDocument]:
            return [IndexedDocument(r.id, r.text, r.metadata) for r in self.stored()]

        return self._index.space(self._target, self._key, self.recall, stored=stored)

    @abstractmethod
    def _nearest(
        self, vector: Sequence[float], n: int, where: Mapping[str, Any] | None
    ) -> list[ScoredId]:
        """Ids and cosine similarities of the ``n`` nearest documents (passing ``where``)."""

    @abstractmethod
    def _passing(self, ids: list[str], where: Mapping[str, Any]) -> list[str]:
        """Which of ``ids`` pass ``where``."""

    @abstractmethod
    def _results(
        self, ranked: Sequence[ScoredId], *, embeddings_for: set[str]
    ) -> tuple[list[SearchResult], dict[str, list[float]]]:
        """The records of the ranked ids that exist, in order, with their scores, and the
        stored embeddings of those in ``embeddings_for`` (read in the same query)."""

    @staticmethod
    def _by_replace(
        rows: Sequence[OutboxRow], vectors: Sequence[Sequence[float]]
    ) -> Iterator[tuple[bool, list[OutboxRow], list[Sequence[float]]]]:
        """``(replace, rows, vectors)``: the new ids first, never replaced (a retried write
        keeps what is stored), then the caller-chosen ids, which may replace."""
        for flag in (False, True):
            chosen = [i for i, row in enumerate(rows) if row.replace is flag]
            if chosen:
                yield flag, [rows[i] for i in chosen], [vectors[i] for i in chosen]

    def bookkeeping(self, *, turn: bool) -> dict[str, Any]:
        """Session and time of a new document (and a turn's speakers): neighbours need them."""
        return bookkeeping(self.session_id, turn=turn)

    def get(self, ids: Sequence[str]) -> list[SearchResult]:
        """The documents with these ids, in that order (unknown ids left out)."""
        wanted = [ScoredId(doc_id, 0.0) for doc_id in dict.fromkeys(ids)]
        results, _ = self._results(wanted, embeddings_for=set())
        return results

    def _search_steps(self, query: VectorQuery) -> Steps[list[SearchResult]]:
        """Hybrid recall: the dense candidates ranked with the namespace's recall index."""
        yield from self._preparing(query)
        vector = None
        if self.recall.uses_dense:
            vector = yield from query_vector(self.embedder, query.text)
        return (yield step(self._search, query, vector))

    search, asearch = twins(_search_steps)

    def _preparing(self, query: VectorQuery) -> Steps[None]:
        """The steps a search takes first (none here; Chroma writes what is queued)."""
        yield from ()

    def _candidates(self, limit: int) -> int:
        """How many candidates each ranker gives: at least ``limit`` (a search for more results
        than ``candidates`` gets every document up to ``limit``)."""
        return max(self.recall.candidates, limit)

    def _search(self, request: VectorQuery, vector: Sequence[float] | None) -> list[SearchResult]:
        config = self.recall
        limit = self.k if request.k is None else request.k
        n = self._candidates(limit)
        if n == 0:
            return []
        dense = [] if vector is None else self._nearest(vector, n, request.where)
        passing = None if request.where is None else partial(self._passing, where=request.where)
        parts: dict[str, RankParts] = {}  # why each result ranked, for the inspector
        ranked = self._index.rank(
            *(self._space, request.text, config),
            dense=dense,
            limit=limit,
            candidates=n,
            passing=passing,
            parts=parts,
        )
        # The calibrated scores need the cosine of every result; the dense
        # candidates have theirs, the others' embeddings come with their text.
        uncosined = set() if vector is None else {s.id for s in ranked} - {s.id for s in dense}
        results, fetched = self._results(ranked, embeddings_for=uncosined)
        return calibrated(
            *(results, request.text, config),
            vector=vector,
            dense=dense,
            vectors_of=read_first(fetched, self.vectors),
            ranking=parts,
        )

    _asearch = blocking_twin(_search)
