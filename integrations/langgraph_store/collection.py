"""A collection memory (``memories.long_term.collection.CollectionMemory``) as a LangGraph store."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from langgraph.store.base import Item, SearchItem, SearchOp, TTLConfig
from memories.integrations.langgraph_store.filters import Namespace, matches_all, search_item
from memories.integrations.langgraph_store.indexing import Score, checked_score, texts_of
from memories.integrations.langgraph_store.template import VALUE, TemplateAdapter

from memories.errors import InvalidInputError

if TYPE_CHECKING:
    from memories.long_term.collection import CollectionMemory, MemoryRecord

__all__ = ["CollectionStoreAdapter"]


class CollectionStoreAdapter(TemplateAdapter["CollectionMemory"]):
    """A collection memory (:class:`~memories.long_term.collection.CollectionMemory`) as a store.

    Each namespace is the collection's namespace of the same name; each item is
    one memory whose id is the key, its content the value's ``text_field`` (the
    whole value as JSON when it has none; with ``put(..., index=[fields])``, those
    fields' texts, one a line), the value kept beside it. A put of a key that
    exists is a new version (the collection's history and rollback apply). Memories
    the collection made itself show up as ``{"content": ..., **metadata}``. A
    collection indexes every memory: ``put(..., index=False)`` raises
    ``NotImplementedError`` (a :class:`VectorStoreAdapter` keeps unindexed items).

    Args:
        memory: the collection whose stores and settings every namespace
            uses (its own namespace is only the template's).
        text_field: the value field that becomes the memory's content.
        score: ``"calibrated"`` (ours, the default) or ``"cosine"`` (LangGraph's: the
            cosine similarity of the query's and the memory's embeddings, ranked by it alone).
        ttl, ttl_url, clock: time to live (:class:`MemoryStoreAdapter`'s Args).
    """

    def __init__(
        self,
        memory: CollectionMemory,
        /,
        *,
        text_field: str = "content",
        score: Score = "calibrated",
        ttl: TTLConfig | None = None,
        ttl_url: str | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.memory = memory
        self.ttl_mark = memory.rows.mark
        self.text_field = text_field
        self.score = checked_score(score)
        self._memories: dict[Namespace, CollectionMemory] = {}
        self._expiring(ttl, ttl_url, clock)

    def _expiry_url(self) -> str:
        return str(self.memory.url)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.memory.url!r})"

    def _item(self, namespace: Namespace, record: MemoryRecord) -> Item:
        stored = record.metadata.get(VALUE)
        if isinstance(stored, str):
            value = json.loads(stored)
        else:
            value = {"content": record.content, **record.metadata}
        return Item(
            value=value,
            key=record.id,
            namespace=namespace,
            created_at=record.created_at,
            updated_at=record.updated_at,
        )

    def _get(self, namespace: Namespace, key: str) -> Item | None:
        found = self._memory(namespace).get(key) if _is_id(key) else None
        return None if found is None else self._item(namespace, found)

    def _put(self, namespace: Namespace, key: str, value: Mapping[str, Any], index: Any) -> None:
        if index is False:
            raise NotImplementedError(
                f"{type(self).__name__} indexes every memory: put(..., index=False) has no "
                "unindexed item to make; keep unindexed items in a VectorStoreAdapter."
            )
        texts = texts_of(value, index, None)
        if texts == []:
            raise InvalidInputError(
                f"put(..., index={index!r:.80}): the value holds no text in those fields "
                "to make the memory's content of."
            )
        content = self._text(value) if texts is None else "\n".join(texts)
        metadata = {VALUE: json.dumps(dict(value), default=str)}
        self._memory(namespace).put(content, metadata=metadata, memory_id=key)

    def _delete(self, namespace: Namespace, key: str) -> None:
        memory = self._memory(namespace)
        if _is_id(key) and memory.get(key) is not None:
            memory.delete(key)

    def _namespaces(self) -> list[Namespace]:
        counts, _ = self.memory.ledger.key_namespaces(self.memory.rows.prefix, limit=10**9)
        return [count.namespace for count in counts]

    def _search(self, op: SearchOp) -> list[SearchItem]:
        prefix = op.namespace_prefix
        wanted = op.offset + op.limit
        found: list[SearchItem] = []
        for namespace in [ns for ns in self._namespaces() if ns[: len(prefix)] == prefix]:
            memory = self._memory(namespace)
            items = {r.id: self._item(namespace, r) for r in memory.list()}
            kept = {k: i for k, i in items.items() if matches_all(i.value, op.filter)}
            if not op.query:
                found.extend(search_item(i, None) for i in kept.values())
                continue
            if self.score == "cosine":
                scores = self._cosines(namespace, op.query, list(kept))
                found.extend(search_item(kept[i], score) for i, score in scores.items())
                continue
            for record in memory.search(op.query, k=max(len(items), 1)):
                if record.id in kept:
                    found.append(search_item(kept[record.id], record.score))
        if op.query:
            found.sort(key=lambda i: i.score or 0.0, reverse=True)
        else:
            found.sort(key=lambda i: (i.namespace, i.key))
        return found[op.offset : wanted]


def _is_id(key: str) -> bool:
    """Whether ``key`` can name a memory (else no memory has it: a get finds none)."""
    from memories.long_term.collection import rules  # the collection's own rule, on first use

    try:
        rules.checked_id(key)
    except InvalidInputError:
        return False
    return True
