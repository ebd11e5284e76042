"""Collection memory: many small memories a model inserts, updates and deletes, with versions."""

from memories.long_term.collection.memory import (
    CollectionMemory,
    CollectionStatus,
    CollectionUpdate,
)
from memories.long_term.collection.records import MemoryRecord, MemoryVersion

__all__ = [
    "CollectionMemory",
    "CollectionStatus",
    "CollectionUpdate",
    "MemoryRecord",
    "MemoryVersion",
]
