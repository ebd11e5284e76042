"""``memories export`` and ``memories import``: a config's data as JSON Lines, and back."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import groupby
from pathlib import Path
from typing import Any, Literal, TextIO

from langchain_core.messages import BaseMessage, message_to_dict, messages_from_dict

from memories.core.langchain import LangChainBaseMemory
from memories.core.members import distinct_histories, searchable_memories
from memories.errors import ConfigError, InvalidInputError
from memories.faces.commands.opening import (
    HISTORY_HINT,
    entities_of,
    graphs_of,
    knowledge_of,
    leaf_memories,
    open_stores,
    outliving,
    per_namespace,
    triples_of,
)
from memories.kernel.bounded_json import read_json
from memories.kernel.capabilities import capabilities_of
from memories.kernel.checks import positive_number, whole_number
from memories.kernel.messages import check_storable, dump_message
from memories.kernel.namespaces import as_namespace
from memories.long_term.entity_graph import EntityMemory
from memories.long_term.entity_graph.exchange import check_record
from memories.stores.entities.summaries import EntityStore
from memories.stores.entities.triples import EntityGraph, KnowledgeTriple
from memories.stores.history.base import ChatHistory
from memories.stores.vector.filters import check_metadata

logger = logging.getLogger(__name__)

#: Messages appended per transaction by ``import``.
DEFAULT_BATCH_SIZE = 500


@dataclass(frozen=True)
class ExportLine:
    """One line of an export: a message of a session."""

    session_id: str
    """The session the message belongs to."""
    message: BaseMessage
    """The message, with tool calls, ids and metadata."""
    seq: int | None = None
    """Its position in the exported log (informational: import appends anew)."""

    def to_json(self) -> str:
        """The JSON Lines form: ``{"session_id", "seq", "message": {"type", "data"}}``."""
        record = {"session_id": self.session_id, "seq": self.seq}
        return json.dumps({**record, "message": message_to_dict(self.message)}, ensure_ascii=False)


@dataclass(frozen=True)
class DocumentLine:
    """One line of an export: a document of a vector memory's namespace."""

    namespace: tuple[str, ...]
    """The namespace the document belongs to."""
    id: str
    """Its id (import keeps it, so importing twice replaces instead of duplicating)."""
    text: str
    """The stored text."""
    metadata: dict[str, Any]
    """Its metadata (session, turn, timestamp, speakers, the caller's own keys)."""
    expiry: tuple[float, float] | Literal["default"] | None = "default"
    """``(ttl_minutes, expires_at)`` as stored; None: never expires; ``"default"``: config's."""

    def to_json(self) -> str:
        """The JSON Lines form: ``{"namespace", "id", "text", "metadata", "expiry"}``."""
        record: dict[str, Any] = {"namespace": list(self.namespace), "id": self.id}
        record |= {"text": self.text, "metadata": self.metadata, "expiry": self.expiry}
        return json.dumps(record, ensure_ascii=False)


@dataclass(frozen=True)
class EntityLine:
    """One line of an export: an entity's current summary in a session's entity store."""

    session_id: str
    """The session the entity store keeps."""
    entity: str
    """The entity's name."""
    summary: str
    """Its summary."""

    def to_json(self) -> str:
        """The JSON Lines form: ``{"session_id", "entity", "summary"}``."""
        record = {"session_id": self.session_id, "entity": self.entity, "summary": self.summary}
        return json.dumps(record, ensure_ascii=False)


@dataclass(frozen=True)
class TripleLine:
    """One line of an export: a (subject, predicate, object) triple of a session's graph."""

    session_id: str
    """The session the graph keeps."""
    triple: KnowledgeTriple
    """The triple."""

    def to_json(self) -> str:
        """The JSON Lines form: ``{"session_id", "triple": [subject, predicate, object]}``."""
        return json.dumps(
            {"session_id": self.session_id, "triple": list(self.triple)}, ensure_ascii=False
        )


