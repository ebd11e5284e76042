"""What the ``memories`` subcommands do, apart from argument parsing.

Each command works on a memory built from a config file. A config names the
memory's history (``history: {type: sqlite, path: chat.db, session_id: u1}``);
``--session`` moves every history of the config to another session, so one
config serves every user.
"""

from __future__ import annotations

import json
import os
import shutil
import textwrap
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from langchain_core.language_models import BaseLanguageModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    message_to_dict,
    messages_from_dict,
)

from memories.core.base import BaseMemory, ChatMemory
from memories.core.combined import leaves_of
from memories.core.config import create_memory, load_config, with_namespace, with_session
from memories.core.erasure import ErasureReport, StoreErasure, erase_user
from memories.core.langchain import LangChainBaseMemory
from memories.core.members import (
    chat_memories,
    distinct_histories,
    read_only,
    searchable_memories,
)
from memories.errors import ConfigError, InvalidInputError, LLMError
from memories.faces.exchange import DEFAULT_HEADER, save_exchange, view_memory
from memories.kernel.capabilities import capabilities_of
from memories.kernel.messages import check_storable, dump_message, message_text
from memories.kernel.namespaces import as_namespace
from memories.kernel.tokens import TiktokenCounter
from memories.long_term.entities import ConversationEntityMemory, ConversationKGMemory
from memories.long_term.entity_graph import EntityMemory
from memories.long_term.entity_graph.exchange import check_record
from memories.long_term.entity_graph.recall import entity_line, relation_line
from memories.long_term.profile import ProfileMemory
from memories.stores.entity_store import EntityStore, InMemoryEntityStore
from memories.stores.graph_store import EntityGraph, InMemoryEntityGraph, KnowledgeTriple
from memories.stores.history.base import ChatHistory
from memories.stores.history.memory import InMemoryHistory
from memories.stores.sql import redacted

if TYPE_CHECKING:
    from memories.integrations.chroma import Demotion

__all__ = [
    "DocumentLine",
    "EntityLine",
    "ExportLine",
    "GraphLine",
    "Swept",
    "TripleLine",
    "chat",
    "chat_memories",
    "clear",
    "clear_targets",
    "dead_letters",
    "erase",
    "export_jsonl",
    "flush",
    "format_usage",
    "graphs_of",
    "histories_of",
    "import_jsonl",
    "inspect",
    "knowledge_of",
    "leaf_memories",
    "open_memory",
    "read_jsonl",
    "reshard",
    "stores_of",
    "sweep",
    "usage_report",
]

#: Messages appended per transaction by ``import``.
DEFAULT_BATCH_SIZE = 500


def open_memory(
    config: str | Path | dict[str, Any],
    session: str | None = None,
    namespace: str | tuple[str, ...] | None = None,
) -> Any:
    """The memory a config describes, on ``session`` and ``namespace`` when given.

    ``namespace`` is labels joined by ``"."`` (``"users.maya"``).
    """
    options = load_config(config)
    if session:
        options = with_session(options, session)
    if namespace:
        options = with_namespace(options, namespace)
    return create_memory(options)


def leaf_memories(memory: LangChainBaseMemory) -> list[LangChainBaseMemory]:
    """The memories that hold data: ``memory``, or the members of a combined or read-only one."""
    return leaves_of(memory)


def histories_of(memory: LangChainBaseMemory, command: str) -> list[ChatHistory]:
    """The distinct persistent histories of a memory's chat memories.

    Raises:
        ConfigError: the memory keeps no messages, or keeps them only in this
            process (then a command run on its own would see nothing).
    """
    histories = distinct_histories(memory)
    if not histories:
        raise ConfigError(
            f"`memories {command}` works on message histories, and a {type(memory).__name__} "
            "keeps none. Use a config whose memory has a `history`."
        )
    if any(isinstance(h, InMemoryHistory) for h in histories):
        raise ConfigError(
            f"`memories {command}` needs a history that outlives the process; this config's "
            "history is in memory. Add e.g. `history: {type: sqlite, path: chat.db}`."
        )
    return histories


# -- chat ---------------------------------------------------------------------


def _prompt(memory: LangChainBaseMemory, text: str, system: str) -> list[BaseMessage]:
    """The model's messages for a user line: system text with the memory's, its window, the line."""
    view = view_memory(memory, text, as_messages=True)
    system_text = "\n\n".join(t for t in (system, view.system_text(DEFAULT_HEADER)) if t)
    head: list[BaseMessage] = [SystemMessage(system_text)] if system_text else []
    return [*head, *view.messages, HumanMessage(text)]


