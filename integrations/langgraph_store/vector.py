"""A vector memory (``memories.long_term.vector.VectorMemory``) as a LangGraph store."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from langgraph.store.base import IndexConfig, Item, SearchItem, SearchOp, TTLConfig
from memories.integrations.langgraph_store.filters import (
    Namespace,
    matches_all,
    namespace_tuple,
    search_item,
    timestamp,
)
from memories.integrations.langgraph_store.indexing import (
    Score,
    checked_index,
    checked_score,
    part_id,
    texts_of,
)
from memories.integrations.langgraph_store.template import (
    CREATED,
    KEY,
    PART,
    PARTS,
    UNINDEXED,
    UPDATED,
    VALUE,
    TemplateAdapter,
)

from memories.errors import InvalidInputError
from memories.kernel.namespaces import in_namespace, namespace_key
from memories.stores.vector.scoring import check_min_score

if TYPE_CHECKING:
    from memories.integrations.chroma import StoredRecord

    from memories.long_term.vector import VectorMemory

__all__ = ["VectorStoreAdapter"]

#: The ``min_score`` of the :meth:`VectorStoreAdapter.search` running in this context.
_ASKED_MIN_SCORE: ContextVar[float | None] = ContextVar("asked_min_score", default=None)


class VectorStoreAdapter(TemplateAdapter["VectorMemory"]):
    """A vector memory (``memories.long_term.vector.VectorMemory``) as a LangGraph store.

    Each namespace is the vector memory's namespace of the same name; each item
    is one document whose id is the key, and one more per further text of
    LangGraph's indexing (:mod:`.indexing`). Turns a ``VectorMemory`` saved itself
    show up too, keyed by document id, with their text and metadata as the value.
    A query search takes each namespace's best ``offset + limit`` items by the
    memory's recall and orders them by score (calibrated by default, so scores
    compare across namespaces: :mod:`memories.stores.recall.scores`).

    Args:
        memory: the vector memory whose store, embeddings and recall settings
            every namespace uses (its own namespace is only the template's).
        text_field: the value field that is embedded and searched (without
            ``index`` fields).
        index: LangGraph's ``IndexConfig``: ``embed`` (embeddings, a function or
            ``"provider:model"``, used instead of the memory's), ``dims``,
            ``fields`` (``text_fields`` as LangGraph's SQLite store names it).
        score: ``"calibrated"`` (ours) or ``"cosine"`` (LangGraph's: ranked by it
            alone, no lexical recall; :mod:`.indexing`).
        min_score: leave out of query searches the items scoring below this;
            default: the memory's ``min_score`` (with ``score="cosine"``: none).
            ``search(..., min_score=...)`` overrides it for one call.
        ttl, ttl_url, clock: time to live (:class:`MemoryStoreAdapter`'s Args).
    """

    def __init__(
        self,
        memory: VectorMemory,
        /,
        *,
        text_field: str = "text",
        index: IndexConfig | None = None,
        score: Score = "calibrated",
        min_score: float | None = None,
        ttl: TTLConfig | None = None,
        ttl_url: str | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.index = checked_index(index)
        #: The index configuration as given (LangGraph's stores keep it as ``index_config``).
        self.index_config = dict(index) if index is not None else None
        if self.index.embeddings is not None:
            memory = in_namespace(memory, memory.namespace, embeddings=self.index.embeddings)
        self.memory = memory
        self.text_field = text_field
        self.score = checked_score(score)
        self.min_score: float | None = (
            check_min_score(min_score, cosine=self.score == "cosine")
            if min_score is not None
            else (memory.min_score if self.score == "calibrated" else None)
        )
        self._memories: dict[Namespace, VectorMemory] = {}
        self._expiring(ttl, ttl_url, clock)

    def _expiry_url(self) -> str:
        return self.memory._expiry_url()  # the memory's own: its searches hide what expired

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.memory.store.location})"

    @staticmethod
    def _item_of(namespace: Namespace, doc_id: str, text: str, metadata: Mapping[str, Any]) -> Item:
        if VALUE in metadata:
            value = json.loads(metadata[VALUE])
            created, updated = metadata[CREATED], metadata[UPDATED]
        else:  # a turn the vector memory saved itself
            value = {"text": text, **{k: v for k, v in metadata.items() if k != "namespace"}}
            created = updated = float(metadata.get("timestamp", 0.0))
        return Item(
            value=value,
            key=str(metadata.get(KEY, doc_id)),
            namespace=namespace,
            created_at=timestamp(float(created)),
            updated_at=timestamp(float(updated)),
        )

    def _documents(self, namespace: Namespace, ids: list[str] | None = None) -> list[StoredRecord]:
        """The namespace's documents (these ids'), an item's further texts among them."""
        memory = self._memory(namespace)
        memory.flush()  # turns waiting in the outbox are part of the store
        return memory.store.get(namespace_key(namespace), ids=ids)

    def _head(self, namespace: Namespace, key: str) -> StoredRecord | None:
        """The item's own document (its further texts are documents of their own), or None."""
        found = [r for r in self._documents(namespace, [key]) if PART not in r.metadata]
        return found[0] if found else None

    def _get(self, namespace: Namespace, key: str) -> Item | None:
        head = self._head(namespace, key)
        return None if head is None else self._item_of(namespace, key, head.text, head.metadata)

    def _put(self, namespace: Namespace, key: str, value: Mapping[str, Any], index: Any) -> None:
        memory = self._memory(namespace)
        head = self._head(namespace, key)
        old = None if head is None else self._item_of(namespace, key, head.text, head.metadata)
        now = time.time()
        texts = texts_of(value, index, self.index.fields)
        if texts is None:
            texts = [self._text(value)]
        metadata = {
            KEY: key,
            VALUE: json.dumps(dict(value), default=str),
            CREATED: old.created_at.timestamp() if old is not None else now,
            UPDATED: now,
            PARTS: max(len(texts) - 1, 0),
            UNINDEXED: not texts,
        }
        # Texts the old value had past the new one's go first: a crash between the two
        # writes leaves the item found by fewer texts, never by one it no longer has.
        stale = [part_id(key, n) for n in range(max(len(texts), 1), _parts(head) + 1)]
        if stale:
            memory.delete(stale)
        ids = [key, *(part_id(key, n) for n in range(1, len(texts)))]
        parts = [{KEY: key, PART: n} for n in range(1, len(texts))]
        memory.add(texts or [""], metadatas=[metadata, *parts], ids=ids)

    def _delete(self, namespace: Namespace, key: str) -> None:
        parts = _parts(self._head(namespace, key))
        self._memory(namespace).delete([key, *(part_id(key, n) for n in range(1, parts + 1))])

    def _namespaces(self) -> list[Namespace]:
        listed = self.memory.backend.namespaces()
        store = self.memory.store
        return [namespace_tuple(key) for key, n in listed.items() if (n or store.count(key)) > 0]

    def search(
        self, namespace_prefix: Namespace, /, *, min_score: float | None = None, **page: Any
    ) -> list[SearchItem]:
        """LangGraph's ``search`` (``query``, ``filter``, ``limit``, ``offset``,
        ``refresh_ttl``); with a query, items scoring below ``min_score`` are left out.

        ``min_score`` defaults to the adapter's; it needs a query (without one
        nothing is scored).
        """
        with _scored(min_score, page, cosine=self.score == "cosine"):
            return super().search(namespace_prefix, **page)

    async def asearch(
        self, namespace_prefix: Namespace, /, *, min_score: float | None = None, **page: Any
    ) -> list[SearchItem]:
        """Async :meth:`search`."""
        with _scored(min_score, page, cosine=self.score == "cosine"):
            return await super().asearch(namespace_prefix, **page)

    def _search(self, op: SearchOp) -> list[SearchItem]:
        asked = _ASKED_MIN_SCORE.get()
        min_score = self.min_score if asked is None else asked
        prefix = tuple(op.namespace_prefix)
        namespaces = [ns for ns in self._namespaces() if ns[: len(prefix)] == prefix]
        wanted = op.offset + op.limit
        scored: list[SearchItem] = []
        scoreless: list[SearchItem] = []  # no query, or not embedded (put with index=False)
        for namespace in namespaces:
            documents = self._documents(namespace)
            items: dict[str, Item] = {}
            unindexed: list[Item] = []
            for r in documents:
                if PART in r.metadata:
                    continue
                item = self._item_of(namespace, r.id, r.text, r.metadata)
                if matches_all(item.value, op.filter):
                    if op.query and r.metadata.get(UNINDEXED):
                        unindexed.append(item)
                    else:
                        items[item.key] = item
            if not op.query:
                scoreless.extend(search_item(i, None) for i in items.values())
                continue
            scoreless.extend(search_item(i, None) for i in unindexed)
            ids = [r.id for r in documents if str(r.metadata.get(KEY, r.id)) in items]
            if not ids:
                continue
            best = self._best(namespace, op, ids, items, wanted, len(documents), min_score)
            scored.extend(search_item(items[key], score) for key, score in best.items())
        scored.sort(key=lambda i: i.score or 0.0, reverse=True)
        scoreless.sort(key=lambda i: (i.namespace, i.key))
        return [*scored, *scoreless][op.offset : wanted]

    def _best(
        self,
        namespace: Namespace,
        op: SearchOp,
        ids: list[str],
        items: dict[str, Item],
        wanted: int,
        documents: int,
        min_score: float | None,
    ) -> dict[str, float]:
        """Each item's best score over its texts (those of ``ids``), at least ``min_score``."""
        memory, query = self._memory(namespace), str(op.query)
        best: dict[str, float] = {}
        if self.score == "cosine":
            keys = {r.id: str(r.metadata.get(KEY, r.id)) for r in self._documents(namespace, ids)}
            for doc_id, score in self._cosines(namespace, query, ids).items():
                best[keys[doc_id]] = max(score, best.get(keys[doc_id], score))
        else:
            # Enough texts for ``wanted`` items however many texts each has; the filter
            # (or texts left out) keeps the search to the items asked about.
            narrowed = op.filter or len(ids) < documents
            where = {KEY: {"$in": list(items)}} if narrowed else None
            k = len(ids) if len(ids) > len(items) else min(wanted, len(ids))
            floor = min_score if min_score is not None else 0.0
            for result in memory.search(query, k=k, filter=where, min_score=floor):
                key = str(result.metadata.get(KEY, result.id))
                if key in items:
                    best[key] = max(float(result.score), best.get(key, float(result.score)))
        if min_score is None:
            return best
        return {key: score for key, score in best.items() if score >= min_score}


@contextmanager
def _scored(min_score: float | None, page: Mapping[str, Any], *, cosine: bool) -> Iterator[None]:
    """The searches made within floored at ``min_score`` (None: the adapter's), once checked."""
    if min_score is not None and page.get("query") is None:
        raise InvalidInputError(
            f"min_score={min_score!r} needs a query: a search without one scores nothing."
        )
    checked = None if min_score is None else check_min_score(min_score, cosine=cosine)
    token = _ASKED_MIN_SCORE.set(checked)
    try:
        yield
    finally:
        _ASKED_MIN_SCORE.reset(token)


def _parts(head: StoredRecord | None) -> int:
    """How many further texts an item's own document (or None: no item) says it has."""
    return 0 if head is None else int(head.metadata.get(PARTS, 0))
