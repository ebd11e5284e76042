"""``memories inspect`` and ``memories dead-letters``: what a config's memory holds, read only."""

from __future__ import annotations

import json
from typing import Any, TextIO

from langchain_core.messages import (
    BaseMessage,
    ToolMessage,
)

from memories.core.base import BaseMemory
from memories.core.langchain import LangChainBaseMemory
from memories.core.members import (
    chat_memories,
    read_only,
    searchable_memories,
)
from memories.errors import ConfigError
from memories.faces.commands.chatting import prompt_messages
from memories.faces.commands.opening import (
    entities_of,
    graph_name,
    graphs_of,
    histories_of,
    knowledge_of,
    leaf_memories,
    outliving,
    triples_of,
    vector_name,
)
from memories.faces.server.rows import when
from memories.kernel.messages import message_text
from memories.kernel.tokens import TiktokenCounter
from memories.long_term.entity_graph import EntityMemory
from memories.long_term.entity_graph.recall import entity_line, relation_line
from memories.long_term.profile import ProfileMemory
from memories.stores.entities.summaries import EntityStore
from memories.stores.entities.triples import EntityGraph


def _describe(message: BaseMessage, width: int = 100) -> str:
    role = message.type
    if isinstance(message, ToolMessage) and message.name:
        role = f"tool[{message.name}]"
    return f"{role}: {_clipped(message_text(message), width)}"


def _tail(items: list[Any], last: int | None) -> list[Any]:
    """The last ``last`` of ``items``; all of them when ``last`` is None."""
    return items if last is None else items[-last:] if last else []


def _counted(shown: int, total: int, unit: str = "") -> str:
    """How many items there are, and how many of them are shown when not all."""
    more = f" (last {shown} shown)" if shown < total else ""
    return f"{total}{unit}{more}\n"


def _clipped(text: str, width: int) -> str:
    """``text`` on one line, cut to ``width`` characters and marked when cut."""
    text = text.replace("\n", " | ")
    return text if len(text) <= width else text[: width - 1] + "…"


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
        out.writelines(f"\nsession {h.session_id!r} in {h!r}: no messages\n" for h in histories)
        return
    for history in histories:
        entries = history.entries(last=last)
        total = history.count() if last is not None else len(entries)
        counted = _counted(len(entries), total, " messages")
        out.write(f"\nsession {history.session_id!r} in {history!r}: {counted}")
        out.writelines(f"  #{e.seq} {_describe(e.message)}\n" for e in entries)
    with read_only(memory):
        # The view first: showing it brings each memory's derived state up to
        # date, in the read-only views (inspecting never writes).
        shown_messages = prompt_messages(memory, "", "")[:-1]
        for member in chat_memories(memory):
            state = member.chat_memory.load_state(member.state_key)
            if state is not None:
                shown = _clipped(json.dumps(state, ensure_ascii=False, default=str), 400)
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
    out.write("".join(f"  {_describe(m)}\n" for m in shown_messages) or "  (nothing)\n")


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
    for change in _tail(profile.history(), last):
        detail = change.error if change.error else json.dumps(list(change.patch))
        out.write(f"  change #{change.id} {change.kind} v{change.version}: {detail[:100]}\n")


def _inspect_graph(graph: EntityMemory, out: TextIO, *, last: int | None) -> None:
    entities, relations = graph.entities(), graph.relations()
    status = graph.status()
    out.write(
        f"\n{graph_name(graph)}: {len(entities)} entities ({len(graph.merges())} merged into "
        f"others), {len(relations)} current relations, {len(graph.history())} ended, "
        f"{status.pending} turns pending\n"
    )
    if status.last_error is not None:
        out.write(f"  last update failed: {status.last_error}\n")
    lines = [entity_line(e)[2:] for e in entities] + [relation_line(r)[2:] for r in relations]
    shown = _tail(lines, last)
    if len(shown) < len(lines):
        out.write(f"  (last {len(shown)} shown)\n")
    out.writelines(f"  {_clipped(line, 120)}\n" for line in shown)


def _inspect_knowledge(
    session_id: str, store: EntityStore | EntityGraph, out: TextIO, *, last: int | None
) -> None:
    if isinstance(store, EntityStore):
        items = [
            f"{name} ({len(store.history(name))} versions): {summary}"
            for name, summary in entities_of(store).items()
        ]
        kind = "entities"
    else:
        items = [f"({s}, {p}, {o})" for s, p, o in triples_of(store)]
        kind = "triples"
    shown = _tail(items, last)
    out.write(
        f"\n{kind} of session {session_id!r} in {store!r}: {_counted(len(shown), len(items))}"
    )
    out.writelines(f"  {_clipped(item, 120)}\n" for item in shown)


def _inspect_vector(vector: Any, out: TextIO, *, last: int | None) -> None:
    documents = vector.export_documents()
    shown = _tail(documents, last)
    out.write(f"\n{vector_name(vector)}: {_counted(len(shown), len(documents), ' documents')}")
    out.writelines(f"  [{r.metadata.get('session', '?')}] {_clipped(r.text, 100)}\n" for r in shown)


def dead_letters(
    memory: LangChainBaseMemory, out: TextIO, *, retry: list[str] | None = None
) -> int:
    """Print the documents each vector memory's store set aside; return how many.

    ``retry``: first queue those again (``[]``: all) and write them now.

    Raises:
        ConfigError: no vector memory, or one in this process only.
    """
    vectors = searchable_memories(memory)
    what = "vector memories (vector, collection, examples)"
    outliving(memory, "dead-letters", what, vectors, vectors, "Use one with mode: persistent.")
    remaining = 0
    for vector in vectors:
        where = vector_name(vector)
        if retry is not None:
            queued = vector.retry_dead_letters(retry or None)
            out.write(f"{where}: {queued} set-aside documents queued again and written\n")
        letters = vector.dead_letters()
        remaining += len(letters)
        out.write(f"{where}: {len(letters)} documents set aside\n")
        for letter in letters:
            out.write(f"  {letter.row.doc_id}  {when(letter.created_at)}  {letter.error}\n")
            out.write(f"    {_clipped(letter.row.text, 100)}\n")
    return remaining
