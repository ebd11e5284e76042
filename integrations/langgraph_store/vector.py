"""A vector memory (``memories.long_term.vector.VectorMemory``) as a LangGraph store."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from langgraph.store.base import Item, SearchItem, SearchOp, TTLConfig
from memories.integrations.langgraph_store.base import in_thread
from memories.integrations.langgraph_store.filters import (
    Namespace,
    check_labels,
    matches_all,
    namespace_tuple,
    search_item,
    timestamp,
)
from memories.integrations.langgraph_store.template import (
    CREATED,
    KEY,
    UPDATED,
    VALUE,
    TemplateAdapter,
)

from memories.errors import InvalidInputError
from memories.kernel.namespaces import namespace_key
from memories.stores.vector.scoring import check_min_score

if TYPE_CHECKING:
    from memories.long_term.vector import SearchResult, VectorMemory

__all__ = ["VectorStoreAdapter"]


class VectorStoreAdapter(TemplateAdapter["VectorMemory"]):
    """A vector memory (``memories.long_term.vector.VectorMemory``) as a LangGraph store.

    Each namespace is the vector memory's namespace of the same name (one
    Chroma collection each); each item is one document whose id is the key.
    ``put`` embeds the value's ``text_field`` (the whole value as JSON when it
    has none) and keeps the value beside it; ``search(query=...)`` ranks with
    the memory's recall (hybrid by default) and gives each item its score.
    Turns a ``VectorMemory`` saved itself show up too, keyed by document id,
    with their text and metadata as the value.

    Each namespace's recall picks its best ``offset + limit`` items; those are
    ordered by score, which is calibrated (:mod:`memories.stores.recall.scores`:
    about the probability that the item answers the query, from the query
    and the item alone), so scores compare across queries and namespaces and
    a ``min_score`` means the same everywhere.

    Args:
        memory: the vector memory whose store, embeddings and recall settings
            every namespace uses (its own namespace is only the template's).
        text_field: the value field that is embedded and searched.
        min_score: leave out of query searches the items scoring below this;
            default: the memory's ``min_score``. ``search(..., min_score=...)``
            overrides it for one call.
        ttl: LangGraph's ``TTLConfig`` (``default_ttl`` minutes, ``refresh_on_read``,
            ``omit_expired``, ``sweep_interval_minutes``); None: items live until
            deleted, unless a ``put`` gives its own ``ttl``.
        ttl_url: the SQL database that keeps expiry times (default: the store's own,
            which a vector or collection memory reads too, so that its own
            searches hide what expired through the adapter).
        clock: the time expiry is reckoned with (Unix seconds; default ``time.time``).
    """

    supports_query = True

    def __init__(
        self,
        memory: VectorMemory,
        /,
        *,
        text_field: str = "text",
        min_score: float | None = None,
        ttl: TTLConfig | None = None,
        ttl_url: str | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.memory = memory
        self.text_field = text_field
        self.min_score = memory.min_score if min_score is None else check_min_score(min_score)
        self._memories: dict[Namespace, VectorMemory] = {}
        self._expiring(ttl, ttl_url, clock)

    def _expiry_url(self) -> str:
        return self.memory._expiry_url()  # the memory's own: its searches hide what expired

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.memory.store.location})"

    # -- pure helpers ---------------------------------------------------------------

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

    # -- the five methods -------------------------------------------------------------

    def _records(self, namespace: Namespace, ids: list[str] | None = None) -> list[Item]:
        memory = self._memory(namespace)
        memory.flush()  # turns waiting in the outbox are part of the store
        records = memory.store.get(namespace_key(namespace), ids=ids)
        return [self._item_of(namespace, r.id, r.text, r.metadata) for r in records]

    def _get(self, namespace: Namespace, key: str) -> Item | None:
        found = self._records(namespace, [key])
        return found[0] if found else None

    def _put(self, namespace: Namespace, key: str, value: Mapping[str, Any], index: Any) -> None:
        old = self._get(namespace, key)
        now = time.time()
        created = old.created_at.timestamp() if old is not None else now
        metadata = {
            KEY: key,
            VALUE: json.dumps(dict(value), default=str),
            CREATED: created,
            UPDATED: now,
        }
        self._memory(namespace).add([self._text(value)], metadatas=[metadata], ids=[key])

    def _delete(self, namespace: Namespace, key: str) -> None:
        self._memory(namespace).delete([key])

    def _namespaces(self) -> list[Namespace]:
        listed = self.memory.backend.namespaces()
        store = self.memory.store
        return [namespace_tuple(key) for key, n in listed.items() if (n or store.count(key)) > 0]

    def search(
        self,
        namespace_prefix: Namespace,
        /,
        *,
        query: str | None = None,
        filter: dict[str, Any] | None = None,
        limit: int = 10,
        offset: int = 0,
        refresh_ttl: bool | None = None,
        min_score: float | None = None,
    ) -> list[SearchItem]:
        """LangGraph's ``search``; with a query, items scoring below ``min_score`` are left out.

        ``min_score`` defaults to the adapter's; it needs a query (without one
        nothing is scored).
        """
        if min_score is None:
            return super().search(
                namespace_prefix,
                query=query,
                filter=filter,
                limit=limit,
                offset=offset,
                refresh_ttl=refresh_ttl,
            )
        op = _search_op(namespace_prefix, query, filter, limit, offset, refresh_ttl, min_score)
        return self._search_above(op, min_score)

    async def asearch(
        self,
        namespace_prefix: Namespace,
        /,
        *,
        query: str | None = None,
        filter: dict[str, Any] | None = None,
        limit: int = 10,
        offset: int = 0,
        refresh_ttl: bool | None = None,
        min_score: float | None = None,
    ) -> list[SearchItem]:
        """Async :meth:`search`."""
        if min_score is None:
            return await super().asearch(
                namespace_prefix,
                query=query,
                filter=filter,
                limit=limit,
                offset=offset,
                refresh_ttl=refresh_ttl,
            )
        op = _search_op(namespace_prefix, query, filter, limit, offset, refresh_ttl, min_score)
        found: list[SearchItem] = await in_thread(self._search_above, op, min_score)
        return found

    def _search(self, op: SearchOp) -> list[SearchItem]:
        return self._search_above(op, self.min_score)

    def _search_above(self, op: SearchOp, min_score: float) -> list[SearchItem]:
        namespaces = [
            ns for ns in self._namespaces() if ns[: len(op.namespace_prefix)] == op.namespace_prefix
        ]
        wanted = op.offset + op.limit
        found: list[SearchItem] = []
        for namespace in namespaces:
            items = [i for i in self._records(namespace) if matches_all(i.value, op.filter)]
            if not op.query:
                found.extend(search_item(i, None) for i in items)
                continue
            by_id = {i.key: i for i in items}
            if not by_id:
                continue
            where = {KEY: {"$in": list(by_id)}} if op.filter else None
            results = self._memory(namespace).search(
                op.query, k=min(wanted, len(by_id)), filter=where, min_score=min_score
            )
            found.extend(self._ranked(results, by_id))
        if op.query:
            found.sort(key=lambda i: i.score or 0.0, reverse=True)
        else:
            found.sort(key=lambda i: (i.namespace, i.key))
        return found[op.offset : wanted]

    def _ranked(self, results: list[SearchResult], by_id: dict[str, Item]) -> list[SearchItem]:
        ranked = []
        for result in results:
            key = str(result.metadata.get(KEY, result.id))
            if key in by_id:
                ranked.append(search_item(by_id[key], float(result.score)))
        return ranked


def _search_op(
    namespace_prefix: Namespace,
    query: str | None,
    filter: dict[str, Any] | None,
    limit: int,
    offset: int,
    refresh_ttl: bool | None,
    min_score: float,
) -> SearchOp:
    """The operation ``BaseStore.search`` would batch, once ``min_score`` is checked.

    The prefix is checked as ``BaseStore.search`` checks it (labels are
    non-empty strings without ``.`` or NUL), so a ``min_score`` never opens a
    way around LangGraph's namespace rules.
    """
    check_min_score(min_score)
    check_labels(namespace_prefix)
    if query is None:
        raise InvalidInputError(
            f"min_score={min_score!r} needs a query: a search without one scores nothing."
        )
    refresh = True if refresh_ttl is None else refresh_ttl  # what BaseStore does without TTLs
    return SearchOp(namespace_prefix, filter, limit, offset, query, refresh)