def chat(
    memory: LangChainBaseMemory,
    model: BaseLanguageModel,
    lines: Iterable[str],
    out: TextIO,
    *,
    system: str = "",
    prompt: str = "",
) -> int:
    """Chat line by line: each line is a user message; replies go to ``out``.

    Lines starting with ``/`` are commands, answered here and never sent or
    saved (:data:`CHAT_HELP`); ``//`` sends a line that starts with ``/``.
    ``/quit`` or the end of the input ends the chat. Returns the number of turns.

    Raises:
        LLMError: the model call failed.
    """
    turns = 0
    out.write(prompt)
    out.flush()
    for line in lines:
        text = line.strip()
        if text in ("/quit", "/exit"):
            break
        if text.startswith("/") and not text.startswith("//"):
            out.write(_chat_command(memory, text, system))
        elif text:
            text = text.removeprefix("/")
            messages = _prompt(memory, text, system)
            try:
                reply = model.invoke(messages)
            except Exception as exc:  # a provider's errors have no common base class
                raise LLMError(f"The model failed: {type(exc).__name__}: {exc}") from exc
            answer = reply if isinstance(reply, AIMessage) else AIMessage(str(reply))
            save_exchange(memory, [messages[-1], answer])
            out.write(f"assistant> {answer.text}\n")
            turns += 1
        out.write(prompt)
        out.flush()
    flush(memory)
    return turns


def usage_report(memory: LangChainBaseMemory) -> list[dict[str, Any]]:
    """What each memory of ``memory`` has cost in this process, as plain data for JSON.

    One entry per memory that holds data: its config type (with its data's name
    when not the default, :meth:`~memories.core.base.BaseMemory.usage_name`), the namespace it
    counts under, and its counters per kind and per namespace (see
    :meth:`~memories.core.base.BaseMemory.usage`).
    """
    return [
        {"memory": leaf.usage_name(), "namespace": leaf.usage_namespace(), **leaf.usage().as_dict()}
        for leaf in leaf_memories(memory)
        if isinstance(leaf, BaseMemory)
    ]


def format_usage(report: list[dict[str, Any]]) -> str:
    """A :func:`usage_report` as a table: one line per memory and kind of call."""
    lines = [
        f"{'memory':<22} {'kind':<10} {'calls':>6} {'failed':>6} {'retries':>7} "
        f"{'tokens in':>10} {'tokens out':>10} {'seconds':>8}"
    ]
    for entry in report:
        for kind, usage in entry["totals"].items():
            lines.append(
                f"{entry['memory']:<22} {kind:<10} {usage['calls']:>6} {usage['failures']:>6} "
                f"{usage['retries']:>7} {usage['input_tokens']:>10} {usage['output_tokens']:>10} "
                f"{usage['seconds']:>8.3f}"
            )
        if not entry["totals"]:
            lines.append(f"{entry['memory']:<22} (no calls)")
    return "\n".join(lines) + "\n"


#: What ``/help`` prints in ``memories chat``.
CHAT_HELP = """commands (never sent to the model, never saved):
  /memory   what the memory adds to the next prompt, in full
  /usage    what each memory's model calls, embeddings and store transactions cost so far
  /clear    erase this session's memory
  /help     this list
  /quit     end the chat (or Ctrl-D); //text sends a line that starts with /
"""


def _chat_command(memory: LangChainBaseMemory, command: str, system: str) -> str:
    if command == "/help":
        return CHAT_HELP
    if command == "/memory":
        messages = _prompt(memory, "", system)[:-1]
        width = max(40, shutil.get_terminal_size().columns)
        shown = [_wrapped(m, width) for m in messages]
        return "".join(shown) or "(the memory is empty)\n"
    if command == "/usage":
        return format_usage(usage_report(memory))
    if command == "/clear":
        memory.clear()
        return "(this session's memory is erased)\n"
    return f"unknown command {command.split()[0]}; /help lists the commands\n"


def _wrapped(message: BaseMessage, width: int) -> str:
    """A message in full, wrapped to ``width``, its role first."""
    lines: list[str] = []
    for number, part in enumerate(message_text(message).splitlines() or [""]):
        first = f"{message.type}: " if number == 0 else "  "
        lines += textwrap.wrap(part, width, initial_indent=first, subsequent_indent="  ") or [
            first.rstrip()
        ]
    return "\n".join(lines) + "\n"


