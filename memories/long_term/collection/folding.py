"""How a collection folds queued turns in: a model's (or the offline rules') operations,
deduplicated, committed to the ledger all or none, redone on a conflict.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from memories.kernel.conversation import bind_reply_tool, conversing
from memories.kernel.embeddings import cosine, query_vector
from memories.kernel.messages import message_text
from memories.kernel.steps import Steps, step
from memories.long_term.collection import rules
from memories.long_term.collection.extraction import (
    OPERATIONS_TOOL,
    OPERATIONS_TOOL_NAME,
    ExtractionSession,
    Operation,
    OpKind,
    extraction_prompt,
)
from memories.long_term.collection.offline import offline_operations
from memories.long_term.collection.rows import lining_up
from memories.long_term.stored import MAX_CONFLICTS, batches_until
from memories.stores.documents import (
    Change,
    PendingTurn,
)
from memories.stores.vector.backend import VectorQuery
from memories.stores.vector.records import SearchResult

if TYPE_CHECKING:
    from memories.long_term.collection.memory import CollectionMemory


@dataclass(frozen=True)
class CollectionUpdate:
    """What :meth:`CollectionMemory.refresh` did."""

    status: Literal["updated", "unchanged", "failed", "idle"]
    """``updated``: memories changed; ``unchanged``: the turns changed nothing;
    ``failed``: recorded in ``status()``, the turns kept; ``idle``: nothing queued."""
    turns: int = 0
    """How many queued turns were folded in."""
    inserted: int = 0
    updated: int = 0
    deleted: int = 0
    error: str | None = None
    """Why it failed."""


def refreshing(memory: CollectionMemory) -> Steps[CollectionUpdate]:
    """Fold every queued turn in, batch by batch; stop at the first failed batch."""
    yield from lining_up(memory)
    return (yield from batches_until(lambda: folding_batch(memory), CollectionUpdate("idle")))


def allowed(memory: CollectionMemory) -> list[OpKind]:
    flags: list[tuple[OpKind, bool]] = [
        ("insert", memory.enable_inserts),
        ("update", memory.enable_updates),
        ("delete", memory.enable_deletes),
    ]
    return [op for op, on in flags if on]


def folding_batch(memory: CollectionMemory) -> Steps[CollectionUpdate]:
    """One model call's worth of queued turns, redone when another writer got in first."""
    for _ in range(MAX_CONFLICTS):
        turns = yield step(
            memory._store.pending, memory.namespace, memory.key, limit=memory.max_turns_per_update
        )
        if not turns:
            return CollectionUpdate("idle")
        text = "\n".join(message_text(m) for t in turns for m in t.messages)
        shown = yield step(memory.backend.search, VectorQuery(text, memory.related_k, None))
        if memory._caller is None:  # rules: statements kept, corrections update
            said = [message_text(m) for t in turns for m in t.messages if m.type == "human"]
            proposed = offline_operations(said, shown, memory.check_content)
        else:
            outcome = yield from conversing(*session(memory, shown, turns))
            if outcome.error is not None:
                yield from memory._failing(turns, outcome.error, outcome.raw)
                return CollectionUpdate("failed", error=outcome.error)
            proposed = list(outcome.operations)
        versions = {r.id: rules.version(r) for r in shown}
        operations = yield from deduplicating(memory, proposed, shown, versions)
        commits = [commit_of(op, versions, turns, memory.rows.prefix) for op in operations]
        written = yield from memory._writing(commits, turns)
        if written is None:  # another writer changed one of these memories: redo
            yield from memory._reindexing([op.memory_id for op in operations if op.memory_id])
            continue
        kinds = [op.op for op in operations]
        return CollectionUpdate(
            "updated" if operations else "unchanged",
            turns=len(turns),
            inserted=kinds.count("insert"),
            updated=kinds.count("update"),
            deleted=kinds.count("delete"),
        )
    error = f"the memories changed {MAX_CONFLICTS} times during the update"
    yield from memory._failing(turns, error, [])  # its turns stay queued
    return CollectionUpdate("failed", error=error)


