"""Collection memory: many small memories a model inserts, updates and deletes, with versions."""

from memories.collection.memory import CollectionMemory, CollectionStatus, CollectionUpdate
from memories.collection.records import MemoryRecord, MemoryVersion

__all__ = [
    "CollectionMemory",
    "CollectionStatus",
    "CollectionUpdate",
    "MemoryRecord",
    "MemoryVersion",
]