def flush(memory: LangChainBaseMemory) -> None:
    """Finish the memory's deferred work (a background summary fold) before the process ends."""
    if isinstance(memory, BaseMemory):
        memory.flush()


# -- inspect ------------------------------------------------------------------


def _describe(message: BaseMessage, width: int = 100) -> str:
    role = message.type
    if isinstance(message, ToolMessage) and message.name:
        role = f"tool[{message.name}]"
    text = message_text(message).replace("\n", " | ")
    if len(text) > width:
        text = text[: width - 1] + "…"
    return f"{role}: {text}"


def _format_messages(messages: Iterable[BaseMessage]) -> str:
    return "".join(f"  {_describe(m)}\n" for m in messages)


def inspect(memory: LangChainBaseMemory, out: TextIO, *, last: int | None = 20) -> None:
    """Print a memory's config, its sessions' messages, its derived state and what it shows."""
    try:
        config: Any = memory.to_config() if isinstance(memory, BaseMemory) else None
    except ConfigError:
        config = None
    out.write(f"memory: {type(memory).__name__}  config: {json.dumps(config, default=str)}\n")
    histories = histories_of(memory, "inspect") if chat_memories(memory) else []
    if histories and not any(h.count() for h in histories) and not searchable_memories(memory):
        # Showing the view would save a fresh state row: inspecting never writes.
        for history in histories:
            out.write(f"\nsession {history.session_id!r} in {history!r}: no messages\n")
        return
    for history in histories:
        entries = history.entries(last=last)
        total = history.count() if last is not None else len(entries)
        out.write(f"\nsession {history.session_id!r} in {history!r}: {total} messages")
        out.write(f" (last {len(entries)} shown)\n" if len(entries) < total else "\n")
        for entry in entries:
            out.write(f"  #{entry.seq} {_describe(entry.message)}\n")
    with read_only(memory):
        # The view first: showing it brings each memory's derived state up to
        # date, in the read-only views (inspecting never writes).
        shown_messages = _prompt(memory, "", "")[:-1]
        for member in chat_memories(memory):
            state = member.chat_memory.load_state(member.state_key)
            if state is not None:
                text = json.dumps(state, ensure_ascii=False, default=str)
                shown = text if len(text) <= 400 else text[:399] + "…"
                out.write(f"\nstate of {type(member).__name__} ({member.state_key}): {shown}\n")
    for profile in leaf_memories(memory):
        if isinstance(profile, ProfileMemory):
            _inspect_profile(profile, out, last=last)
    for graph in graphs_of(memory):
        _inspect_graph(graph, out, last=last)
    for vector in searchable_memories(memory):
        _inspect_vector(vector, out, last=last)
    for session_id, store in knowledge_of(memory):
        _inspect_knowledge(session_id, store, out, last=last)
    tokens = TiktokenCounter()(shown_messages) if shown_messages else 0
    out.write(f"\nwhat the memory adds to the next prompt ({tokens} tokens):\n")
    out.write(_format_messages(shown_messages) or "  (nothing)\n")


def _inspect_profile(profile: ProfileMemory, out: TextIO, *, last: int | None) -> None:
    status = profile.status()
    where = f"{'.'.join(profile.namespace)}/{profile.key}"
    out.write(
        f"\nprofile {where} in {profile.store!r}: version {status.version}, "
        f"{status.pending} turns pending{', frozen' if status.frozen else ''}\n"
    )
    if status.last_failure is not None:
        out.write(f"  last update failed: {status.last_failure.error}\n")
    document = profile.get()
    text = json.dumps(document, ensure_ascii=False, indent=2) if document is not None else "(none)"
    out.write("".join(f"  {line}\n" for line in text.splitlines()))
    changes = profile.history()
    shown = changes if last is None else changes[-last:] if last else []
    for change in shown:
        detail = change.error if change.error else json.dumps(list(change.patch))
        out.write(f"  change #{change.id} {change.kind} v{change.version}: {detail[:100]}\n")


def graphs_of(memory: LangChainBaseMemory) -> list[EntityMemory]:
    """The entity graphs (``EntityMemory`` members) of a memory."""
    return [leaf for leaf in leaf_memories(memory) if isinstance(leaf, EntityMemory)]


