"""The LangGraph store over one of our stores: ``batch`` and time to live, written once."""

from __future__ import annotations

import logging
import threading
import time
from abc import abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, ClassVar

from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
)
from memories.integrations.langgraph_store.filters import Namespace, select_namespaces

from memories.errors import InvalidInputError
from memories.kernel.steps import Steps, blocking_twin, step, twins
from memories.stores.expiry import ITEMS, Expiring, ExpiryLedger
from memories.stores.history.sql import default_sqlite_url

__all__ = ["MemoryStoreAdapter"]

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

    Args:
        ttl: LangGraph's ``TTLConfig`` (``default_ttl`` minutes, ``refresh_on_read``,
            ``omit_expired``, ``sweep_interval_minutes``); None: items live until
            deleted, unless a ``put`` gives its own ``ttl``.
        ttl_url: the SQL database that keeps expiry times (default: the store's own,
            which a vector or collection memory reads too, so that its own
            searches hide what expired through the adapter).
        clock: the time expiry is reckoned with (Unix seconds; default ``time.time``).
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
    #: What an item's expiry row's key starts with, before the item's key (a keyed
    #: collection's memories: its ``rows.mark``), so its memory's own reads agree.
    ttl_mark: str = ""
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

    _aget = blocking_twin(_get)
    _aput = blocking_twin(_put)
    _adelete = blocking_twin(_delete)
    _asearch = blocking_twin(_search)
    _anamespaces = blocking_twin(_namespaces)

    def _batch_steps(self, ops: Iterable[Op]) -> Steps[list[Result]]:
        """The ops, each as its store methods' steps (the expiry ledger's only when timed)."""
        results: list[Result] = []
        for op in [_tupled(op) for op in ops]:  # each checked before any runs
            if isinstance(op, GetOp):
                item = yield step(self._get, op.namespace, op.key)
                results.append((yield step(self._kept, op, item)) if self._timed else item)
            elif isinstance(op, PutOp):
                # The expiry row goes before the item (and goes after it on a delete): a
                # crash between the two leaves a row the sweep drops, never an item
                # that lives forever. A refused put writes the row it replaced back.
                stamped = self._timed or op.ttl is not None
                if op.value is None:
                    yield step(self._delete, op.namespace, op.key)
                replaced = (yield step(self._stamp, op)) if stamped else None
                try:
                    if op.value is not None:
                        yield step(self._put, op.namespace, op.key, op.value, op.index)
                except (InvalidInputError, NotImplementedError):
                    if stamped:
                        yield step(
                            self.ledger.restore, op.namespace, self.ttl_mark + op.key, replaced
                        )
                    raise
                results.append(None)
            elif isinstance(op, SearchOp):
                results.append((yield step(self._searched if self._timed else self._search, op)))
            elif isinstance(op, ListNamespacesOp):
                namespaces = yield step(self._namespaces)
                if self._omit_expired:
                    namespaces = yield step(self._live, namespaces)
                results.append(select_namespaces(namespaces, op))
            else:
                raise ValueError(f"{type(self).__name__} cannot run the operation {op!r:.80}")
        return results

    batch, abatch = twins(_batch_steps)

    # -- time to live: written once, on top of the five methods ----------------------

    def _stamp(self, op: PutOp) -> tuple[float, float] | None:
        """Record a timed put's time to live (None: it never expires; a delete forgets it);
        returns the rule it replaced (:meth:`~memories.stores.expiry.ExpiryLedger.rule_of`)."""
        key = self.ttl_mark + op.key
        if op.value is None:
            if self._timed:
                self.ledger.forget(op.namespace, key)
            return None
        replaced = self.ledger.rule_of(op.namespace, key)
        self.ledger.set(op.namespace, key, op.ttl, now=self.clock())
        return replaced

    def _kept(self, op: GetOp, item: Item | None) -> Item | None:
        """A got item as the TTL settings show it: None when expired and omitted; refreshed."""
        if item is None or not self._timed:
            return item
        expired = self.ledger.expired_on_read(
            op.namespace, self.ttl_mark + op.key, now=self.clock(), refresh=op.refresh_ttl
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
            keys = list({self.ttl_mark + i.key for i in items[start : start + _KEYS_A_READ]})
            found = self.ledger.expired(now=now, keys=keys, under=under)
            expired |= {(e.namespace, e.key.removeprefix(self.ttl_mark)) for e in found}
        return expired

    def _searched(self, op: SearchOp) -> list[SearchItem]:
        """:meth:`_search`, expired items left out before paging (``omit_expired``); refreshed."""
        now = self.clock()
        prefix = tuple(op.namespace_prefix)
        hidden = 0
        if self._omit_expired:  # how many may be left out: counted, not read
            hidden = sum(self.ledger.expired_counts(now=now, under=prefix).values())
        if hidden:
            # Read past the page by as many items as may be left out, then page.
            wide = op._replace(offset=0, limit=op.offset + op.limit + hidden)
            found = self._search(wide)
            expired = self._expired_among(found, now, under=prefix)
            live = [i for i in found if (tuple(i.namespace), i.key) not in expired]
            found = live[op.offset : op.offset + op.limit]
        else:
            found = self._search(op)
        if op.refresh_ttl and found:
            self.ledger.refresh(
                [(tuple(i.namespace), self.ttl_mark + i.key) for i in found], now=now
            )
        return found

    _akept = blocking_twin(_kept)
    _astamp = blocking_twin(_stamp)
    _asearched = blocking_twin(_searched)

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

    _alive = blocking_twin(_live)

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

    asweep_ttl = blocking_twin(sweep_ttl)

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


def _tupled(op: Op) -> Op:
    """``op`` with its namespace a tuple (LangGraph takes a list too), a put's value a dict."""
    if isinstance(op, PutOp) and not isinstance(op.value, Mapping | None):
        raise InvalidInputError(
            f"An item's value must be a dict, as in LangGraph's stores; got {op.value!r:.80} "
            f"for key {op.key!r}. Wrap it, such as {{'value': ...}}."
        )
    if isinstance(op, SearchOp) and not isinstance(op.namespace_prefix, tuple):
        return op._replace(namespace_prefix=tuple(op.namespace_prefix))
    if isinstance(op, GetOp | PutOp) and not isinstance(op.namespace, tuple):
        return op._replace(namespace=tuple(op.namespace))
    return op