@dataclass(frozen=True)
class GraphLine:
    """One line of an export: an entity or a relation of an entity graph's namespace."""

    namespace: tuple[str, ...]
    """The namespace the graph belongs to."""
    record: dict[str, Any]
    """The record (:meth:`~memories.EntityMemory.export_records`): ``graph`` is ``entity``
    or ``relation``, ``id`` its id (import keeps it)."""

    def to_json(self) -> str:
        """The JSON Lines form: ``{"namespace", "graph", "id", ...the record}``."""
        return json.dumps({"namespace": list(self.namespace), **self.record}, ensure_ascii=False)


Line = ExportLine | DocumentLine | EntityLine | TripleLine | GraphLine


def _stored(memory: LangChainBaseMemory, command: str) -> tuple[list[ChatHistory], list[Any]]:
    """The persistent histories and vector memories in a memory, for export and import.

    Raises:
        ConfigError: it has neither, or keeps them only in this process.
    """
    histories = distinct_histories(memory)
    vectors = searchable_memories(memory)
    stores = [*histories, *vectors]
    what = "message histories, vector memories and entity graphs"
    hint = HISTORY_HINT + " Or use a persistent vector memory."
    outliving(memory, command, what, [*stores, *graphs_of(memory)], stores, hint)
    return histories, vectors


def stores_of(
    config: str | Path | dict[str, Any],
    session: str | None,
    namespace: str | tuple[str, ...] | None,
    command: str,
) -> tuple[list[ChatHistory], list[Any]]:
    """The persistent histories and vector memories of a config, on a session and namespace.

    As :func:`~memories.faces.commands.opening.open_stores` opens them: each document is
    imported into the namespace its line names.
    """
    return _stored(open_stores(config, session, namespace), command)


def export_jsonl(
    memory: LangChainBaseMemory, out: TextIO, *, sessions: bool = True, namespaces: bool = True
) -> tuple[int, int]:
    """Write what a memory keeps per session (``sessions``) and per namespace as JSON Lines.

    Returns:
        How many messages, and how many other lines (documents, entities, triples, graphs).
    """
    histories, vectors = _stored(memory, "export")
    messages = documents = 0
    for graph in graphs_of(memory) if namespaces else []:
        records = graph.export_records()
        out.writelines(GraphLine(graph.namespace, r).to_json() + "\n" for r in records)
        documents += len(records)
    for session_id, store in knowledge_of(memory) if sessions else []:
        if isinstance(store, EntityStore):
            lines: list[Line] = [
                EntityLine(session_id, name, summary)
                for name, summary in entities_of(store).items()
            ]
        else:
            lines = [TripleLine(session_id, triple) for triple in triples_of(store)]
        out.writelines(line.to_json() + "\n" for line in lines)
        documents += len(lines)
    for history in histories if sessions else []:
        for entry in history.entries():
            out.write(ExportLine(history.session_id, entry.message, entry.seq).to_json() + "\n")
            messages += 1
    for vector in vectors if namespaces else []:
        for record in vector.export_documents():
            metadata = {k: v for k, v in record.metadata.items() if k != "namespace"}
            expiry = vector.expiry.rule_of(vector.namespace, vector.expiry_mark + record.id)
            line = DocumentLine(vector.namespace, record.id, record.text, metadata, expiry)
            out.write(line.to_json() + "\n")
            documents += 1
    return messages, documents


def export_config(
    config: str | Path | dict[str, Any],
    out: TextIO,
    *,
    session: str | None = None,
    namespace: str | tuple[str, ...] | None = None,
) -> tuple[int, int]:
    """:func:`export_jsonl` of a config: a templated one's every namespace, its sessions once.

    Returns:
        How many messages, and how many other lines.
    """
    messages, documents = export_jsonl(open_stores(config, session), out, namespaces=False)
    left_out: set[str] = set()
    for memory in per_namespace(config, session, namespace):
        documents += export_jsonl(memory, out, sessions=False)[1]
        kept = [m for m in leaf_memories(memory) if capabilities_of(m).scope != "none"]
        left_out.update(type(m).__name__ for m in kept if not capabilities_of(m).exportable)
    if left_out:
        logger.warning(
            "memories export leaves out %s (not exportable; `memories inspect` shows them).",
            ", ".join(sorted(left_out)),
        )
    return messages, documents


