"""Profiles (``memories.long_term.profile.ProfileStore``) as a LangGraph store."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from langgraph.store.base import Item, SearchItem, SearchOp, TTLConfig
from memories.integrations.langgraph_store.base import MemoryStoreAdapter
from memories.integrations.langgraph_store.filters import (
    Namespace,
    matches_all,
    search_item,
    timestamp,
)

from memories.errors import InvalidProfileError
from memories.kernel.steps import Steps, step, twins
from memories.long_term.profile import ProfileMemory, ProfileSchema, ProfileStore
from memories.stores.documents import ProfileItem
from memories.stores.expiry import DOCUMENTS, Expiring

__all__ = ["ProfileStoreAdapter"]


class ProfileStoreAdapter(MemoryStoreAdapter):
    """Profiles (``memories.long_term.profile.ProfileStore``) as a LangGraph store.

    Each item is a profile document: ``namespace`` is the profile's namespace
    (a user), ``key`` its name (``"profile"`` by default). ``put`` is recorded in
    the profile's history (``ProfileMemory.rollback`` undoes it); ``delete`` erases
    the profile with its history. Only the store's own rows are seen: a collection,
    instructions or an entity graph on the same database is not listed, and a
    ``put`` of a key one of them holds is refused (:mod:`memories.stores.documents`).
    Expiry times go to the store's ``memories_document_expiry`` table, shared with a
    ``ProfileMemory(ttl=...)``, whose expired profiles every read hides.

    Args:
        store: the profile store (``ProfileStore(url)``).
        schema: a JSON Schema or Pydantic model every ``put`` must satisfy;
            None accepts any JSON object.
        ttl, ttl_url, clock: time to live (:class:`MemoryStoreAdapter`'s Args).
    """

    def __init__(
        self,
        store: ProfileStore,
        /,
        *,
        schema: Any = None,
        ttl: TTLConfig | None = None,
        ttl_url: str | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.store = store
        self.schema = ProfileSchema(schema) if schema is not None else None
        own = getattr(store, "ttl", None)
        self._expiring(ttl, ttl_url, own.clock if clock is None and own is not None else clock)

    expiry_table: ClassVar[str] = DOCUMENTS

    @classmethod
    def from_memory(cls, memory: ProfileMemory, /, **options: Any) -> ProfileStoreAdapter:
        """The store of a profile memory, checking writes against its schema."""
        return cls(memory.store, schema=memory.profile_schema, **options)

    @property
    def _timed(self) -> bool:
        return super()._timed or getattr(self.store, "ttl", None) is not None

    @property
    def _omit_expired(self) -> bool:
        # A store that expires its documents shows an expired one as cleared on a load.
        return super()._omit_expired or getattr(self.store, "ttl", None) is not None

    def _expiry_url(self) -> str:
        url = getattr(self.store, "url", None)
        return url if isinstance(url, str) else super()._expiry_url()

    def _expire(self, namespace: Namespace, expired: list[Expiring], now: float) -> None:
        # On the store's database the profiles go in the transaction that holds the rows.
        self.store.delete_expired(namespace, [e.key for e in expired], self.ledger, now=now)

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
        return None if found is None or found.value is None else _as_item(found)

    def __get_steps(self, namespace: Namespace, key: str) -> Steps[Item | None]:
        return self._item((yield step(self.store.get, namespace, key)))

    _get, _aget = twins(__get_steps)

    def __put_steps(
        self, namespace: Namespace, key: str, value: Mapping[str, Any], index: Any
    ) -> Steps[None]:
        yield step(self.store.put, namespace, key, self._checked(dict(value)))

    _put, _aput = twins(__put_steps)

    def __delete_steps(self, namespace: Namespace, key: str) -> Steps[None]:
        yield step(self.store.delete, namespace, key)

    _delete, _adelete = twins(__delete_steps)

    def __search_steps(self, op: SearchOp) -> Steps[list[SearchItem]]:
        prefix, search = op.namespace_prefix, self.store.search
        found: list[ProfileItem] = []
        if not op.filter:  # the store pages itself
            found = yield step(search, prefix, limit=op.limit, offset=op.offset)
        else:
            while page := (yield step(search, prefix, limit=500, offset=len(found))):
                found.extend(page)
            kept = [f for f in found if f.value is not None and matches_all(f.value, op.filter)]
            found = kept[op.offset : op.offset + op.limit]
        return [search_item(_as_item(f), None) for f in found]

    _search, _asearch = twins(__search_steps)

    def __namespaces_steps(self) -> Steps[list[Namespace]]:
        return (yield step(self.store.list_namespaces, limit=2**31))

    _namespaces, _anamespaces = twins(__namespaces_steps)


def _as_item(found: ProfileItem) -> Item:
    return Item(
        value=found.value or {},
        key=found.key,
        namespace=found.namespace,
        created_at=timestamp(found.created_at),
        updated_at=timestamp(found.updated_at),
    )
