"""A config's memory on a session and namespace, and the parts of it the commands use."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from memories.core.base import BaseMemory
from memories.core.combined import leaves_of
from memories.core.config import create_memory, load_config, with_namespace, with_session
from memories.core.langchain import LangChainBaseMemory
from memories.core.members import distinct_histories
from memories.errors import ConfigError
from memories.long_term.entities import ConversationEntityMemory, ConversationKGMemory
from memories.long_term.entity_graph import EntityMemory
from memories.stores.entities.summaries import EntityStore, InMemoryEntityStore
from memories.stores.entities.triples import EntityGraph, InMemoryEntityGraph
from memories.stores.history.base import ChatHistory
from memories.stores.history.memory import InMemoryHistory


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


def flush(memory: LangChainBaseMemory) -> None:
    """Finish the memory's deferred work (a background summary fold) before the process ends."""
    if isinstance(memory, BaseMemory):
        memory.flush()


def graphs_of(memory: LangChainBaseMemory) -> list[EntityMemory]:
    """The entity graphs (``EntityMemory`` members) of a memory."""
    return [leaf for leaf in leaf_memories(memory) if isinstance(leaf, EntityMemory)]


def graph_name(graph: EntityMemory) -> str:
    return f"entity graph {'.'.join(graph.namespace)} in {graph.store!r}"


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


def entities_of(store: EntityStore) -> dict[str, str]:
    """Every entity's summary, or a ConfigError when the store cannot list them."""
    try:
        return store.entities()
    except NotImplementedError as exc:
        raise ConfigError(str(exc)) from exc


def documents_of(vector: Any) -> list[Any]:
    """Every document of a vector memory's namespace, oldest first (queued ones written first)."""
    documents: list[Any] = vector.export_documents()
    return documents
