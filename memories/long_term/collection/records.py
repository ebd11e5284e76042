"""The records a collection memory gives back: a memory, and one version of it."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from langchain_core.messages import BaseMessage

from memories.stores.recall.types import RankParts

__all__ = ["MemoryRecord", "MemoryVersion"]


@dataclass(frozen=True)
class MemoryRecord:
    """One memory of a collection, as it stands (or stood, for ``search(as_of=...)``)."""

    id: str
    """Its id, stable across updates."""
    content: Any
    """What it says: a string, or a dict valid against the collection's schema."""
    metadata: dict[str, Any]
    """The caller's metadata."""
    created_at: datetime
    """When it was first stored (UTC)."""
    updated_at: datetime
    """When this content was stored: when it became true as far as we know (UTC)."""
    invalid_at: datetime | None = None
    """When it was superseded or deleted (None: current)."""
    version: int = 1
    """How many changes it has had."""
    score: float | None = None
    """How well it matched a search (None outside a search)."""
    ranking: RankParts | None = None
    """Why it ranked where it did in a search: dense, lexical and neighbour parts (or None)."""


@dataclass(frozen=True)
class MemoryVersion:
    """One entry of a memory's history."""

    version: int
    """The version this change created."""
    kind: str
    """``insert``, ``update``, ``delete``, ``put``, ``rollback``, ``clear``."""
    content: Any
    """The content from then on (None after a delete)."""
    metadata: dict[str, Any]
    """The metadata from then on."""
    valid_from: datetime
    """When it was recorded (UTC)."""
    invalid_at: datetime | None
    """When the next change replaced it (None: still current)."""
    turns: tuple[tuple[BaseMessage, ...], ...] = field(default=())
    """The conversation turns that caused it (none for a direct write)."""
