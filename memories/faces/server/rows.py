"""What the inspector's pages show of each record: JSON-ready rows, times as ISO strings.

Pure functions from the stores' records (collection items, entities and
relations, a document's changes, a log's entries, search hits) to the plain
dicts that :class:`~memories.faces.server.service.Inspector` answers with.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from langchain_core.messages import BaseMessage

from memories.faces.server.errors import NotFound
from memories.kernel.messages import message_text
from memories.kernel.namespaces import Namespace
from memories.kernel.times import utc
from memories.long_term.collection import rules
from memories.long_term.collection.rows import memory_id
from memories.long_term.entity_graph import Entity, EntityMemory, Relation
from memories.stores.entities.temporal_graph import ENTITY_PREFIX, Graph
from memories.stores.history.records import Edit, Entry
from memories.stores.sql import redacted


def jsonable(value: Any) -> Any:
    """``value`` as JSON-ready data: records as dicts, times as ISO strings, messages typed."""
    if isinstance(value, BaseMessage):
        return {"type": value.type, "text": message_text(value), "id": value.id}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, datetime):
        return value.isoformat(timespec="seconds")
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [jsonable(v) for v in value]
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    return str(value)


def when(seconds: float | None) -> str | None:
    """A Unix time as an ISO string (UTC), for people and scripts alike."""
    if seconds is None:
        return None
    return utc(seconds).isoformat(timespec="seconds")


def page_of(number: int, size: int, total: int) -> dict[str, Any]:
    return {"page": number, "size": size, "total": total, "pages": max(1, -(-total // size))}


def public_metadata(metadata: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in metadata.items() if k not in ("namespace", "content_json")}


def document_row(record: Any) -> dict[str, Any]:
    """A vector or example document: its id, text, own metadata and time."""
    return {
        "id": record.id,
        "text": record.text,
        "metadata": jsonable(public_metadata(record.metadata)),
        "at": when(record.metadata.get("timestamp")),
    }


def collection_item(item: Any) -> dict[str, Any]:
    value = item.value or {}
    return {
        "id": memory_id(item.key),
        "content": rules.text(value.get("content")),
        "metadata": jsonable(value.get("metadata") or {}),
        "version": item.version,
        "created_at": when(item.created_at),
        "updated_at": when(item.updated_at),
    }


def entity_row(entity: Entity, graph: Graph) -> dict[str, Any]:
    row = {
        "id": entity.id,
        "name": entity.name,
        "type": entity.type,
        "summary": entity.summary,
        "aliases": list(entity.aliases),
        "version": entity.version,
        "created_at": jsonable(entity.created_at),
        "updated_at": jsonable(entity.updated_at),
    }
    if entity.merged_into is not None:
        into = graph.entities.get(graph.canonical(entity.merged_into))
        row["merged_into"] = {"id": entity.merged_into, "name": into.name if into else None}
        row["merge_reason"] = entity.merge_reason
    return row


def relation_row(relation: Relation) -> dict[str, Any]:
    return {**jsonable(relation), "text": relation.text()}


def graph_rows(graph: Graph) -> dict[str, Any]:
    """An entity graph as the inspector shows it: what stands now, what ended, the merges."""
    entities = sorted(graph.entities.values(), key=lambda e: (e.name.lower(), e.id))
    relations = sorted(graph.relations.values(), key=lambda r: (r.valid_at, r.text()))
    return {
        "entities": [entity_row(e, graph) for e in entities if e.merged_into is None],
        "relations": [relation_row(r) for r in relations if r.invalid_at is None],
        "ended": [relation_row(r) for r in relations if r.invalid_at is not None],
        "merges": [entity_row(e, graph) for e in entities if e.merged_into is not None],
    }


def entity_page(leaf: EntityMemory, namespace: Namespace, entity_id: str) -> dict[str, Any]:
    """One entity: as it stands, every version with its turns, every relation it is part of."""
    graph = leaf.store.recorded(namespace)
    entity = graph.entities.get(entity_id) or graph.former.get(entity_id)
    if entity is None:
        raise NotFound(f"No entity {entity_id!r} in {leaf.config_type!r} of {namespace!r}.")
    standing = graph.canonical(entity_id)
    relations = sorted(
        (r for r in graph.relations.values() if standing in (r.subject_id, r.object_id)),
        key=lambda r: (r.valid_at, r.text()),
    )
    changes = leaf.ledger.changes(namespace, ENTITY_PREFIX + entity_id)
    return {
        "id": entity_id,
        "entity": entity_row(entity, graph),
        "cleared": entity_id in graph.former,
        "versions": [
            {**change_row(c), "document": jsonable(c.document)}
            for c in reversed(changes)
            if c.version is not None
        ],
        "relations": [relation_row(r) for r in relations],
        "merged_here": [
            entity_row(e, graph)
            for e in sorted(graph.entities.values(), key=lambda e: e.name.lower())
            if e.merged_into is not None and graph.canonical(e.id) == entity_id
        ],
    }


def change_row(change: Any, *, whole: bool = False) -> dict[str, Any]:
    row = {
        "id": str(change.id),
        "version": change.version,
        "kind": change.kind,
        "ok": change.ok,
        "at": when(change.created_at),
        "patch": jsonable(change.patch),
        "turns": jsonable(change.turns),
        "error": change.error,
        "raw": list(change.raw),
    }
    if whole:
        row["document"] = jsonable(change.document)
        revision = change.document.get("revision") if isinstance(change.document, dict) else None
        if isinstance(revision, dict) and isinstance(revision.get("diffs"), dict):
            row["diff"] = diffs_of(revision["diffs"])  # an instructions memory's change
    return row


def store_label(store: Any) -> str:
    """Where a history or a store keeps its data, for people: its kind, file (or redacted URL)
    and session, rather than its Python repr."""
    path, url = getattr(store, "path", None), getattr(store, "url", None)
    where = str(path) if path else redacted(url) if isinstance(url, str) else None
    if where is None:
        return repr(store)
    session = getattr(store, "session_id", None)
    return f"{type(store).__name__} · {where}" + (f" · session {session}" if session else "")


def diff_lines(diff: str) -> list[dict[str, str]]:
    """A unified diff as lines to show, each with its kind: removed, added, hunk or context."""
    kinds = (("---", "file"), ("+++", "file"), ("@@", "hunk"), ("-", "removed"), ("+", "added"))
    return [
        {"kind": next((k for mark, k in kinds if line.startswith(mark)), "context"), "text": line}
        for line in diff.splitlines()
    ]


def diffs_of(diffs: Mapping[str, str]) -> list[dict[str, Any]]:
    """Each changed prompt's diff, as :func:`diff_lines` gives it."""
    return [{"prompt": name, "lines": diff_lines(text)} for name, text in diffs.items()]


