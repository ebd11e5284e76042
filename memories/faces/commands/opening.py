"""A config's memory on a session and namespace, and the parts of it the commands use."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from memories.core.base import BaseMemory
from memories.core.combined import leaves_of
from memories.core.config import (
    config_templates,
    create_memory,
    load_config,
    server_stores,
    sqlite_files,
    with_namespace,
    with_session,
)
from memories.core.langchain import LangChainBaseMemory
from memories.core.members import distinct_histories
from memories.errors import ConfigError
from memories.kernel.capabilities import capabilities_of
from memories.kernel.namespaces import Namespace
from memories.long_term.entities import ConversationEntityMemory, ConversationKGMemory
from memories.long_term.entity_graph import EntityMemory
from memories.long_term.held import namespaces_held
from memories.long_term.indexed import IndexedMemory
from memories.stores.entities.summaries import EntityStore, InMemoryEntityStore
from memories.stores.entities.triples import EntityGraph, InMemoryEntityGraph, KnowledgeTriple
from memories.stores.history.base import ChatHistory
from memories.stores.history.memory import InMemoryHistory

#: The namespace a templated config is built on by a command that works on its stores
#: whole (sweep, reshard, import, a listing of namespaces): nothing is read or written there.
STAND_IN: Namespace = ("any-namespace",)
#: Namespaces an error message names at most.
_NAMED = 10


def options_on(
    config: str | Path | Mapping[str, Any],
    session: str | None,
    namespace: str | tuple[str, ...] | None,
) -> dict[str, Any]:
    """The config's options, moved to ``session`` and ``namespace`` when given."""
    options = load_config(config)
    if session:
        options = with_session(options, session)
    if namespace:
        options = with_namespace(options, namespace)
    return options


def open_memory(
    config: str | Path | dict[str, Any],
    session: str | None = None,
    namespace: str | tuple[str, ...] | None = None,
    *,
    command: str = "",
) -> Any:
    """The memory a config describes, on ``session`` and ``namespace`` (``"users.maya"``).

    Raises:
        ConfigError: the config's namespace is a template and no ``namespace`` is
            given (the message lists the namespaces its stores hold).
    """
    options = options_on(config, session, namespace)
    fields = config_templates(options)
    if fields:
        held = held_namespaces(open_stores(options)) if not _missing(options) else []
        names = ", ".join(".".join(n) for n in held[:_NAMED])
        more = f" and {len(held) - _NAMED} more" if len(held) > _NAMED else ""
        example = ".".join(held[0]) if held else "users.maya"
        raise ConfigError(
            f"The config's namespace is a template (it names {sorted(fields)}), and "
            f"`memories {command or 'COMMAND'}` works on one person's memories: give "
            f"--namespace {example}. "
            + (f"Its stores hold {len(held)}: {names}{more}." if held else "Its stores hold none.")
        )
    return create_memory(options)


def open_stores(
    config: str | Path | dict[str, Any],
    session: str | None = None,
    namespace: str | tuple[str, ...] | None = None,
) -> Any:
    """As :func:`open_memory`, an unfilled namespace template filled with :data:`STAND_IN`.

    For a command that works on the stores whole: every namespace (sweep, reshard), or
    each document's own (import).
    """
    options = options_on(config, session, namespace)
    if config_templates(options):
        options = with_namespace(options, STAND_IN)
    return create_memory(options)


def per_namespace(
    config: str | Path | dict[str, Any],
    session: str | None = None,
    namespace: str | tuple[str, ...] | None = None,
) -> Iterator[Any]:
    """The config's memory on ``namespace``, or its own, or (a template) on each one its
    stores hold (:func:`held_namespaces`), one after the other."""
    options = options_on(config, session, namespace)
    if not config_templates(options):
        yield create_memory(options)
        return
    for held in held_namespaces(open_stores(options)):
        yield create_memory(with_namespace(options, held))


def made_options(config: str | Path | Mapping[str, Any]) -> dict[str, Any]:
    """The config's options, when every SQLite file it names exists (opening one would make it).

    Raises:
        ConfigError: one does not exist (a command that only reads writes nothing).
    """
    options = load_config(config)
    if missing := _missing(options):
        raise not_there(missing[0], "file")
    return options


def _missing(options: dict[str, Any]) -> list[str]:
    """The SQLite files of the config that do not exist (opening one would make it)."""
    return [file for file in sqlite_files(options) if not Path(file).is_file()]


def chroma_folders(memory: LangChainBaseMemory) -> list[str]:
    """The embedded Chroma folders ``memory``'s members keep their documents in."""
    return [
        leaf.path
        for leaf in leaf_memories(memory)
        if isinstance(leaf, IndexedMemory) and leaf.vectors is None and leaf.mode == "persistent"
    ]