def _graph_name(graph: EntityMemory) -> str:
    return f"entity graph {'.'.join(graph.namespace)} in {graph.store!r}"


def _inspect_graph(graph: EntityMemory, out: TextIO, *, last: int | None) -> None:
    entities, relations = graph.entities(), graph.relations()
    status = graph.status()
    out.write(
        f"\n{_graph_name(graph)}: {len(entities)} entities ({len(graph.merges())} merged into "
        f"others), {len(relations)} current relations, {len(graph.history())} ended, "
        f"{status.pending} turns pending\n"
    )
    if status.last_error is not None:
        out.write(f"  last update failed: {status.last_error}\n")
    lines = [entity_line(e)[2:] for e in entities] + [relation_line(r)[2:] for r in relations]
    shown = lines if last is None else lines[-last:] if last else []
    if len(shown) < len(lines):
        out.write(f"  (last {len(shown)} shown)\n")
    for line in shown:
        text = line.replace("\n", " | ")
        out.write(f"  {text[:120]}{'…' if len(text) > 120 else ''}\n")


def knowledge_of(memory: LangChainBaseMemory) -> list[tuple[str, EntityStore | EntityGraph]]:
    """The entity stores and knowledge graphs of a memory's entity and KG members, by session.

    Only those that outlive the process: an in-memory store is empty in a
    new process, so a command has nothing to read there and nowhere to write.
    """
    found: list[tuple[str, EntityStore | EntityGraph]] = []
    for leaf in leaf_memories(memory):
        if not isinstance(leaf, ConversationEntityMemory | ConversationKGMemory):
            continue
        store = leaf.knowledge_store
        if not isinstance(store, EntityStore | EntityGraph) or isinstance(
            store, InMemoryEntityStore | InMemoryEntityGraph
        ):
            continue  # in this process only, or LangChain's graph (not in a config)
        session_id = getattr(store, "session_id", None) or leaf.chat_memory.session_id
        if all(store is not seen for _, seen in found):
            found.append((session_id, store))
    return found


def _entities(store: EntityStore) -> dict[str, str]:
    try:
        return store.entities()
    except NotImplementedError as exc:
        raise ConfigError(str(exc)) from exc


def _inspect_knowledge(
    session_id: str, store: EntityStore | EntityGraph, out: TextIO, *, last: int | None
) -> None:
    if isinstance(store, EntityStore):
        items = [
            f"{name} ({len(store.history(name))} versions): {summary}"
            for name, summary in _entities(store).items()
        ]
        kind = "entities"
    else:
        items = [f"({s}, {p}, {o})" for s, o, p in store.get_triples()]
        kind = "triples"
    shown = items if last is None else items[-last:] if last else []
    out.write(
        f"\n{kind} of session {session_id!r} in {store!r}: {len(items)}"
        + (f" (last {len(shown)} shown)\n" if len(shown) < len(items) else "\n")
    )
    for item in shown:
        text = item.replace("\n", " | ")
        out.write(f"  {text[:120]}{'…' if len(text) > 120 else ''}\n")


def _documents(vector: Any) -> list[Any]:
    """Every document of a vector memory's namespace, oldest first (queued ones written first)."""
    documents: list[Any] = vector.export_documents()
    return documents


def _inspect_vector(vector: Any, out: TextIO, *, last: int | None) -> None:
    documents = _documents(vector)
    shown = documents if last is None else documents[-last:] if last else []
    out.write(
        f"\nvector namespace {'.'.join(vector.namespace)} in the {vector.store.location}: "
        f"{len(documents)} documents"
        + (f" (last {len(shown)} shown)\n" if len(shown) < len(documents) else "\n")
    )
    for record in shown:
        session = record.metadata.get("session", "?")
        text = record.text.replace("\n", " | ")
        out.write(f"  [{session}] {text[:100]}{'…' if len(text) > 100 else ''}\n")


