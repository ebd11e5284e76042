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

from memories.integrations.langgraph_store.base import MemoryStoreAdapter
from memories.integrations.langgraph_store.collection import CollectionStoreAdapter
from memories.integrations.langgraph_store.filters import (
    matches_all,
    matches_filter,
    namespace_tuple,
    select_namespaces,
)
from memories.integrations.langgraph_store.profile import ProfileStoreAdapter
from memories.integrations.langgraph_store.vector import VectorStoreAdapter

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
