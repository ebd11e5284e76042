"""Our long-term memories as a LangGraph ``BaseStore``.

LangGraph code that takes a store (``graph.compile(store=...)``,
``create_agent(..., store=...)``, tools reading ``runtime.store``) can use
the profiles or the vector memory as its store::

    from memories.integrations.langgraph_store import ProfileStoreAdapter

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
a depth, a limit and an offset. :class:`VectorStoreAdapter` ranks
``search(query=...)`` by meaning; :class:`ProfileStoreAdapter` has no
semantic index and ignores ``query`` as LangGraph's un-indexed stores do:
results come unranked with ``score`` None.

Time to live is LangGraph's: ``put(..., ttl=minutes)`` and a ``ttl=TTLConfig``
(``default_ttl``, ``refresh_on_read``, ``omit_expired``,
``sweep_interval_minutes``) given to the adapter; ``sweep_ttl()`` deletes the
expired items from their store (Chroma documents, profile rows) and
``start_ttl_sweeper()`` runs it on a thread. Expiry times live in an
:class:`~memories.stores.expiry.ExpiryLedger` table beside the store.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from abc import abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from langgraph.store.base import (
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
)

from memories.errors import InvalidInputError, InvalidProfileError
from memories.kernel.namespaces import in_namespace, namespace_key
from memories.long_term.profile import ProfileMemory, ProfileSchema, ProfileStore
from memories.stores.expiry import DOCUMENTS, ITEMS, Expiring, ExpiryLedger
from memories.stores.history.sql import default_sqlite_url
from memories.stores.profile_store import ProfileItem
from memories.stores.vector.scoring import check_min_score

if TYPE_CHECKING:
    from memories.long_term.collection import CollectionMemory, MemoryRecord
    from memories.long_term.indexed import IndexedMemory
    from memories.long_term.vector import SearchResult, VectorMemory

__all__ = [
    "CollectionStoreAdapter",
    "MemoryStoreAdapter",
    "ProfileStoreAdapter",
    "VectorStoreAdapter",
    "matches_all",
    "matches_filter",
    "namespace_tuple",
    "select_namespaces",
]

Namespace = tuple[str, ...]

logger = logging.getLogger(__name__)

_TTL_KEYS = frozenset(TTLConfig.__annotations__)
#: Keys one read of expired rows names at most (:meth:`MemoryStoreAdapter._expired_among`).
_KEYS_A_READ = 500


class MemoryStoreAdapter(BaseStore):
    """A LangGraph store over one of our stores: ``batch`` written once on five methods.

    Implementing a subclass
    -----------------------
    Implement :meth:`_get`, :meth:`_put`, :meth:`_delete`, :meth:`_search` and
    :meth:`_namespaces`, and their async twins (``_aget``...) when the backend
    has native async calls; otherwise ``abatch`` runs ``batch`` in a thread.
    Filtering, namespace matching, paging and time to live are done here, once.
    """

    #: ``search(query=...)`` ranks by meaning (a vector index); else query is ignored.
    supports_query = False
    supports_ttl = True
    ttl_config: TTLConfig | None = None
    #: Where expiry times are kept (None: beside the store, see :meth:`_expiry_url`).
    ttl_url: str | None = None
    #: The time items are stamped and checked with (Unix seconds; a test injects its own).
    clock: Callable[[], float] = time.time
    #: The expiry table its items use (:data:`~memories.stores.expiry.ITEMS`, or
    #: ``DOCUMENTS`` for profile store documents, shared with a profile's own ttl).
    expiry_table: ClassVar[str] = ITEMS
    _ledger: ExpiryLedger | None = None
    _sweeper: tuple[threading.Thread, threading.Event] | None = None

    def _expiring(
        self, ttl: TTLConfig | None, ttl_url: str | None, clock: Callable[[], float] | None
    ) -> None:
        """Take the constructor's time-to-live arguments (every subclass passes them here)."""
        if ttl is not None:
            if not isinstance(ttl, Mapping) or set(ttl) - _TTL_KEYS:
                raise InvalidInputError(
                    f"ttl must be a LangGraph TTLConfig dict with keys among "
                    f"{sorted(_TTL_KEYS)}, got {ttl!r:.80}."
                )
            self.ttl_config = TTLConfig(**ttl)
        self.ttl_url = ttl_url
        if clock is not None:
            self.clock = clock

    def _expiry_url(self) -> str:
        """The database expiry times go to by default: the default SQLite file."""
        return default_sqlite_url()

    @property
    def ledger(self) -> ExpiryLedger:
        """The expiry times of this store's items (opened on first use)."""
        if self._ledger is None:
            self._ledger = ExpiryLedger(self.ttl_url or self._expiry_url(), table=self.expiry_table)
        return self._ledger

    @property
    def _timed(self) -> bool:
        """Whether items may carry a time to live (configured, or a ttl was put)."""
        return self.ttl_config is not None or self.ttl_url is not None or self._ledger is not None

    @property
    def _omit_expired(self) -> bool:
        return bool(self.ttl_config and self.ttl_config.get("omit_expired"))

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
                results.append(self._kept(op, self._get(op.namespace, op.key)))
            elif isinstance(op, PutOp):
                # The expiry row goes before the item (and goes after it on a delete): a
                # crash between the two leaves a row the sweep drops, never an item
                # that lives forever.
                if op.value is None:
                    self._delete(op.namespace, op.key)
                    self._stamp(op)
                else:
                    self._stamp(op)
                    self._put(op.namespace, op.key, op.value, op.index)
                results.append(None)
            elif isinstance(op, SearchOp):
                results.append(self._searched(op, self._search))
            elif isinstance(op, ListNamespacesOp):
                results.append(select_namespaces(self._live(self._namespaces()), op))
            else:
                raise ValueError(f"{type(self).__name__} cannot run the operation {op!r:.80}")
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        results: list[Result] = []
        for op in ops:
            # The expiry ledger is SQL: its part of each op runs on a thread too.
            if isinstance(op, GetOp):
                item = await self._aget(op.namespace, op.key)
                results.append(await _in_thread(self._kept, op, item) if self._timed else item)
            elif isinstance(op, PutOp):
                stamped = self._timed or op.ttl is not None
                if op.value is None:  # the expiry row after a delete, before a put (batch)
                    await self._adelete(op.namespace, op.key)
                    if stamped:
                        await _in_thread(self._stamp, op)
                else:
                    if stamped:
                        await _in_thread(self._stamp, op)
                    await self._aput(op.namespace, op.key, op.value, op.index)
                results.append(None)
            elif isinstance(op, SearchOp):
                if self._timed:
                    results.append(await _in_thread(self._searched, op, self._search))
                else:
                    results.append(await self._asearch(op))
            elif isinstance(op, ListNamespacesOp):
                namespaces = await self._anamespaces()
                if self._omit_expired:
                    namespaces = await _in_thread(self._live, namespaces)
                results.append(select_namespaces(namespaces, op))
            else:
                raise ValueError(f"{type(self).__name__} cannot run the operation {op!r:.80}")
        return results

    # -- time to live: written once, on top of the five methods ----------------------

    def _stamp(self, op: PutOp) -> None:
        """Record a put's time to live (None: it never expires; a delete forgets it)."""
        if op.value is None:
            if self._timed:
                self.ledger.forget(op.namespace, op.key)
            return
        if op.ttl is None and not self._timed:
            return
        self.ledger.set(op.namespace, op.key, op.ttl, now=self.clock())

    def _kept(self, op: GetOp, item: Item | None) -> Item | None:
        """A got item as the TTL settings show it: None when expired and omitted; refreshed."""
        if item is None or not self._timed:
            return item
        expired = self.ledger.expired_on_read(
            op.namespace, op.key, now=self.clock(), refresh=op.refresh_ttl
        )
        return None if expired and self._omit_expired else item

    def _expired_among(
        self, items: Sequence[SearchItem], now: float, *, under: Namespace = ()
    ) -> set[tuple[Namespace, str]]:
        """Which of ``items`` (found under the prefix ``under``) are expired, not swept yet.

        The ledger is asked about these items' keys only, ``_KEYS_A_READ`` at a time.
        """
        expired: set[tuple[Namespace, str]] = set()
        for start in range(0, len(items), _KEYS_A_READ):
            keys = list({i.key for i in items[start : start + _KEYS_A_READ]})
            found = self.ledger.expired(now=now, keys=keys, under=under)
            expired |= {(e.namespace, e.key) for e in found}
        return expired

    def _searched(
        self, op: SearchOp, search: Callable[[SearchOp], list[SearchItem]]
    ) -> list[SearchItem]:
        """``search(op)``, expired items left out before paging (``omit_expired``); refreshed."""
        if not self._timed:
            return search(op)
        now = self.clock()
        prefix = tuple(op.namespace_prefix)
        hidden = 0
        if self._omit_expired:  # how many may be left out: counted, not read
            hidden = sum(self.ledger.expired_counts(now=now, under=prefix).values())
        if hidden:
            # Read past the page by as many items as may be left out, then page.
            wide = op._replace(offset=0, limit=op.offset + op.limit + hidden)
            found = search(wide)
            expired = self._expired_among(found, now, under=prefix)
            live = [i for i in found if (tuple(i.namespace), i.key) not in expired]
            found = live[op.offset : op.offset + op.limit]
        else:
            found = search(op)
        if op.refresh_ttl and found:
            self.ledger.refresh([(tuple(i.namespace), i.key) for i in found], now=now)
        return found

    def _live(self, namespaces: list[Namespace]) -> list[Namespace]:
        """The namespaces that hold an item not expired (all of them without ``omit_expired``).

        A namespace with expired rows is searched a page at a time (its own
        expired count and one more) until one of its own items is found live:
        the ledger is asked only about the items found.
        """
        if not self._omit_expired:
            return namespaces
        now = self.clock()
        counts = self.ledger.expired_counts(now=now)
        return [
            ns for ns in namespaces if not counts.get(ns) or self._holds_live(ns, counts[ns], now)
        ]

    def _holds_live(self, namespace: Namespace, expired: int, now: float) -> bool:
        """Whether ``namespace`` itself holds an item not expired (it has ``expired`` expired)."""
        size, offset = expired + 1, 0
        while True:
            probe = SearchOp(namespace, limit=size, offset=offset, refresh_ttl=False)
            found = self._search(probe)
            own = [i for i in found if tuple(i.namespace) == namespace]
            gone = self._expired_among(own, now, under=namespace)
            if any((namespace, i.key) not in gone for i in own):
                return True
            if len(found) < size:
                return False
            offset += size

    def sweep_ttl(self, *, batch: int = 500) -> int:
        """Delete every expired item from the store with its expiry row; how many expired.

        Items go in batches of ``batch``, a namespace at a time, each only
        while its row is still expired, checked in the transaction that
        forgets the row (:meth:`_expire`): an item put again or refreshed
        after the sweep read its row is kept, with its new time to live.
        """
        if not self._timed:
            return 0
        return sum(self.ledger.sweep(self._expire, now=self.clock(), batch=batch).values())

    def _expire(self, namespace: Namespace, expired: list[Expiring], now: float) -> None:
        """Delete those of ``expired`` still expired at ``now``, with their rows.

        The rows are held while the items go (:meth:`ExpiryLedger.sweeping`):
        a put of one of them, which writes its row first, waits for them. An
        adapter whose store is on the ledger's database overrides this, to
        delete in the transaction that holds the rows.
        """
        with self.ledger.sweeping(namespace, [e.key for e in expired], expired_at=now) as held:
            for key in held:
                self._delete(namespace, key)

    async def asweep_ttl(self, *, batch: int = 500) -> int:
        """Async :meth:`sweep_ttl`."""
        return int(await _in_thread(lambda: self.sweep_ttl(batch=batch)))

    def start_ttl_sweeper(self, sweep_interval_minutes: float | None = None) -> None:
        """Sweep every ``sweep_interval_minutes`` (default: the TTL config's) on a daemon thread."""
        interval = sweep_interval_minutes or (self.ttl_config or {}).get("sweep_interval_minutes")
        if not interval:
            raise InvalidInputError(
                "start_ttl_sweeper needs an interval: pass sweep_interval_minutes, or give "
                "ttl={'sweep_interval_minutes': N} to the adapter."
            )
        if self._sweeper is not None:
            return
        stop = threading.Event()

        def sweeping() -> None:
            while not stop.wait(float(interval) * 60):
                try:
                    swept = self.sweep_ttl()
                    logger.debug("%r: TTL sweep removed %d items", self, swept)
                except Exception:  # a failed sweep is retried at the next interval
                    logger.exception("%r: TTL sweep failed", self)

        thread = threading.Thread(target=sweeping, name="memories-ttl-sweeper", daemon=True)
        self._sweeper = (thread, stop)
        thread.start()

    def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Stop the sweeper thread; True once it has stopped (within ``timeout`` seconds)."""
        if self._sweeper is None:
            return True
        thread, stop = self._sweeper
        stop.set()
        thread.join(timeout)
        if thread.is_alive():
            return False
        self._sweeper = None
        return True


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


def matches_all(value: Mapping[str, Any], conditions: Mapping[str, Any] | None) -> bool:
    """Whether a value meets every field condition of a ``search(filter=...)``."""
    return all(matches_filter(value.get(k), v) for k, v in (conditions or {}).items())


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
    """Profiles (``memories.long_term.profile.ProfileStore``) as a LangGraph store.

    Expiry times go to the profile store's document table (``memories_document_expiry``),
    which a ``ProfileMemory(ttl=...)`` on the same store uses too.

    Each item is a profile document: ``namespace`` is the profile's namespace
    (a user), ``key`` its name (``"profile"`` by default). ``put`` records a
    ``put`` change in the profile's history, so ``ProfileMemory.rollback``
    can undo it; ``delete`` erases the profile with its history.

    Args:
        store: the profile store (``ProfileStore(url)``).
        schema: a JSON Schema or Pydantic model every ``put`` must satisfy;
            None accepts any JSON object.
        ttl: LangGraph's ``TTLConfig`` (``default_ttl`` minutes, ``refresh_on_read``,
            ``omit_expired``, ``sweep_interval_minutes``); None: items live until
            deleted, unless a ``put`` gives its own ``ttl``.
        ttl_url: the SQL database that keeps expiry times (default: the store's own,
            which a vector or collection memory reads too, so that its own
            searches hide what expired through the adapter).
        clock: the time expiry is reckoned with (Unix seconds; default ``time.time``).
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
        self._expiring(ttl, ttl_url, clock)

    expiry_table: ClassVar[str] = DOCUMENTS

    @classmethod
    def from_memory(cls, memory: ProfileMemory, /, **options: Any) -> ProfileStoreAdapter:
        """The store of a profile memory, checking writes against its schema."""
        return cls(memory.store, schema=memory.profile_schema, **options)

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
        chosen = [f for f in found if f.value is not None and matches_all(f.value, op.filter)]
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


