"""A collection's own rows: its ledger keys, expiry keys and index namespace, by its ``key``.

Collections of one namespace on one database are told apart by their ``key``. The
default key's rows are where every collection kept them before keys were told apart,
so an existing single-collection database reads back unchanged; another key's carry
the key, quoted (:class:`Rows`). A memory id has no ``:``, so no key's rows are a
prefix of another's.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import quote, unquote

from memories.kernel.namespaces import Namespace, in_namespace, namespace_text
from memories.kernel.steps import Steps, step
from memories.stores.documents import ProfileItem
from memories.stores.documents.tables import claim_legacy
from memories.stores.expiry import Expiring

if TYPE_CHECKING:
    from memories.long_term.collection.memory import CollectionMemory

__all__ = ["MEMORY_PREFIX", "Rows", "claim", "expire_in", "lining_up", "memory_id"]

logger = logging.getLogger(__name__)

#: The key of a collection that names none: its rows are those of older versions.
DEFAULT_KEY = "collection"
#: Ledger keys of the default key's memories: ``memory:<id>``.
MEMORY_PREFIX = "memory:"


def _quoted(key: str) -> str:
    return quote(key, safe="").replace(".", "%2E")


def memory_id(ledger_key: str) -> str:
    """The memory id of a collection's ledger key, whatever the collection's key."""
    return ledger_key.rpartition(":")[2]


def key_of(expiry_key: str) -> str:
    """The key of the collection an expiry row is of (its key before its last ``:``)."""
    mark, _, _ = expiry_key.rpartition(":")
    return unquote(mark) if mark else DEFAULT_KEY


@dataclass(frozen=True)
class Rows:
    """Where the memories of the collection with ``key`` are, in its namespace."""

    key: str
    """The collection's key."""

    @property
    def prefix(self) -> str:
        """The ledger keys' prefix: ``memory:`` for the default key, else ``memory.<key>:``."""
        return MEMORY_PREFIX if self.key == DEFAULT_KEY else f"memory.{_quoted(self.key)}:"

    @property
    def mark(self) -> str:
        """The expiry keys' prefix: none for the default key, else ``<key>:``."""
        return "" if self.key == DEFAULT_KEY else f"{_quoted(self.key)}:"

    def index_namespace(self, namespace: Namespace) -> Namespace:
        """The namespace of the collection's index documents: one more label for another key."""
        own = () if self.key == DEFAULT_KEY else (f"collection:{_quoted(self.key)}",)
        return (*namespace, *own)

    def expiry_keys(self, ids: Iterable[str]) -> list[str]:
        """The expiry keys of memories with these ids."""
        return [self.mark + i for i in ids]

    def own(self, expired: Sequence[Expiring]) -> list[str]:
        """The ids of the expiry rows among ``expired`` that are this collection's."""
        return [e.key.removeprefix(self.mark) for e in expired if key_of(e.key) == self.key]


def expire_in(
    memory: CollectionMemory, namespace: Namespace, expired: list[Expiring], now: float
) -> None:
    """A sweep's expired rows of ``namespace``, each deleted by the collection whose row it is."""
    by_key: dict[str, list[Expiring]] = {}
    for item in expired:
        by_key.setdefault(key_of(item.key), []).append(item)
    for key, items in by_key.items():
        same = (namespace, key) == (memory.namespace, memory.key)
        (memory if same else in_namespace(memory, namespace, key=key))._expire(items, now)


def lining_up(memory: CollectionMemory) -> Steps[None]:
    """Once per object: bring the index in line with the ledger where they disagree.

    The index can lag the ledger: an in-process index (``mode="memory"``)
    after a restart, a moved Chroma folder, or a process that died between
    the two writes of a change. The ledger is the truth: a memory missing
    from the index (or one the ledger no longer has) rebuilds the index
    whole; a memory indexed at another version than the ledger's is
    indexed again.
    """
    if memory._in_line:
        return
    items = yield step(memory.ledger.keys, memory.namespace, memory.rows.prefix)
    indexed = yield step(memory.backend.count)
    stale = (yield from _stale(memory, items)) if indexed == len(items) else None
    if stale:
        logger.warning(
            "Collection %r: %d memories are indexed at another version than the ledger's; "
            "indexing them again.",
            memory.namespace,
            len(stale),
        )
        yield from memory._indexing([item.key for item in stale], stale)
    elif stale is None:
        logger.warning(
            "Collection %r: the index holds %d memories and the ledger %d%s; re-indexing.",
            memory.namespace,
            indexed,
            len(items),
            ", not the same ones" if indexed == len(items) else "",
        )
        yield step(memory.backend.erase_namespace)
        if items:
            yield step(memory.backend.add, [memory._row(i) for i in items], progress=False)
    memory._in_line = True


def _stale(
    memory: CollectionMemory, items: Sequence[ProfileItem]
) -> Steps[list[ProfileItem] | None]:
    """The ledger's memories indexed at another version; None when one is not indexed."""
    if not items:
        return []
    ids = [memory_id(item.key) for item in items]
    found = yield step(memory.backend.get, ids)
    versions = {r.id: r.metadata.get("version") for r in found}
    if len(versions) != len(items):
        return None
    return [item for item, i in zip(items, ids, strict=True) if versions[i] != item.version]


def claim(memory: CollectionMemory) -> None:
    """Make the namespace's rows an older version wrote (``memory:<id>``, whatever the key)
    this collection's, when it has a key of its own and they are not the default key's.

    An older version kept every collection's memories under ``memory:<id>``: a
    database with one collection, whatever its key, reads back unchanged. The
    rows are claimed, with their history and expiry rows, by the first collection
    with another key to open the namespace, unless a collection wrote there since
    this version first opened the database (then they are the default key's).
    Their documents leave the namespace's own index (the claimer indexes them anew).
    """
    if memory.key == DEFAULT_KEY:
        return
    rows, expiry = memory.rows, memory.expiry
    expiry.database.engine  # noqa: B018  (its table made before the transaction)
    with memory.ledger.database.transaction(write=True) as connection:
        ids = claim_legacy(connection, namespace_text(memory.namespace), rows.prefix)
        expiry.renaming(memory.namespace, dict(zip(ids, rows.expiry_keys(ids), strict=True)))(
            connection
        )
    if ids:
        logger.warning(
            "Collection %r (key %r): claimed %d memories an older version wrote.",
            memory.namespace,
            memory.key,
            len(ids),
        )
        in_namespace(memory, memory.namespace, key=DEFAULT_KEY).backend.delete(ids, None)