def dead_letters(
    memory: LangChainBaseMemory, out: TextIO, *, retry: list[str] | None = None
) -> int:
    """Print the documents each vector memory's store refused and set aside; return how many.

    With ``retry``, first queue them again (an empty list: all of them) and
    write them now: one the store refuses again is set aside again.

    Raises:
        ConfigError: the memory has no vector memory, or keeps it in this
            process only (another process's letters are not there to see).
    """
    vectors = searchable_memories(memory)
    if not vectors:
        raise ConfigError(
            "`memories dead-letters` works on vector memories (vector, collection, examples), "
            f"and a {type(memory).__name__} has none."
        )
    if any(v.mode == "memory" for v in vectors):
        raise ConfigError(
            "`memories dead-letters` needs a store that outlives the process; this config's "
            "vector memory is in memory (mode: memory)."
        )
    remaining = 0
    for vector in vectors:
        where = f"vector namespace {'.'.join(vector.namespace)} in the {vector.backend.location}"
        if retry is not None:
            queued = vector.retry_dead_letters(retry or None)
            out.write(f"{where}: {queued} set-aside documents queued again and written\n")
        letters = vector.dead_letters()
        remaining += len(letters)
        out.write(f"{where}: {len(letters)} documents set aside\n")
        for letter in letters:
            when = datetime.fromtimestamp(letter.created_at, UTC).isoformat(timespec="seconds")
            text = letter.row.text.replace("\n", " | ")
            out.write(f"  {letter.row.doc_id}  {when}  {letter.error}\n")
            out.write(f"    {text[:100]}{'…' if len(text) > 100 else ''}\n")
    return remaining


# -- export / import ----------------------------------------------------------


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

    def to_json(self) -> str:
        """The JSON Lines form: ``{"namespace", "id", "text", "metadata"}``."""
        record = {"namespace": list(self.namespace), "id": self.id, "text": self.text}
        return json.dumps({**record, "metadata": self.metadata}, ensure_ascii=False)


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
    if not histories and not vectors and not graphs_of(memory):
        raise ConfigError(
            f"`memories {command}` works on message histories, vector memories and entity "
            f"graphs, and a {type(memory).__name__} keeps none. Use a config whose memory has "
            "a `history`."
        )
    if any(isinstance(h, InMemoryHistory) for h in histories) or any(
        v.mode == "memory" for v in vectors
    ):
        raise ConfigError(
            f"`memories {command}` needs a store that outlives the process; this config keeps "
            "its data in memory. Add e.g. `history: {type: sqlite, path: chat.db}`, or use a "
            "persistent vector memory."
        )
    return histories, vectors


def stores_of(
    config: str | Path | dict[str, Any],
    session: str | None,
    namespace: str | tuple[str, ...] | None,
    command: str,
) -> tuple[list[ChatHistory], list[Any]]:
    """The persistent histories and vector memories of a config, on a session and namespace."""
    return _stored(open_memory(config, session, namespace), command)