def absent_folders(memory: LangChainBaseMemory) -> list[str]:
    """The embedded Chroma folders of ``memory``'s members that do not exist.

    Nothing is stored there, and reading the store would make the folder: a
    command that only reads says so instead.
    """
    return [folder for folder in chroma_folders(memory) if not Path(folder).is_dir()]


def made_memory(memory: LangChainBaseMemory) -> LangChainBaseMemory:
    """``memory``, when each of its embedded Chroma folders exists.

    Raises:
        ConfigError: one does not (reading would make it; a command that only reads writes nothing).
    """
    if absent := absent_folders(memory):
        raise not_there(absent[0], "folder")
    return memory


def not_there(where: str, kind: str) -> ConfigError:
    """The error of a command that only reads, for a ``kind`` of store that does not exist."""
    return ConfigError(
        f"Nothing is stored at {where!r}: the {kind} does not exist. Check the config's paths "
        "(relative ones are read next to the config file)."
    )


def nothing_stored(config: str | Path | dict[str, Any]) -> list[str]:
    """The SQLite files and Chroma folders of a config, when not one of them exists yet.

    Empty when one exists, or the config keeps data on a server (opening would not only
    make the stores, empty).
    """
    options = load_config(config)
    if server_stores(options):
        return []
    files = sqlite_files(options)
    if any(Path(file).is_file() for file in files):
        return []
    folders = chroma_folders(open_stores(options))  # building a memory writes nothing
    made = any(Path(folder).is_dir() for folder in folders)
    return [] if made else list(dict.fromkeys([*files, *folders]))


def held_namespaces(memory: LangChainBaseMemory) -> list[Namespace]:
    """The namespaces the stores of ``memory``'s long-term members hold data in, sorted.

    A Chroma folder that does not exist is not read (reading would make it).
    """
    absent = set(absent_folders(memory))
    found: set[Namespace] = set()
    for leaf in leaf_memories(memory):
        if capabilities_of(leaf).scope != "namespace":
            continue
        if isinstance(leaf, IndexedMemory) and leaf.path in absent and leaf.vectors is None:
            continue
        found.update(namespaces_held(leaf))
    return sorted(found, key=".".join)


#: The memories that hold data: ``memory``, or the members of a combined or read-only one.
leaf_memories = leaves_of


def histories_of(memory: LangChainBaseMemory, command: str) -> list[ChatHistory]:
    """The distinct persistent histories of a memory's chat memories.

    Raises:
        ConfigError: it keeps no messages, or only in this process (a command sees none).
    """
    histories = distinct_histories(memory)
    outliving(memory, command, "message histories", histories, histories)
    return histories


#: How to give a config a history that outlives the process.
HISTORY_HINT = "Add e.g. `history: {type: sqlite, path: chat.db}`."


def outliving(
    memory: LangChainBaseMemory,
    command: str,
    what: str,
    found: list[Any],
    stores: list[Any],
    hint: str = HISTORY_HINT,
) -> None:
    """Refuse ``command`` when ``memory`` keeps no ``what`` (none ``found``), or keeps its
    ``stores`` only in this process: a command run on its own would see nothing there."""
    if not found:
        raise ConfigError(
            f"`memories {command}` works on {what}, and a {type(memory).__name__} keeps none. "
            + hint
        )
    if any(isinstance(s, InMemoryHistory) or getattr(s, "mode", "") == "memory" for s in stores):
        raise ConfigError(
            f"`memories {command}` needs a store that outlives the process; this config keeps "
            f"its data in memory. {hint}"
        )


def flush(memory: LangChainBaseMemory) -> None:
    """Finish the memory's deferred work (a background summary fold) before the process ends."""
    if isinstance(memory, BaseMemory):
        memory.flush()


def graphs_of(memory: LangChainBaseMemory) -> list[EntityMemory]:
    """The entity graphs (``EntityMemory`` members) of a memory."""
    return [leaf for leaf in leaf_memories(memory) if isinstance(leaf, EntityMemory)]


def graph_name(graph: EntityMemory) -> str:
    return f"entity graph {'.'.join(graph.namespace)} in {graph.store!r}"


def vector_name(vector: Any, every_session: bool = False) -> str:
    """A vector memory's namespace and where it lives (any backend's, pgvector's too)."""
    sessions = " (every session)" if every_session else ""
    return (
        f"vector namespace {'.'.join(vector.namespace)}{sessions} in the {vector.backend.location}"
    )


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


def triples_of(graph: EntityGraph) -> list[KnowledgeTriple]:
    """A knowledge graph's triples, in (subject, predicate, object) order."""
    return [KnowledgeTriple(s, p, o) for s, o, p in graph.get_triples()]


def entities_of(store: EntityStore) -> dict[str, str]:
    """Every entity's summary, or a ConfigError when the store cannot list them."""
    try:
        return store.entities()
    except NotImplementedError as exc:
        raise ConfigError(str(exc)) from exc
