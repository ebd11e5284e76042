"""A collection's export and import for the command line: every version of every memory."""

from __future__ import annotations

import builtins
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from memories.long_term.collection import rules
from memories.long_term.collection.rows import memory_id as id_of
from memories.stores.documents import ProfileChange
from memories.stores.vector.records import SearchResult

if TYPE_CHECKING:
    from memories.long_term.collection.memory import CollectionMemory


def exported(memory: CollectionMemory) -> builtins.list[SearchResult]:
    """:meth:`CollectionMemory.export_documents`: every memory with its versions."""
    by_key: dict[str, builtins.list[ProfileChange]] = {}
    for key, change in memory._store.key_changes(memory.namespace, memory.rows.prefix):
        by_key.setdefault(key, []).append(change)
    exported = []
    for key, changes in by_key.items():
        versions = [
            {
                "version": c.version,
                "kind": c.kind,
                "content": (c.document or {}).get("content"),
                "metadata": (c.document or {}).get("metadata") or {},
                "at": c.created_at,
            }
            for c in changes
        ]
        last = next((v["content"] for v in reversed(versions) if v["content"] is not None), "")
        text = rules.text(last)
        exported.append(SearchResult(text, {"versions": versions}, 0.0, id_of(key)))
    return exported


def imported(
    memory: CollectionMemory,
    ids: Sequence[str],
    texts: Sequence[str],
    metadatas: Sequence[Mapping[str, Any]],
) -> None:
    """:meth:`CollectionMemory.import_documents`: every line checked, then replayed."""
    plans = []
    for memory_id, text, metadata in zip(ids, texts, metadatas, strict=True):
        versions = metadata.get("versions")
        if not isinstance(versions, builtins.list) or not versions:
            versions = [{"content": text, "metadata": {}}]  # a plain document: one version
        for version in versions:
            if version.get("content") is not None:
                memory.check_content(version["content"])
                memory._checked_metadata(version.get("metadata") or {})
        plans.append((rules.checked_id(memory_id), versions))
    for memory_id, versions in plans:
        held = [v.content for v in memory.history(memory_id)]
        wanted = [v.get("content") for v in versions]
        if held[-len(wanted) :] == wanted:
            continue
        for version in versions:
            if version.get("content") is None:
                if memory.get(memory_id) is not None:
                    memory.delete(memory_id)
            else:
                memory.put(
                    version["content"],
                    metadata=version.get("metadata") or {},
                    memory_id=memory_id,
                )