def export_jsonl(memory: LangChainBaseMemory, out: TextIO) -> tuple[int, int]:
    """Write a memory's messages, vector documents, entity summaries, triples and entity
    graphs as JSON Lines.

    Returns:
        How many messages, and how many other lines (documents, entities, triples, graphs).
    """
    histories, vectors = _stored(memory, "export")
    messages = documents = 0
    for graph in graphs_of(memory):
        records = graph.export_records()
        out.writelines(GraphLine(graph.namespace, r).to_json() + "\n" for r in records)
        documents += len(records)
    for session_id, store in knowledge_of(memory):
        if isinstance(store, EntityStore):
            lines: list[Line] = [
                EntityLine(session_id, name, summary) for name, summary in _entities(store).items()
            ]
        else:
            lines = [
                TripleLine(session_id, KnowledgeTriple(s, p, o)) for s, o, p in store.get_triples()
            ]
        out.writelines(line.to_json() + "\n" for line in lines)
        documents += len(lines)
    for history in histories:
        for entry in history.entries():
            out.write(ExportLine(history.session_id, entry.message, entry.seq).to_json() + "\n")
            messages += 1
    for vector in vectors:
        for record in _documents(vector):
            metadata = {k: v for k, v in record.metadata.items() if k != "namespace"}
            out.write(DocumentLine(vector.namespace, record.id, record.text, metadata).to_json())
            out.write("\n")
            documents += 1
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
        lines: the file's lines.
        source: the file's name, for error messages.
        session: put every message in this session instead of the line's own.
        namespace: put every document in this namespace instead of the line's own.

    Raises:
        InvalidInputError: a line is neither an exported message nor an exported
            document (the message names the line).
    """
    parsed: list[Line] = []
    number = 0
    try:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                parsed.append(_parse_line(json.loads(line), session, namespace))
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
        session_id = session or record["session_id"]
        if not isinstance(session_id, str) or not session_id:
            raise ValueError(f"session_id must be a non-empty string, got {session_id!r}")
        message = messages_from_dict([record["message"]])[0]
        dump_message(check_storable([message])[0])  # what the history will write, checked now
        return ExportLine(session_id, message, record.get("seq"))
    if "entity" in record or "triple" in record:
        return _parse_knowledge(record, session)
    labels = namespace or as_namespace(record["namespace"])
    if "graph" in record:
        graph_record = {k: v for k, v in record.items() if k != "namespace"}
        return GraphLine(labels, check_record(graph_record))
    text, doc_id, metadata = record["text"], record["id"], record.get("metadata") or {}
    if not isinstance(text, str) or not isinstance(doc_id, str) or not doc_id:
        raise ValueError("text must be a string and id a non-empty string")
    check_storable([HumanMessage(text)])
    if not isinstance(metadata, dict):
        raise ValueError(f"metadata must be an object, got {metadata!r:.80}")
    return DocumentLine(labels, doc_id, text, metadata)


def _parse_knowledge(record: dict[str, Any], session: str | None) -> EntityLine | TripleLine:
    session_id = session or record["session_id"]
    if not isinstance(session_id, str) or not session_id:
        raise ValueError(f"session_id must be a non-empty string, got {session_id!r}")
    if "entity" in record:
        entity, summary = record["entity"], record["summary"]
        if not isinstance(entity, str) or not entity or not isinstance(summary, str):
            raise ValueError("entity must be a non-empty string and summary a string")
        check_storable([HumanMessage(entity), HumanMessage(summary)])
        return EntityLine(session_id, entity, summary)
    triple = record["triple"]
    if not isinstance(triple, list) or len(triple) != 3:
        raise ValueError(f"triple must be [subject, predicate, object], got {triple!r:.80}")
    if not all(isinstance(part, str) and part for part in triple):
        raise ValueError(f"a triple's parts must be non-empty strings, got {triple!r:.80}")
    check_storable([HumanMessage(part) for part in triple])
    return TripleLine(session_id, KnowledgeTriple(*triple))


def _target(line: Line) -> tuple[str, Any]:
    if isinstance(line, ExportLine):
        return ("session", line.session_id)
    if isinstance(line, EntityLine):
        return ("entities", line.session_id)
    if isinstance(line, TripleLine):
        return ("graph", line.session_id)
    if isinstance(line, GraphLine):
        return ("entity graph", line.namespace)
    return ("namespace", line.namespace)


#: What holds each kind of line, as the import's errors name it.
_HOLDERS = {
    "session": ("messages", "history"),
    "namespace": ("documents", "vector memory"),
    "entities": ("entity summaries", "entity store that outlives the process"),
    "graph": ("knowledge triples", "knowledge graph that outlives the process"),
    "entity graph": ("entities and relations", "entity graph (type: entity)"),
}


def _batches(lines: list[Line], size: int) -> Iterator[list[Line]]:
    """Consecutive lines of one session (or one namespace), at most ``size`` at a time.

    An entity graph's lines are one batch (one transaction): its relations name its entities.
    """
    start = 0
    while start < len(lines):
        target = _target(lines[start])
        most = len(lines) if isinstance(lines[start], GraphLine) else size
        end = start
        while end < len(lines) and end - start < most and _target(lines[end]) == target:
            end += 1
        yield lines[start:end]
        start = end


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
    """Append messages to their sessions' histories and documents to their namespaces.

    Works in batches (one transaction, or one vector ``add``, each); returns
    how many lines were written. Importing is idempotent: a document keeps its
    id (a second import replaces it), and a session's messages that its log
    already holds as a run (an export imported into its own session, or
    imported twice) are skipped; when the log ends with the beginning of them
    (an import that stopped half-way), the rest is appended. An entity summary
    is written as a new version unless it is the entity's summary already; a
    triple is added unless the graph holds it already; an entity graph's
    entity or relation is written under its id unless the graph holds it so.

    Args:
        lines: from :func:`read_jsonl`.
        histories_for: the histories of a session (from the config).
        vectors_for: the vector memories of a namespace (from the config).
        knowledge_for: the entity stores and graphs of a session (from the config).
        graphs_for: the entity graph memories of a namespace (from the config).
        batch_size: lines per write.
        progress: show a progress bar on stderr; None shows it on a terminal.

    Raises:
        ConfigError: the file holds messages (or documents) and the config's
            memory has no history (or vector memory) to take them; checked
            before anything is written.
    """
    from tqdm import tqdm

    if batch_size <= 0:
        raise ConfigError(f"batch_size must be positive, got {batch_size}")
    targets: dict[tuple[str, Any], list[Any]] = {}
    for line in lines:
        target = _target(line)
        if target not in targets:
            kind, where = target
            if kind == "session":
                found: list[Any] = histories_for(where)
            elif kind == "namespace":
                found = vectors_for(where) if vectors_for is not None else []
            elif kind == "entity graph":
                found = graphs_for(where) if graphs_for is not None else []
            else:
                holds = EntityStore if kind == "entities" else EntityGraph
                stores = knowledge_for(where) if knowledge_for is not None else []
                found = [store for store in stores if isinstance(store, holds)]
            if not found:
                what, holder = _HOLDERS[kind]
                where_kind = "session" if kind in ("session", "entities", "graph") else "namespace"
                raise ConfigError(
                    f"The file holds {what} (for {where_kind} {where!r}) and the config's "
                    f"memory has no {holder} to take them. Nothing was imported."
                )
            targets[target] = found
    disable = None if progress is None else not progress  # None: only on a terminal
    skip = _already_there(lines, targets)
    written = 0
    with tqdm(total=len(lines), unit="line", desc="import", disable=disable) as bar:
        for batch in _batches(lines, batch_size):
            for store in targets[_target(batch[0])]:
                if isinstance(store, ChatHistory):
                    held = skip[id(store)]
                    new = [
                        line.message
                        for line in batch
                        if isinstance(line, ExportLine) and id(line) not in held
                    ]
                    store.append(new)
                    written += len(new)
                elif isinstance(store, EntityStore | EntityGraph):
                    written += _import_knowledge(store, batch)
                elif isinstance(store, EntityMemory):
                    written += store.import_records(
                        [line.record for line in batch if isinstance(line, GraphLine)]
                    )
                else:
                    documents = [line for line in batch if isinstance(line, DocumentLine)]
                    store.import_documents(
                        [d.id for d in documents],
                        [d.text for d in documents],
                        [d.metadata for d in documents],
                    )
                    written += len(documents)
            bar.update(len(batch))
    return written


def _import_knowledge(store: EntityStore | EntityGraph, batch: list[Line]) -> int:
    """Write a batch's summaries or triples that ``store`` lacks, in one transaction."""
    if isinstance(store, EntityStore):
        current = _entities(store)
        new = {
            line.entity: line.summary
            for line in batch
            if isinstance(line, EntityLine) and current.get(line.entity) != line.summary
        }
        store.set_many(new)
        return len(new)
    held = {(s, p, o) for s, o, p in store.get_triples()}
    triples = list(
        dict.fromkeys(
            line.triple
            for line in batch
            if isinstance(line, TripleLine) and tuple(line.triple) not in held
        )
    )
    store.add_triples(triples)
    return len(triples)