# -- vector memory ------------------------------------------------------------------

# Metadata keys the adapter keeps beside each document it writes.
_KEY = "store_key"
_VALUE = "store_value"
_CREATED = "store_created_at"
_UPDATED = "store_updated_at"
_OWN_KEYS = frozenset({_KEY, _VALUE, _CREATED, _UPDATED})


#: The memory a template adapter serves, one twin per namespace.
TemplateMemory = TypeVar("TemplateMemory", bound="IndexedMemory")


class _TemplateAdapter(MemoryStoreAdapter, Generic[TemplateMemory]):
    """An adapter over a template memory: its twin per namespace, its sweep, its text field."""

    memory: TemplateMemory
    text_field: str
    _memories: dict[Namespace, TemplateMemory]

    def sweep_ttl(self, *, batch: int = 500) -> int:
        """The memory's own sweep: it deletes what expired whole, in every namespace."""
        return sum(self.memory.sweep(batch=batch).values())

    def _memory(self, namespace: Namespace) -> TemplateMemory:
        """The template's twin for ``namespace``, built once (see :func:`_of_namespace`)."""
        twin: TemplateMemory = _of_namespace(
            self.memory, namespace, self._memories, omit_expired=self._omit_expired
        )
        return twin

    def _text(self, value: Mapping[str, Any]) -> str:
        """The value's ``text_field``, or the whole value as JSON when it has none."""
        text = value.get(self.text_field)
        return text if isinstance(text, str) else json.dumps(value, sort_keys=True, default=str)