def read_jsonl(
    lines: Iterable[str],
    *,
    source: str,
    session: str | None = None,
    namespace: tuple[str, ...] | None = None,
) -> list[Line]:
    """Parse an export, checking every line before anything is written.

    Args:
        source: the file's name, for error messages.
        session: put every message in this session instead of the line's own.
        namespace: put every document in this namespace instead of the line's own.

    Raises:
        InvalidInputError: a line is not a line of an export (the message names it).
    """
    parsed: list[Line] = []
    number = 0
    try:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                record = read_json(line, what="the line", max_nesting=sys.getrecursionlimit())
                parsed.append(_parse_line(record, session, namespace))
            except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
                raise InvalidInputError(
                    f"{source}:{number}: not a line of a `memories export` file ({exc}). Each "
                    'line must be {"session_id": ..., "message": {"type": ..., "data": ...}} or '
                    '{"namespace": [...], "id": ..., "text": ..., "metadata": {...}}. '
                    "Nothing was imported."
                ) from exc
    except UnicodeDecodeError as exc:
        raise InvalidInputError(
            f"{source}: not UTF-8 text ({exc.reason}, after line {number}). Nothing was imported."
        ) from exc
    return parsed


def _parse_line(record: Any, session: str | None, namespace: tuple[str, ...] | None) -> Line:
    if not isinstance(record, dict):
        raise TypeError(f"a line must be a JSON object, got {type(record).__name__}")
    if "message" in record:
        message = messages_from_dict([record["message"]])[0]
        dump_message(check_storable([message])[0])  # what the history will write, checked now
        return ExportLine(_session_of(record, session), message, record.get("seq"))
    if "entity" in record or "triple" in record:
        return _parse_knowledge(record, session)
    labels = namespace or as_namespace(record["namespace"])
    if "graph" in record:
        graph_record = {k: v for k, v in record.items() if k != "namespace"}
        return GraphLine(labels, check_record(graph_record))
    text, doc_id, metadata = record["text"], record["id"], record.get("metadata") or {}
    if not isinstance(text, str) or not isinstance(doc_id, str) or not doc_id:
        raise ValueError("text must be a string and id a non-empty string")
    found = metadata.get("versions") if isinstance(metadata, dict) else None  # a collection's
    for given in [v.get("metadata") for v in found] if isinstance(found, list) else [metadata]:
        check_metadata(given)  # what the memory will check when it writes, checked now
    expiry = record.get("expiry", "default")  # [ttl_minutes, expires_at]; null: it never expires
    if expiry not in ("default", None):
        if not isinstance(expiry, list) or len(expiry) != 2:
            raise ValueError(
                f"expiry must be [ttl_minutes, expires_at] or null, got {expiry!r:.80}"
            )
        expiry = tuple(positive_number(n, "expiry's ttl_minutes and expires_at") for n in expiry)
    return DocumentLine(labels, doc_id, text, metadata, expiry)


def _session_of(record: dict[str, Any], session: str | None) -> str:
    """The session a line goes to: ``session`` when given, else the line's own."""
    session_id = session or record["session_id"]
    if not isinstance(session_id, str) or not session_id:
        raise ValueError(f"session_id must be a non-empty string, got {session_id!r}")
    return session_id


