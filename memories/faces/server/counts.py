"""How many items a memory's reads show: the store's counts less what expired, model usage.

The expired and not yet swept are subtracted (counted in SQL, a page of ids at a time),
so that the inspector's counts match what its pages list.
"""

from __future__ import annotations

from typing import Any

from memories.core.parts import ModelMemory
from memories.kernel.accounting import ModelUsage
from memories.kernel.namespaces import Namespace, in_namespace
from memories.long_term.indexed import DocumentMemory, IndexedMemory
from memories.long_term.stored import ExpiringDocumentMemory
from memories.stores.vector.records import SearchResult

#: Expired ids a namespace listing checks against a vector store per read.
EXPIRED_PAGE = 500
#: The counters of a memory's recorded model usage the inspector shows.
_USAGE_SHOWN = ("calls", "failures", "input_tokens", "output_tokens")


def recorded_usage(
    leaf: Any, totals: dict[int, Any], namespace: str | None = None
) -> dict[str, Any] | None:
    """A memory's recorded model calls and tokens, ``"all"`` time and ``"today"``.

    None when nothing is recorded (no model, or no SQL database to record in).
    ``totals`` caches each database's one aggregate query for the next memory.
    """
    store = leaf.usage_store if isinstance(leaf, ModelMemory) else None
    if store is None:
        return None
    key = id(store.database.engine)
    if key not in totals:
        totals[key] = store.usage_totals(namespace)
    usage = totals[key].get(leaf.usage_name(), {})
    return {
        when: {name: getattr(usage.get(when) or ModelUsage(), name) for name in _USAGE_SHOWN}
        for when in ("all", "today")
    }


def live_page(
    leaf: DocumentMemory, namespace: Namespace, records: list[SearchResult], start: int, size: int
) -> tuple[list[SearchResult], int]:
    """The page of ``records`` from ``start`` its reads show (the expired left out), and the total.

    The ledger is asked about ``EXPIRED_PAGE`` ids at a time: their rows up to the page's
    end, then only how many, for the total.
    """
    if not expired_counts(leaf, namespace).get(namespace):
        return records[start : start + size], len(records)
    page: list[SearchResult] = []
    total = 0
    for first in range(0, len(records), EXPIRED_PAGE):
        chunk = records[first : first + EXPIRED_PAGE]
        ids = [r.id for r in chunk]
        if total >= start + size:
            total += len(chunk) - leaf.expired_counts(namespace, keys=ids).get(namespace, 0)
            continue
        gone = {e.key for e in leaf.expired_items(namespace, keys=ids)}
        live = [r for r in chunk if r.id not in gone]
        page += live[max(0, start - total) : max(0, start + size - total)]
        total += len(live)
    return page, total


def expired_counts(leaf: Any, namespace: Namespace | None = None) -> dict[Namespace, int]:
    """How many items ``leaf``'s own reads leave out now, per namespace (one aggregate query)."""
    if not isinstance(leaf, IndexedMemory | ExpiringDocumentMemory):
        return {}
    return leaf.expired_counts(namespace)


def shown_count(leaf: Any, namespace: Namespace, counted: int | None, expired: int) -> int:
    """A namespace's documents as ``leaf`` reads them: ``counted`` (the store's) less the expired.

    ``expired``: its expired expiry rows. A vector or example document's row may outlive
    the document (a crash between the two deletions), so only those still stored count.
    """
    if not counted or not expired:
        return counted or 0
    if isinstance(leaf, DocumentMemory):  # any backend (pgvector too), in that namespace
        there = leaf if leaf.namespace == namespace else in_namespace(leaf, namespace)
        stored = 0
        for offset in range(0, expired, EXPIRED_PAGE):
            page = leaf.expired_items(namespace, limit=EXPIRED_PAGE, offset=offset)
            stored += len(there.backend.get([e.key for e in page]))
        expired = stored
    return max(0, counted - expired)
