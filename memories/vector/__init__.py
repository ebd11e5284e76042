"""Vector memory: conversation turns in Chroma, recalled by hybrid search.

Importing this package imports Chroma only when a store is first used.
"""

from memories.vector.memory import VectorMemory
from memories.vector.records import SearchResult
from memories.vector.retriever import VectorStoreRetrieverMemory
from memories.vector.writes import VectorStatus

__all__ = ["SearchResult", "VectorMemory", "VectorStatus", "VectorStoreRetrieverMemory"]