def session(
    memory: CollectionMemory, shown: Sequence[SearchResult], turns: Sequence[PendingTurn]
) -> tuple[ExtractionSession, Any, Any]:
    assert memory._caller is not None
    model, tools = bind_reply_tool(
        memory._caller.model, OPERATIONS_TOOL, OPERATIONS_TOOL_NAME, memory.update_method
    )
    aliases = {f"m{i + 1}": r.id for i, r in enumerate(shown)}
    rule = (
        ""
        if memory._schema is None
        else f"Each memory's content must match: {memory._schema.text()}"
    )
    opening = extraction_prompt(
        [(alias, r.text) for alias, r in zip(aliases, shown, strict=True)],
        [t.messages for t in turns],
        allowed=allowed(memory),
        content_rule=rule,
        instructions=memory.instructions,
        tools=tools,
    )
    session = ExtractionSession(
        opening, memory.max_retries, tools, aliases, allowed(memory), memory.check_content
    )
    return session, memory._caller, model


def commit_of(
    op: Operation, versions: Mapping[str, int], turns: Sequence[PendingTurn], prefix: str
) -> tuple[str, Change, int]:
    """The ledger write of one operation (keys ``prefix`` + id): its key, the change, the
    version it expects."""
    document = None if op.op == "delete" else {"content": op.content, "metadata": {}}
    change = Change(document, op.op, [], tuple(turns))
    if op.op == "insert":
        return prefix + uuid.uuid4().hex, change, 0
    assert op.memory_id is not None
    return prefix + op.memory_id, change, versions[op.memory_id]


def matching(
    memory: CollectionMemory, text: str, shown: Sequence[SearchResult]
) -> Steps[tuple[SearchResult | None, bool]]:
    """The current memory that already says ``text``, and whether ``text`` adds detail to it.

    The same text (ignoring case, spacing and punctuation), or an embedding
    at least ``duplicate_threshold`` similar; ``text`` adds detail when it
    holds every word of that memory and more.
    """
    near = yield step(memory.backend.search, VectorQuery(text, 3, None))
    candidates = {r.id: r for r in [*shown, *near]}
    normal = rules.normal(text)
    for result in candidates.values():
        if rules.normal(result.text) == normal:
            return result, False
    if not candidates:
        return None, False
    target = yield from query_vector(memory.embedder, text)
    vectors = yield step(memory.backend.vectors, list(candidates))
    scored = [(cosine(target, vector), doc_id) for doc_id, vector in vectors.items()]
    if not scored or max(scored)[0] < memory.duplicate_threshold:
        return None, False
    old = candidates[max(scored)[1]]
    return old, rules.words(old.text) < rules.words(text)


def deduplicating(
    memory: CollectionMemory,
    operations: Sequence[Operation],
    shown: Sequence[SearchResult],
    versions: dict[str, int],
) -> Steps[list[Operation]]:
    """The operations less inserts of what is remembered already (or updates adding detail).

    ``versions`` gains the version of each memory an insert turned into an update of.
    """
    kept: list[Operation] = []
    touched = {op.memory_id for op in operations if op.memory_id}
    current = {r.id: rules.normal(r.text) for r in shown}
    seen: set[str] = set()
    for op in operations:
        normal = rules.normal(rules.text(op.content)) if op.content is not None else ""
        if op.op == "update" and current.get(op.memory_id or "") == normal:
            continue  # says what it said
        if op.op != "insert":
            kept.append(op)
            continue
        if normal in seen:
            continue
        seen.add(normal)
        found, adds_detail = yield from matching(memory, rules.text(op.content), shown)
        if found is None:
            kept.append(op)
        elif adds_detail and memory.enable_updates and found.id not in touched:
            kept.append(Operation("update", op.content, found.id))
            touched.add(found.id)
            versions[found.id] = rules.version(found)
    return kept