def _parse_knowledge(record: dict[str, Any], session: str | None) -> EntityLine | TripleLine:
    session_id = _session_of(record, session)
    if "entity" in record:
        entity, summary = record["entity"], record["summary"]
        if not isinstance(entity, str) or not entity or not isinstance(summary, str):
            raise ValueError("entity must be a non-empty string and summary a string")
        return EntityLine(session_id, entity, summary)
    triple = record["triple"]
    if not isinstance(triple, list) or len(triple) != 3:
        raise ValueError(f"triple must be [subject, predicate, object], got {triple!r:.80}")
    if not all(isinstance(part, str) and part for part in triple):
        raise ValueError(f"a triple's parts must be non-empty strings, got {triple!r:.80}")
    return TripleLine(session_id, KnowledgeTriple(*triple))


def _target(line: Line) -> tuple[type, Any]:
    """A line's kind, and the session or namespace whose store takes it."""
    if isinstance(line, DocumentLine | GraphLine):
        return type(line), line.namespace
    return type(line), line.session_id


#: What holds each kind of line, as the import's errors name it.
_HOLDERS = {
    ExportLine: ("messages", "history"),
    DocumentLine: ("documents", "vector memory"),
    EntityLine: ("entity summaries", "entity store that outlives the process"),
    TripleLine: ("knowledge triples", "knowledge graph that outlives the process"),
    GraphLine: ("entities and relations", "entity graph (type: entity)"),
}
#: The kind of knowledge store that takes an entity's or a triple's line.
_KNOWLEDGE: dict[type, type] = {EntityLine: EntityStore, TripleLine: EntityGraph}


def _batches(lines: list[Line], size: int) -> Iterator[list[Line]]:
    """Consecutive lines of one session (or one namespace), at most ``size`` at a time.

    An entity graph's lines are one batch (one transaction): its relations name its entities.
    """
    for _, group in groupby(lines, _target):
        run = list(group)
        most = len(run) if isinstance(run[0], GraphLine) else size
        for start in range(0, len(run), most):
            yield run[start : start + most]


def import_jsonl(
    lines: list[Line],
    histories_for: Callable[[str], list[ChatHistory]],
    vectors_for: Callable[[tuple[str, ...]], list[Any]] | None = None,
    knowledge_for: Callable[[str], list[EntityStore | EntityGraph]] | None = None,
    graphs_for: Callable[[tuple[str, ...]], list[EntityMemory]] | None = None,
    *,
    batch_size: int = DEFAULT_BATCH_SIZE,
    progress: bool | None = None,
) -> int:
    """Append each line to its session's or namespace's store, in batches; how many were written.

    Idempotent: what a store holds already is skipped (a session's run of messages, a
    summary, a triple, a graph's record by id), a document is replaced by id, and an
    import that stopped half-way is finished (:func:`_held`).

    Args:
        lines: from :func:`read_jsonl`.
        histories_for: the histories of a session (from the config).
        vectors_for: the vector memories of a namespace (from the config).
        knowledge_for: the entity stores and graphs of a session (from the config).
        graphs_for: the entity graph memories of a namespace (from the config).
        batch_size: lines per write.
        progress: show a progress bar on stderr; None shows it on a terminal.

    Raises:
        ConfigError: a line has no store to take it (checked before any write).
    """
    from tqdm import tqdm

    whole_number(batch_size, "batch_size", least=1)
    finders: dict[type, Callable[[Any], list[Any]] | None] = {
        ExportLine: histories_for,
        DocumentLine: vectors_for,
        EntityLine: knowledge_for,
        TripleLine: knowledge_for,
        GraphLine: graphs_for,
    }
    targets: dict[tuple[type, Any], list[Any]] = {}
    for line in lines:
        kind, where = target = _target(line)
        if target in targets:
            continue
        find, holds = finders[kind], _KNOWLEDGE.get(kind, object)
        targets[target] = [s for s in (find(where) if find else []) if isinstance(s, holds)]
        if not targets[target]:
            what, holder = _HOLDERS[kind]
            scope = "namespace" if isinstance(where, tuple) else "session"
            raise ConfigError(
                f"The file holds {what} (for {scope} {where!r}) and the config's "
                f"memory has no {holder} to take them. Nothing was imported."
            )
    disable = None if progress is None else not progress  # None: only on a terminal
    skip = _already_there(lines, targets)
    written, expired = 0, set[int]()
    with tqdm(total=len(lines), unit="line", desc="import", disable=disable) as bar:
        for batch in _batches(lines, batch_size):
            for store in targets[_target(batch[0])]:
                if isinstance(store, ChatHistory):
                    held, found = skip[id(store)], (m for m in batch if isinstance(m, ExportLine))
                    new = [line.message for line in found if id(line) not in held]
                    store.append(new)
                    written += len(new)
                elif isinstance(store, EntityStore | EntityGraph):
                    written += _import_knowledge(store, batch)
                elif isinstance(store, EntityMemory):
                    written += store.import_records(
                        [line.record for line in batch if isinstance(line, GraphLine)]
                    )
                else:
                    written += _import_documents(store, batch, expired)
            bar.update(len(batch))
    if expired:
        logger.warning("memories import leaves out %d expired documents.", len(expired))
    return written


