"""``memories clear`` and ``memories erase``: a session's data, or a person's everywhere."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from memories.core.erasure import ErasureReport, StoreErasure, erase_user
from memories.core.langchain import LangChainBaseMemory
from memories.core.members import (
    distinct_histories,
    searchable_memories,
)
from memories.faces.commands.opening import (
    entities_of,
    graph_name,
    graphs_of,
    knowledge_of,
    leaf_memories,
    vector_name,
)
from memories.long_term.profile import ProfileMemory
from memories.stores.entities.summaries import EntityStore
from memories.stores.entities.triples import EntityGraph


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
        targets += [vector_name(v, every_session=True) for v in vectors]
        targets += [graph_name(graph) for graph in graphs_of(memory)]
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

    ``namespaces``: the long-term memories whole too (a profile emptied as a change a
    rollback undoes). Members of a read-only memory are erased too: this is a request.
    """
    done = []
    for history in distinct_histories(memory):
        held = history.count()
        history.clear()
        done.append(f"session {history.session_id!r}: {held} messages and the memories' state")
    for vector in searchable_memories(memory):
        held = len(vector.export_documents())
        if namespaces:
            vector.erase_namespace()
            done.append(f"vector namespace {'.'.join(vector.namespace)}: {held} documents")
        else:
            vector.clear()
            left = len(vector.export_documents())
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
            f"{graph_name(graph)}: {entities} entities cleared and {relations} current "
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


def _clear_knowledge(session_id: str, store: EntityStore | EntityGraph, *, erase: bool) -> str:
    """Clear an entity store (its versions kept, unless ``erase``) or a graph; say what went."""
    if isinstance(store, EntityGraph):
        held = len(store.get_triples())
        store.clear()
        return f"knowledge graph of session {session_id!r}: {held} triples and their changes"
    held = len(entities_of(store))
    if erase:
        store.purge()
        return f"entities of session {session_id!r}: {held} entities and every version"
    store.clear()
    return (
        f"entities of session {session_id!r}: {held} entities (their earlier versions kept; "
        "--erase-namespace erases them)"
    )


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

    ``confirm`` is asked first with a line per store (None: not asked; no: returns
    None); each store's line goes to ``out`` once it is done (so the report's
    ``text(stores=dry_run)`` names each store once).
    """
    if not dry_run and confirm is not None:
        preview = erase_user(config, namespace=namespace, session=session, dry_run=True)
        lines = preview.text().splitlines()[:-1]
        if not confirm(lines or ["(nothing: no store holds data of it)"]):
            return None

    pause_after = int(os.environ.get(ERASE_PAUSE_ENV) or 0)
    stores_done = 0

    def done(line: StoreErasure) -> None:
        nonlocal stores_done
        out.write(f"erased in {line.text(dry_run=False)}\n")
        stores_done += 1
        if stores_done == pause_after:
            out.write("paused\n")
            out.flush()
            threading.Event().wait(_PAUSE_SECONDS)
        out.flush()

    progress = None if dry_run else done
    return erase_user(
        config, namespace=namespace, session=session, dry_run=dry_run, progress=progress
    )
