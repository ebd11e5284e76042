"""Our long-term memories as a LangGraph ``BaseStore``.

LangGraph code that takes a store (``graph.compile(store=...)``,
``create_agent(..., store=...)``, tools reading ``runtime.store``) can use
the profiles (and, once it lands, the vector memory) as its store::

    from integrations.langgraph_store import ProfileStoreAdapter

    store = ProfileStoreAdapter.from_memory(profile_memory)
    store.put(("users", "maya"), "profile", {"name": "Maya"})
    store.get(("users", "maya"), "profile").value
    store.search(("users",), filter={"name": "Maya"})
    store.list_namespaces(prefix=("users",))

Behaviour follows LangGraph's own stores (``tests/integrations/store_contract.py``
runs the same checks against LangGraph's ``InMemoryStore``): namespaces are
tuples of labels without periods, ``put`` replaces, ``put(..., None)`` and
``delete`` remove (a missing key is fine), ``search`` covers a namespace and
every namespace below it by whole labels, ``filter`` matches values exactly
or with ``$eq``/``$ne``/``$gt``/``$gte``/``$lt``/``$lte``, and
``list_namespaces`` takes a prefix and suffix (``"*"`` matching any label),
a depth, a limit and an offset. A store with no semantic index ignores
``query`` as LangGraph's un-indexed stores do: results come unranked with
``score`` None. TTLs are not supported (``NotImplementedError``).
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

from memories.errors import InvalidProfileError
from memories.profile import ProfileMemory, ProfileSchema, ProfileStore
from memories.profile.store import ProfileItem

__all__ = ["MemoryStoreAdapter", "ProfileStoreAdapter", "matches_filter", "select_namespaces"]

Namespace = tuple[str, ...]


class MemoryStoreAdapter(BaseStore):
    """A LangGraph store over one of our stores: ``batch`` written once on five methods.

    Implementing a subclass
    -----------------------
    Implement :meth:`_get`, :meth:`_put`, :meth:`_delete`, :meth:`_search` and
    :meth:`_namespaces`, and their async twins (``_aget``...) when the backend
    has native async calls; otherwise ``abatch`` runs ``batch`` in a thread.
    Filtering, namespace matching and paging are done here, once.
    """

    #: ``search(query=...)`` ranks by meaning (a vector index); else query is ignored.
    supports_query = False

    # -- the five methods a backend implements ---------------------------------

    @abstractmethod
    def _get(self, namespace: Namespace, key: str) -> Item | None:
        """The item, or None."""

    @abstractmethod
    def _put(self, namespace: Namespace, key: str, value: Mapping[str, Any], index: Any) -> None:
        """Create or replace the item."""

    @abstractmethod
    def _delete(self, namespace: Namespace, key: str) -> None:
        """Remove the item; a missing one is fine."""

    @abstractmethod
    def _search(self, op: SearchOp) -> list[SearchItem]:
        """Items under ``op.namespace_prefix`` matching ``op.filter``, paged by limit/offset."""

    @abstractmethod
    def _namespaces(self) -> list[Namespace]:
        """Every namespace that holds an item."""

    # -- async twins: a thread by default ---------------------------------------

    async def _aget(self, namespace: Namespace, key: str) -> Item | None:
        return await _in_thread(self._get, namespace, key)

    async def _aput(
        self, namespace: Namespace, key: str, value: Mapping[str, Any], index: Any
    ) -> None:
        await _in_thread(self._put, namespace, key, value, index)

    async def _adelete(self, namespace: Namespace, key: str) -> None:
        await _in_thread(self._delete, namespace, key)

    async def _asearch(self, op: SearchOp) -> list[SearchItem]:
        return await _in_thread(self._search, op)

    async def _anamespaces(self) -> list[Namespace]:
        return await _in_thread(self._namespaces)

    # -- BaseStore ------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        results: list[Result] = []
        for op in ops:
            if isinstance(op, GetOp):
                results.append(self._get(op.namespace, op.key))
            elif isinstance(op, PutOp):
                if op.value is None:
                    self._delete(op.namespace, op.key)
                else:
                    self._put(op.namespace, op.key, op.value, op.index)
                results.append(None)
            elif isinstance(op, SearchOp):
                results.append(self._search(op))
            elif isinstance(op, ListNamespacesOp):
                results.append(select_namespaces(self._namespaces(), op))
            else:
                raise ValueError(f"{type(self).__name__} cannot run the operation {op!r:.80}")
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        results: list[Result] = []
        for op in ops:
            if isinstance(op, GetOp):
                results.append(await self._aget(op.namespace, op.key))
            elif isinstance(op, PutOp):
                if op.value is None:
                    await self._adelete(op.namespace, op.key)
                else:
                    await self._aput(op.namespace, op.key, op.value, op.index)
                results.append(None)
            elif isinstance(op, SearchOp):
                results.append(await self._asearch(op))
            elif isinstance(op, ListNamespacesOp):
                results.append(select_namespaces(await self._anamespaces(), op))
            else:
                raise ValueError(f"{type(self).__name__} cannot run the operation {op!r:.80}")
        return results


async def _in_thread(func: Any, *args: Any) -> Any:
    from langchain_core.runnables import run_in_executor

    return await run_in_executor(None, func, *args)


# -- pure helpers: LangGraph's filter and namespace semantics ---------------------------

# Order comparisons are numeric, as in LangGraph's stores (PostgreSQL JSONB semantics).
_OPERATORS = {
    "$eq": lambda a, b: a == b,
    "$ne": lambda a, b: a != b,
    "$gt": lambda a, b: float(a) > float(b),
    "$gte": lambda a, b: float(a) >= float(b),
    "$lt": lambda a, b: float(a) < float(b),
    "$lte": lambda a, b: float(a) <= float(b),
}


def matches_filter(value: Any, condition: Any) -> bool:
    """Whether a stored value meets a ``search(filter=...)`` condition, as LangGraph compares.

    A dict of ``$`` operators applies each; another dict matches fields
    recursively; a list matches element by element; anything else by equality.
    """
    if isinstance(condition, Mapping):
        if any(str(k).startswith("$") for k in condition):
            unknown = [k for k in condition if k not in _OPERATORS]
            if unknown:
                raise ValueError(
                    f"Unknown filter operators {unknown}; use {', '.join(_OPERATORS)}."
                )
            try:
                return all(_OPERATORS[k](value, v) for k, v in condition.items())
            except (TypeError, ValueError):
                # Not a number: LangGraph's in-memory store raises here; no match is kinder.
                return False
        return isinstance(value, Mapping) and all(
            matches_filter(value.get(k), v) for k, v in condition.items()
        )
    if isinstance(condition, list | tuple):
        return (
            isinstance(value, list | tuple)
            and len(value) == len(condition)
            and all(matches_filter(a, b) for a, b in zip(value, condition, strict=True))
        )
    return bool(value == condition)


def _matches(condition: MatchCondition, namespace: Namespace) -> bool:
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    part = namespace[: len(path)] if condition.match_type == "prefix" else namespace[-len(path) :]
    return all(p == "*" or p == n for p, n in zip(path, part, strict=True)) if path else True


def select_namespaces(namespaces: Iterable[Namespace], op: ListNamespacesOp) -> list[Namespace]:
    """The namespaces a ``list_namespaces`` call asks for: matched, cut to depth, sorted, paged."""
    found = [ns for ns in namespaces if all(_matches(c, ns) for c in op.match_conditions or ())]
    if op.max_depth is not None:
        found = [ns[: op.max_depth] for ns in found]
    return sorted(set(found))[op.offset : op.offset + op.limit]


def _timestamp(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, tz=UTC)


# -- profiles -----------------------------------------------------------------------


class ProfileStoreAdapter(MemoryStoreAdapter):
    """Profiles (``memories.profile.ProfileStore``) as a LangGraph store.

    Each item is a profile document: ``namespace`` is the profile's namespace
    (a user), ``key`` its name (``"profile"`` by default). ``put`` records a
    ``put`` change in the profile's history, so ``ProfileMemory.rollback``
    can undo it; ``delete`` erases the profile with its history.

    Args:
        store: the profile store (``ProfileStore(url)``).
        schema: a JSON Schema or Pydantic model every ``put`` must satisfy;
            None accepts any JSON object.
    """

    def __init__(self, store: ProfileStore, /, *, schema: Any = None) -> None:
        self.store = store
        self.schema = ProfileSchema(schema) if schema is not None else None

    @classmethod
    def from_memory(cls, memory: ProfileMemory, /) -> ProfileStoreAdapter:
        """The store of a profile memory, checking writes against its schema."""
        return cls(memory.store, schema=memory.profile_schema)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.store!r})"

    def _checked(self, value: dict[str, Any]) -> dict[str, Any]:
        problems = self.schema.errors(value) if self.schema is not None else []
        if problems:
            raise InvalidProfileError(
                "The document does not match the profile schema: " + "; ".join(problems)
            )
        return value

    @staticmethod
    def _item(found: ProfileItem | None) -> Item | None:
        if found is None or found.value is None:
            return None
        return Item(
            value=found.value,
            key=found.key,
            namespace=found.namespace,
            created_at=_timestamp(found.created_at),
            updated_at=_timestamp(found.updated_at),
        )

    @staticmethod
    def _filtered(found: list[ProfileItem], op: SearchOp) -> list[ProfileItem]:
        conditions = (op.filter or {}).items()
        chosen = [
            f
            for f in found
            if f.value is not None and all(matches_filter(f.value.get(k), v) for k, v in conditions)
        ]
        return chosen[op.offset : op.offset + op.limit]

    @staticmethod
    def _search_items(found: list[ProfileItem]) -> list[SearchItem]:
        return [
            SearchItem(
                namespace=f.namespace,
                key=f.key,
                value=f.value or {},
                created_at=_timestamp(f.created_at),
                updated_at=_timestamp(f.updated_at),
            )
            for f in found
        ]

    def _get(self, namespace: Namespace, key: str) -> Item | None:
        return self._item(self.store.get(namespace, key))

    def _put(self, namespace: Namespace, key: str, value: Mapping[str, Any], index: Any) -> None:
        self.store.put(namespace, key, self._checked(dict(value)))

    def _delete(self, namespace: Namespace, key: str) -> None:
        self.store.delete(namespace, key)

    def _search(self, op: SearchOp) -> list[SearchItem]:
        prefix = op.namespace_prefix
        if not op.filter:  # the store pages itself
            return self._search_items(self.store.search(prefix, limit=op.limit, offset=op.offset))
        found: list[ProfileItem] = []
        while page := self.store.search(prefix, limit=500, offset=len(found)):
            found.extend(page)
        return self._search_items(self._filtered(found, op))

    def _namespaces(self) -> list[Namespace]:
        return self.store.list_namespaces(limit=2**31)

    async def _aget(self, namespace: Namespace, key: str) -> Item | None:
        return self._item(await self.store.aget(namespace, key))

    async def _aput(
        self, namespace: Namespace, key: str, value: Mapping[str, Any], index: Any
    ) -> None:
        await self.store.aput(namespace, key, self._checked(dict(value)))

    async def _adelete(self, namespace: Namespace, key: str) -> None:
        await self.store.adelete(namespace, key)

    async def _asearch(self, op: SearchOp) -> list[SearchItem]:
        prefix, store = op.namespace_prefix, self.store
        if not op.filter:
            return self._search_items(await store.asearch(prefix, limit=op.limit, offset=op.offset))
        found: list[ProfileItem] = []
        while page := await store.asearch(prefix, limit=500, offset=len(found)):
            found.extend(page)
        return self._search_items(self._filtered(found, op))

    async def _anamespaces(self) -> list[Namespace]:
        return await self.store.alist_namespaces(limit=2**31)