def _already_there(
    lines: list[Line], targets: dict[tuple[str, Any], list[Any]]
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
    """How many leading ``incoming`` messages ``log`` already holds.

    All of them when the log holds them as a contiguous run; the beginning of
    them when the log ends with it (an import that stopped half-way); else none.
    """
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


# -- clear ----------------------------------------------------------------------


def clear_targets(memory: LangChainBaseMemory, *, namespaces: bool = False) -> list[str]:
    """What :func:`clear` would erase, one line each, for a confirmation prompt."""
    targets = [f"session {h.session_id!r} of {h!r}" for h in distinct_histories(memory)]
    vectors = searchable_memories(memory)
    if namespaces:
        targets += [
            f"profile {'.'.join(p.namespace)}/{p.key} in {p.store!r}"
            for p in leaf_memories(memory)
            if isinstance(p, ProfileMemory)
        ]
        targets += [
            f"vector namespace {'.'.join(v.namespace)} (every session) in the {v.store.location}"
            for v in vectors
        ]
        targets += [_graph_name(graph) for graph in graphs_of(memory)]
    else:
        targets += [
            f"session {v.session_id!r} of vector namespace {'.'.join(v.namespace)}" for v in vectors
        ]
    targets += [
        f"{'entities' if isinstance(store, EntityStore) else 'knowledge graph'} of session "
        f"{session_id!r} in {store!r}"
        for session_id, store in knowledge_of(memory)
    ]
    return targets


def clear(memory: LangChainBaseMemory, *, namespaces: bool = False) -> list[str]:
    """Erase what the memory holds for its session; return a line per thing erased.

    With ``namespaces=True`` the long-term memories are erased whole too: every
    session's vector documents of the namespace, and the profile (emptied as a
    recorded change, so ``ProfileMemory.rollback`` can undo it). Memories under
    a read-only memory are erased too: the command is an explicit request to
    erase, not a chain saving by accident.
    """
    done = []
    for history in distinct_histories(memory):
        held = history.count()
        history.clear()
        done.append(f"session {history.session_id!r}: {held} messages and the memories' state")
    for vector in searchable_memories(memory):
        held = len(_documents(vector))
        if namespaces:
            vector.erase_namespace()
            done.append(f"vector namespace {'.'.join(vector.namespace)}: {held} documents")
        else:
            vector.clear()
            left = len(_documents(vector))
            done.append(
                f"session {vector.session_id!r} of vector namespace "
                f"{'.'.join(vector.namespace)}: {held - left} documents ({left} of other "
                "sessions kept; --erase-namespace erases them)"
            )
    for session_id, store in knowledge_of(memory):
        done.append(_clear_knowledge(session_id, store, erase=namespaces))
    for graph in graphs_of(memory) if namespaces else []:
        entities, relations = len(graph.entities()), len(graph.relations())
        graph.clear()
        done.append(
            f"{_graph_name(graph)}: {entities} entities cleared and {relations} current "
            "relations ended (history() keeps them)"
        )
    for leaf in leaf_memories(memory):
        if isinstance(leaf, ProfileMemory) and namespaces:
            leaf.clear()
            version = leaf.status().version
            done.append(
                f"profile {'.'.join(leaf.namespace)}/{leaf.key}: emptied as version {version} "
                f"(rollback({version - 1}) restores it)"
            )
    return done


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


def _clear_knowledge(session_id: str, store: EntityStore | EntityGraph, *, erase: bool) -> str:
    """Clear an entity store (its versions kept, unless ``erase``) or a graph; say what went."""
    if isinstance(store, EntityGraph):
        held = len(store.get_triples())
        store.clear()
        return f"knowledge graph of session {session_id!r}: {held} triples and their changes"
    held = len(_entities(store))
    if erase:
        store.purge()
        return f"entities of session {session_id!r}: {held} entities and every version"
    store.clear()
    return (
        f"entities of session {session_id!r}: {held} entities (their earlier versions kept; "
        "--erase-namespace erases them)"
    )


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


# -- erase ----------------------------------------------------------------------

#: For crash tests: after erasing this many stores, ``erase`` writes ``paused`` and waits
#: (at most :data:`_PAUSE_SECONDS`) to be killed half-way, at a known point.
ERASE_PAUSE_ENV = "MEMORIES_ERASE_PAUSE_AFTER"
_PAUSE_SECONDS = 600.0


def erase(
    config: str | Path | dict[str, Any],
    *,
    namespace: str | None,
    session: str | None,
    out: TextIO,
    confirm: Callable[[list[str]], bool] | None = None,
    dry_run: bool = False,
) -> ErasureReport | None:
    """Erase a person's data in every store of a config (see :func:`~memories.erase_user`).

    Without ``dry_run``, first counts what will go and asks ``confirm`` with a
    line per store (None: do not ask); returns None when it says no. Each
    store's line is written to ``out`` as soon as that store is done.
    """
    if not dry_run and confirm is not None:
        preview = erase_user(config, namespace=namespace, session=session, dry_run=True)
        lines = [line for line in preview.text().splitlines()[:-1]]
        if not confirm(lines or ["(nothing: no store holds data of it)"]):
            return None

    pause_after = int(os.environ.get(ERASE_PAUSE_ENV) or 0)
    stores_done = 0

    def done(line: StoreErasure) -> None:
        nonlocal stores_done
        counts = line.found if line.remaining is None else line.removed
        kinds = ", ".join(f"{n} {kind}" for kind, n in counts.items()) or "nothing"
        verb = "would erase" if line.remaining is None else "erased"
        out.write(f"{verb} in {line.store}: {kinds}\n")
        stores_done += 1
        if stores_done == pause_after:
            out.write("paused\n")
            out.flush()
            threading.Event().wait(_PAUSE_SECONDS)
        out.flush()

    return erase_user(config, namespace=namespace, session=session, dry_run=dry_run, progress=done)
