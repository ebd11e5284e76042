"""Vector memory: conversation turns in Chroma, recalled by hybrid search.

Importing this package imports Chroma only when a store is first used.
"""

from memories.long_term.vector.memory import VectorMemory
from memories.long_term.vector.retriever import VectorStoreRetrieverMemory
from memories.stores.vector.records import SearchResult
from memories.stores.vector.writes import VectorStatus

__all__ = ["SearchResult", "VectorMemory", "VectorStatus", "VectorStoreRetrieverMemory"]