class VectorStoreAdapter(_TemplateAdapter["VectorMemory"]):
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
        if _VALUE in metadata:
            value = json.loads(metadata[_VALUE])
            created, updated = metadata[_CREATED], metadata[_UPDATED]
        else:  # a turn the vector memory saved itself
            value = {"text": text, **{k: v for k, v in metadata.items() if k != "namespace"}}
            created = updated = float(metadata.get("timestamp", 0.0))
        return Item(
            value=value,
            key=str(metadata.get(_KEY, doc_id)),
            namespace=namespace,
            created_at=_timestamp(float(created)),
            updated_at=_timestamp(float(updated)),
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
            _KEY: key,
            _VALUE: json.dumps(dict(value), default=str),
            _CREATED: created,
            _UPDATED: now,
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
        found: list[SearchItem] = await _in_thread(self._search_above, op, min_score)
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
                found.extend(_search_item(i, None) for i in items)
                continue
            by_id = {i.key: i for i in items}
            if not by_id:
                continue
            where = {_KEY: {"$in": list(by_id)}} if op.filter else None
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
            key = str(result.metadata.get(_KEY, result.id))
            if key in by_id:
                ranked.append(_search_item(by_id[key], float(result.score)))
        return ranked


class CollectionStoreAdapter(_TemplateAdapter["CollectionMemory"]):
    """A collection memory (:class:`~memories.long_term.collection.CollectionMemory`) as a store.

    Each namespace is the collection's namespace of the same name; each item
    is one memory whose id is the key. ``put`` stores the value's
    ``text_field`` as the memory's content (the whole value as JSON when it
    has none) and keeps the value beside it, as a new version when the key
    exists (the collection's history and rollback apply). Memories the
    collection made itself show up as ``{"content": ..., **metadata}``.
    ``search(query=...)`` ranks with the collection's recall.

    Args:
        memory: the collection whose stores and settings every namespace
            uses (its own namespace is only the template's).
        text_field: the value field that becomes the memory's content.
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
        memory: CollectionMemory,
        /,
        *,
        text_field: str = "content",
        ttl: TTLConfig | None = None,
        ttl_url: str | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.memory = memory
        self.text_field = text_field
        self._memories: dict[Namespace, CollectionMemory] = {}
        self._expiring(ttl, ttl_url, clock)

    def _expiry_url(self) -> str:
        return str(self.memory.url)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.memory.url!r})"

    def _item(self, namespace: Namespace, record: MemoryRecord) -> Item:
        stored = record.metadata.get(_VALUE)
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
        found = self._memory(namespace).get(key)
        return None if found is None else self._item(namespace, found)

    def _put(self, namespace: Namespace, key: str, value: Mapping[str, Any], index: Any) -> None:
        metadata = {_VALUE: json.dumps(dict(value), default=str)}
        self._memory(namespace).put(self._text(value), metadata=metadata, memory_id=key)

    def _delete(self, namespace: Namespace, key: str) -> None:
        memory = self._memory(namespace)
        if memory.get(key) is not None:
            memory.delete(key)

    def _namespaces(self) -> list[Namespace]:
        ledger = self.memory.ledger
        return [ns for ns in ledger.list_namespaces(limit=10**9) if ledger.keys(ns, "memory:")]

    def _search(self, op: SearchOp) -> list[SearchItem]:
        prefix = op.namespace_prefix
        wanted = op.offset + op.limit
        found: list[SearchItem] = []
        for namespace in [ns for ns in self._namespaces() if ns[: len(prefix)] == prefix]:
            memory = self._memory(namespace)
            items = {r.id: self._item(namespace, r) for r in memory.list()}
            kept = {k: i for k, i in items.items() if matches_all(i.value, op.filter)}
            if not op.query:
                found.extend(_search_item(i, None) for i in kept.values())
                continue
            for record in memory.search(op.query, k=max(len(items), 1)):
                if record.id in kept:
                    found.append(_search_item(kept[record.id], record.score))
        if op.query:
            found.sort(key=lambda i: i.score or 0.0, reverse=True)
        else:
            found.sort(key=lambda i: (i.namespace, i.key))
        return found[op.offset : wanted]


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
    _check_labels(namespace_prefix)
    if query is None:
        raise InvalidInputError(
            f"min_score={min_score!r} needs a query: a search without one scores nothing."
        )
    refresh = True if refresh_ttl is None else refresh_ttl  # what BaseStore does without TTLs
    return SearchOp(namespace_prefix, filter, limit, offset, query, refresh)


def _check_labels(namespace: Namespace) -> None:
    """LangGraph's rules for namespace labels, as ``BaseStore.search`` applies them."""
    for label in namespace:
        if not isinstance(label, str) or not label or "." in label or "\x00" in label:
            raise InvalidNamespaceError(
                f"Invalid namespace label {label!r} in {namespace!r}: labels are non-empty "
                "strings without '.' or NUL bytes."
            )


def _of_namespace(
    template: Any, namespace: Namespace, made: dict[Namespace, Any], *, omit_expired: bool
) -> Any:
    """The template memory's twin for ``namespace``, built once per namespace.

    Its items' time to live is the adapter's (LangGraph's ``ttl``), stamped
    before each write: the twin has no ``ttl`` of its own to stamp over it,
    and hides expired items only under ``omit_expired`` (else they are read
    until swept, as in LangGraph's stores).
    """
    if namespace not in made:
        made[namespace] = in_namespace(template, namespace, ttl=None, hide_expired=omit_expired)
    return made[namespace]


def _search_item(item: Item, score: float | None) -> SearchItem:
    return SearchItem(
        namespace=item.namespace,
        key=item.key,
        value=item.value,
        created_at=item.created_at,
        updated_at=item.updated_at,
        score=score,
    )


def namespace_tuple(key: str) -> Namespace:
    """The namespace a key names: ``"a/b%2Fc"`` -> ``("a", "b/c")`` (see ``namespace_key``)."""
    return tuple(label.replace("%2F", "/").replace("%25", "%") for label in key.split("/"))
