"""Our long-term memories as a LangGraph ``BaseStore``.

LangGraph code that takes a store (``graph.compile(store=...)``,
``create_agent(..., store=...)``, tools reading ``runtime.store``) can use the
profiles, a collection or the vector memory as its store. Behaviour, time to
live included, follows LangGraph's own stores (``tests/integrations/store_contract.py``
runs the same checks against its ``InMemoryStore``); usage is on the docs' Agents
and LangGraph page.
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
