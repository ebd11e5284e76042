"""``memories sweep`` and ``memories reshard``: upkeep of a config's stores, every namespace."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from memories.core.base import ChatMemory
from memories.core.langchain import LangChainBaseMemory
from memories.core.members import searchable_memories
from memories.kernel.capabilities import capabilities_of
from memories.stores.sql import redacted

if TYPE_CHECKING:
    from memories.integrations.chroma import Demotion
from memories.faces.commands.opening import leaf_memories


@dataclass(frozen=True, slots=True)
class Swept:
    """What a sweep removed (or, in a dry run, would remove) from one memory's store."""

    memory: str
    """The memory's config type and its store, as a reader names them."""
    policy: dict[str, Any]
    """The retention or time to live it applied (its config form)."""
    rows: dict[str, int]
    """Items deleted per session or namespace (those with none left out)."""


def sweep(memory: LangChainBaseMemory, *, dry_run: bool = False) -> list[Swept]:
    """Delete what each member's retention or time to live expired, in every session or namespace.

    Members that declare nothing can expire are left out, and so are chat
    memories without a retention. Derived state (summaries, profiles) is
    never touched; a crash mid-way leaves a shorter sweep for the next run.
    """
    done = []
    for leaf in leaf_memories(memory):
        if not capabilities_of(leaf).expires:
            continue
        if isinstance(leaf, ChatMemory):
            if leaf.retention is None:
                continue
            name, policy = f"{leaf.config_type} on {leaf.chat_memory!r}", leaf.retention.to_config()
        else:
            store = redacted(leaf.expiry.url)  # type: ignore[attr-defined]
            kind = getattr(leaf, "config_type", type(leaf).__name__)
            name, policy = f"{kind} on {store}", {"ttl": getattr(leaf, "ttl", None)}
        done.append(Swept(name, policy, leaf.sweep(dry_run=dry_run)))  # type: ignore[attr-defined]
    return done


def reshard(memory: LangChainBaseMemory, *, dry_run: bool = False) -> list[Demotion]:
    """Move the small namespaces of the memory's Chroma stores from collections into shards.

    Each Chroma store its searchable members use (once per folder or server and
    collection prefix) is resharded whole, every namespace it holds, not only
    the config's: see :meth:`ChromaStore.demote`. Stores on PostgreSQL have no
    collections and are skipped.
    """
    done: list[Demotion] = []
    seen: set[tuple[str, str]] = set()
    for member in searchable_memories(memory):
        try:
            store = member.store
        except NotImplementedError:  # pgvector: one table, nothing to reshard
            continue
        # By place, not target: a copy of a folder has the original's id, and its own collections.
        collections = (store.location, store.collection_prefix)
        if collections not in seen:
            seen.add(collections)
            done += store.reshard(dry_run=dry_run)
    return done
