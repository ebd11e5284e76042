"""The collection's rules that need no I/O: ids, texts, times, filters, versions, results."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from memories.errors import InvalidInputError
from memories.kernel.times import aware, utc
from memories.long_term.collection.records import MemoryRecord, MemoryVersion
from memories.long_term.collection.rows import memory_id
from memories.stores.documents import ProfileChange, ProfileItem
from memories.stores.vector.filters import NAMESPACE_KEY
from memories.stores.vector.records import SearchResult

#: Index metadata the memory keeps for itself.
OWN_KEYS = frozenset({"created_at", "updated_at", "version", "content_json"})


def version(result: SearchResult) -> int:
    """A memory's version as the index holds it (the ledger's compare-and-set checks it)."""
    return int(result.metadata.get("version") or 1)


def timestamp(when: Any) -> float:
    return aware(when).timestamp()


def checked_id(memory_id: Any) -> str:
    if not isinstance(memory_id, str) or not re.fullmatch(r"[0-9A-Za-z_-]{1,64}", memory_id):
        raise InvalidInputError(
            f"A memory id is the string put() returned (letters, digits, - or _); got "
            f"{memory_id!r:.80}."
        )
    return memory_id


def missing(memory_id: str, namespace: tuple[str, ...]) -> str:
    return f"No memory {memory_id!r} in namespace {namespace!r}; list() or search() give the ids."


def equality(where: Mapping[str, Any] | None) -> dict[str, Any]:
    if where is None:
        return {}
    if not isinstance(where, Mapping) or any(
        not isinstance(k, str) or k.startswith("$") or isinstance(v, Mapping)
        for k, v in where.items()
    ):
        raise InvalidInputError(
            f"This filter must be {{'key': value}} equalities, got {where!r:.80}."
        )
    return dict(where)


def matches(metadata: Mapping[str, Any], wanted: Mapping[str, Any]) -> bool:
    return all(metadata.get(k) == v for k, v in wanted.items())


def text(content: Any) -> str:
    """A memory's content as text (embedded, matched, shown): a string as it is, else JSON."""
    if isinstance(content, str):
        return content
    return json.dumps(content, ensure_ascii=False, sort_keys=True)


def normal(text: str) -> str:
    """Text as compared for exact duplicates: case, spacing and punctuation ignored."""
    return " ".join(re.sub(r"[^\w\s]", " ", text.casefold()).split())


def words(text: str) -> set[str]:
    return set(normal(text).split())


def with_score(record: MemoryRecord, score: float) -> MemoryRecord:
    return replace(record, score=score)


def versions(changes: Sequence[ProfileChange]) -> list[MemoryVersion]:
    """Each change as a version, valid until the next one."""
    return [
        MemoryVersion(
            version=change.version or 0,
            kind=change.kind,
            content=(change.document or {}).get("content"),
            metadata=dict((change.document or {}).get("metadata") or {}),
            valid_from=utc(change.created_at),
            invalid_at=None if after is None else utc(after.created_at),
            turns=change.turns,
        )
        for change, after in zip(changes, [*changes[1:], None], strict=False)
    ]


def current_at(changes: Sequence[tuple[str, ProfileChange]], when: float) -> list[MemoryRecord]:
    """The memories as they stood at ``when``, from every change of the namespace's memories."""
    by_key: dict[str, list[ProfileChange]] = {}
    for key, change in changes:
        by_key.setdefault(key, []).append(change)
    records = []
    for key, history in by_key.items():
        before = [c for c in history if c.created_at <= when]
        if not before or before[-1].document is None:
            continue
        last, document = before[-1], before[-1].document
        later = [c for c in history if c.created_at > when]
        records.append(
            MemoryRecord(
                id=memory_id(key),
                content=document.get("content"),
                metadata=dict(document.get("metadata") or {}),
                created_at=utc(history[0].created_at),
                updated_at=utc(last.created_at),
                invalid_at=utc(later[0].created_at) if later else None,
                version=last.version or 0,
            )
        )
    return records


def record(item: ProfileItem) -> MemoryRecord:
    """A memory as the ledger holds it."""
    value = item.value or {}
    return MemoryRecord(
        id=memory_id(item.key),
        content=value.get("content"),
        metadata=dict(value.get("metadata") or {}),
        created_at=utc(item.created_at),
        updated_at=utc(item.updated_at),
        version=item.version,
    )


def found(result: SearchResult) -> MemoryRecord:
    """A memory as the index found it (its own keys taken out of its metadata)."""
    meta = dict(result.metadata)
    content = json.loads(meta["content_json"]) if "content_json" in meta else result.text
    own = {k: meta.pop(k, None) for k in (*OWN_KEYS, NAMESPACE_KEY)}
    for key in ("session", "timestamp"):
        meta.pop(key, None)
    return MemoryRecord(
        id=result.id,
        content=content,
        metadata=meta,
        created_at=utc(float(own["created_at"] or 0)),
        updated_at=utc(float(own["updated_at"] or 0)),
        version=int(own["version"] or 1),
        score=result.score,
        ranking=result.ranking,
    )
