"""What the vector and collection adapters share: a template memory, a twin per namespace."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from memories.integrations.langgraph_store.base import MemoryStoreAdapter
from memories.integrations.langgraph_store.filters import Namespace

from memories.kernel.embeddings import cosine
from memories.kernel.namespaces import in_namespace, namespace_key

if TYPE_CHECKING:
    from memories.long_term.indexed import IndexedMemory

__all__ = ["CREATED", "KEY", "PART", "PARTS", "UNINDEXED", "UPDATED", "VALUE", "TemplateAdapter"]

# Metadata keys the adapter keeps beside each document it writes.
KEY = "store_key"
VALUE = "store_value"
CREATED = "store_created_at"
UPDATED = "store_updated_at"
#: How many texts an item has past its first: each one more document (``indexing.part_id``).
PARTS = "store_parts"
#: On one of those documents: which of the item's texts it holds (1, 2...).
PART = "store_part"
#: True on an item put with ``index=False``: kept, not found by a query.
UNINDEXED = "store_unindexed"

#: The memory a template adapter serves, one twin per namespace.
TemplateMemory = TypeVar("TemplateMemory", bound="IndexedMemory")


class TemplateAdapter(MemoryStoreAdapter, Generic[TemplateMemory]):
    """An adapter over a template memory: its twin per namespace, its sweep, its text field."""

    supports_query = True  # the template memory's recall ranks by meaning
    memory: TemplateMemory
    text_field: str
    _memories: dict[Namespace, TemplateMemory]

    def sweep_ttl(self, *, batch: int = 500) -> int:
        """The memory's own sweep: it deletes what expired whole, in every namespace."""
        return sum(self.memory.sweep(batch=batch).values())

    def _memory(self, namespace: Namespace) -> TemplateMemory:
        """The template memory's twin for ``namespace``, built once per namespace.

        Its items' time to live is the adapter's (LangGraph's ``ttl``), stamped
        before each write: the twin has no ``ttl`` of its own to stamp over it,
        and hides expired items only under ``omit_expired`` (else they are read
        until swept, as in LangGraph's stores).
        """
        if namespace not in self._memories:
            self._memories[namespace] = in_namespace(
                self.memory, namespace, ttl=None, hide_expired=self._omit_expired
            )
        return self._memories[namespace]

    def _cosines(self, namespace: Namespace, query: str, ids: Sequence[str]) -> dict[str, float]:
        """LangGraph's score of these documents: the cosine of the query's embedding and each's."""
        memory = self._memory(namespace)
        asked = memory.embedder.embed_query(query)
        vectors = memory.store.vectors(namespace_key(namespace), list(ids))
        return {doc_id: cosine(asked, vector) for doc_id, vector in vectors.items()}

    def _text(self, value: Mapping[str, Any]) -> str:
        """The value's ``text_field``, or the whole value as JSON when it has none."""
        text = value.get(self.text_field)
        return text if isinstance(text, str) else json.dumps(value, sort_keys=True, default=str)