def _import_documents(store: Any, batch: list[Line], expired: set[int]) -> int:
    """Write a batch's documents with the time to live each was exported with, but those expired
    (their lines' ``id`` into ``expired``); one held with none keeps none (it never expires)."""
    now, mark, ns = store.clock(), store.expiry_mark, store.namespace
    documents = [d for d in batch if isinstance(d, DocumentLine)]
    expired.update(id(d) for d in documents if isinstance(d.expiry, tuple) and d.expiry[1] <= now)
    documents = [d for d in documents if id(d) not in expired]
    ids = [d.id for d in documents]
    permanent = {r.id for r in store.backend.get(ids) if not store.expiry.rule_of(ns, mark + r.id)}
    store.import_documents(ids, [d.text for d in documents], [d.metadata for d in documents])
    for d in documents:
        if d.expiry != "default" and d.id not in permanent:
            store.expiry.restore(ns, mark + d.id, d.expiry)
    return len(documents)


def _import_knowledge(store: EntityStore | EntityGraph, batch: list[Line]) -> int:
    """Write a batch's summaries or triples that ``store`` lacks, in one transaction."""
    if isinstance(store, EntityStore):
        current = entities_of(store)
        entities = [line for line in batch if isinstance(line, EntityLine)]
        new = {e.entity: e.summary for e in entities if current.get(e.entity) != e.summary}
        store.set_many(new)
        return len(new)
    held = set(triples_of(store))
    found = (line.triple for line in batch if isinstance(line, TripleLine))
    triples = list(dict.fromkeys(triple for triple in found if triple not in held))
    store.add_triples(triples)
    return len(triples)


def _already_there(
    lines: list[Line], targets: dict[tuple[type, Any], list[Any]]
) -> dict[int, set[int]]:
    """For each history (by ``id``), the lines (by ``id``) its session's log already holds."""
    skip: dict[int, set[int]] = {}
    for target, stores in targets.items():
        incoming = [
            line for line in lines if isinstance(line, ExportLine) and _target(line) == target
        ]
        for store in stores:
            if isinstance(store, ChatHistory):
                log = [message_to_dict(e.message) for e in store.entries()]
                held = _held(log, [message_to_dict(line.message) for line in incoming])
                skip[id(store)] = {id(line) for line in incoming[:held]}
    return skip


def _held(log: list[dict[str, Any]], incoming: list[dict[str, Any]]) -> int:
    """How many leading ``incoming`` messages ``log`` already holds: all of them as a run, or
    the beginning of them the log ends with (an import that stopped half-way)."""
    found = 0
    for start, message in enumerate(log):
        if not incoming or message != incoming[0]:
            continue
        run = 0
        while run < len(incoming) and start + run < len(log) and log[start + run] == incoming[run]:
            run += 1
        if run == len(incoming):
            return run
        if start + run == len(log):
            found = max(found, run)
    return found