def instructions_id(index: int, version: int | None) -> str:
    """The id an instructions memory's history entry goes by: its version, or ``failed-<index>``."""
    return str(version) if version is not None else f"failed-{index}"


def instructions_row(index: int, version: Any) -> dict[str, Any]:
    """One entry of an instructions memory's history: its time in ISO, its diffs as lines."""
    return {
        "id": instructions_id(index, version.version),
        **jsonable(version),
        "created_at": when(version.created_at),
        "diff": diffs_of(version.diffs),
    }


def transcript(records: Sequence[Entry | Edit]) -> list[dict[str, Any]]:
    """The log as written: each message with what later edits did to it, and each edit."""
    fate: dict[int, str] = {}
    for record in records:
        if isinstance(record, Edit):
            if record.through:
                for other in records:
                    if isinstance(other, Entry) and other.seq <= record.target:
                        fate.setdefault(other.seq, "removed")
            else:
                fate[record.target] = "removed" if record.message is None else "replaced"
    return [
        {
            "seq": record.seq,
            "record": "message",
            "state": fate.get(record.seq, "shown"),
            "message": jsonable(record.message),
        }
        if isinstance(record, Entry)
        else {
            "seq": record.seq,
            "record": record.kind,
            "target": record.target,
            "message": jsonable(record.message),
        }
        for record in records
    ]


def hit_row(hit: Any) -> dict[str, Any]:
    text = getattr(hit, "text", None)
    score = getattr(hit, "score", None)
    parts = getattr(hit, "ranking", None)
    return {
        "id": hit.id,
        "text": rules.text(getattr(hit, "content", None)) if text is None else text,
        "score": None if score is None else round(float(score), 4),
        "ranking": None if parts is None else {k: round(v, 4) for k, v in parts._asdict().items()},
    }
