"""Knowledge graphs of (subject, predicate, object) triples, in memory or in a SQL database.

They answer LangChain's ``NetworkxEntityGraph``'s methods with the same results
(the order included) and keep every change in an append-only log:
:class:`SQLEntityGraph` survives a restart, and :meth:`EntityGraph.history`
tells what a relation was before a newer triple overwrote it.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, NamedTuple

import sqlalchemy as sa

from memories.errors import ConfigError, MissingDependencyError
from memories.kernel.imports import from_config, install_hint
from memories.kernel.steps import blocking_twin
from memories.stores.entities.base import EntityLog, SQLEntityLog, coerced, session_log

__all__ = [
    "GRAPH_TYPES",
    "EntityGraph",
    "GraphChange",
    "InMemoryEntityGraph",
    "KnowledgeTriple",
    "LangChainEntityGraph",
    "SQLEntityGraph",
    "as_entity_graph",
]


class KnowledgeTriple(NamedTuple):
    """A fact: ``(subject, predicate, object_)``, LangChain's field names."""

    subject: str
    """Who or what the fact is about."""
    predicate: str
    """The relation."""
    object_: str
    """What it relates to."""


class GraphChange(NamedTuple):
    """One change of the graph's log."""

    subject: str
    """The edge's source."""
    object_: str
    """The edge's target."""
    predicate: str | None
    """The relation written, or None when the edge was deleted."""
    created_at: float
    """When (seconds since the epoch)."""


class EntityGraph(EntityLog, ABC):
    """A directed graph of entities with one relation per (subject, object) edge.

    ``NetworkxEntityGraph``'s methods; a new triple for an existing edge overwrites
    its relation in the graph and stays in :meth:`history`.

    Implementing a subclass
    -----------------------
    Implement the four abstract methods. The graph's methods replay the log here,
    with ``networkx``'s ordering rules, so every backend answers alike.
    """

    @abstractmethod
    def _log(self, subject: str | None = None, /) -> list[GraphChange]:
        """The changes in order: all, or those whose subject is ``subject``."""

    @abstractmethod
    def _append(self, changes: Sequence[tuple[str, str, str | None]], /) -> None:
        """Record ``(subject, object, predicate or None)`` changes, all or none."""

    @abstractmethod
    def _mentions(self, entity: str, /) -> bool:
        """Whether any change names ``entity`` (as subject or object)."""

    @abstractmethod
    def clear(self) -> None:
        """Erase the graph and its log."""

    def held(self) -> dict[str, int]:
        """What :meth:`clear` erases: every change in the graph's log."""
        return {"graph changes": len(self._log())}

    # -- NetworkxEntityGraph's methods, written once over the log -------------------------

    def add_triple(self, knowledge_triple: KnowledgeTriple | Sequence[str]) -> None:
        """Add a triple; it overwrites the relation of an existing (subject, object) edge."""
        subject, predicate, object_ = knowledge_triple
        self._append([(subject, object_, predicate)])

    def add_triples(self, triples: Sequence[KnowledgeTriple | Sequence[str]], /) -> None:
        """Add several triples in one transaction (each as :meth:`add_triple` adds it)."""
        if triples:
            self._append([(subject, object_, predicate) for subject, predicate, object_ in triples])

    def delete_triple(self, knowledge_triple: KnowledgeTriple | Sequence[str]) -> None:
        """Delete the (subject, object) edge of the triple, whatever its relation."""
        subject, _, object_ = knowledge_triple
        if object_ in _edges(self._log(subject)).get(subject, {}):
            self._append([(subject, object_, None)])

    def get_triples(self) -> list[tuple[str, str, str]]:
        """Every edge as ``(subject, object, relation)``, in networkx's order."""
        edges = _edges(self._log())
        return [(u, v, relation) for u, targets in edges.items() for v, relation in targets.items()]

    def get_entity_knowledge(self, entity: str, depth: int = 1) -> list[str]:
        """``"subject relation object"`` for the edges within ``depth`` of ``entity``, DFS."""
        if not self._mentions(entity):
            return []
        results: list[str] = []
        seen = {entity}
        edges: dict[str, dict[str, str]] = {}

        def visit(source: str, left: int) -> None:
            if source not in edges:
                edges[source] = _edges(self._log(source)).get(source, {})
            for sink, relation in edges[source].items():
                if sink in seen:
                    continue
                seen.add(sink)
                results.append(f"{source} {relation} {sink}")
                if left > 1:
                    visit(sink, left - 1)

        visit(entity, max(depth, 1))  # networkx reads a depth below 1 as 1
        return results

    def history(self, subject: str, object_: str, /) -> list[GraphChange]:
        """Every change of the (subject, object) edge, oldest first (deletions included)."""
        return [c for c in self._log(subject) if c.object_ == object_]

    aadd_triple = blocking_twin(add_triple)
    aadd_triples = blocking_twin(add_triples)
    adelete_triple = blocking_twin(delete_triple)
    aget_triples = blocking_twin(get_triples)
    aget_entity_knowledge = blocking_twin(get_entity_knowledge)
    aclear = blocking_twin(clear)


def _edges(log: Sequence[GraphChange]) -> dict[str, dict[str, str]]:
    """The current edges by source, as networkx orders them (insertion; overwrite keeps place)."""
    edges: dict[str, dict[str, str]] = {}
    nodes: dict[str, None] = {}
    for change in log:
        nodes.setdefault(change.subject)
        nodes.setdefault(change.object_)
        targets = edges.setdefault(change.subject, {})
        if change.predicate is None:
            targets.pop(change.object_, None)
        else:
            targets[change.object_] = change.predicate
    return {node: edges[node] for node in nodes if node in edges}


class InMemoryEntityGraph(EntityGraph):
    """The graph in this process's memory (LangChain's default), every change logged."""

    config_type: ClassVar[str] = "memory"

    def __init__(self) -> None:
        self._changes: list[GraphChange] = []

    def _log(self, subject: str | None = None, /) -> list[GraphChange]:
        return [c for c in self._changes if subject is None or c.subject == subject]

    def _append(self, changes: Sequence[tuple[str, str, str | None]], /) -> None:
        now = time.time()
        self._changes.extend(GraphChange(s, o, p, now) for s, o, p in changes)

    def _mentions(self, entity: str, /) -> bool:
        return any(entity in (c.subject, c.object_) for c in self._changes)

    def clear(self) -> None:
        self._changes.clear()

    def to_config(self) -> dict[str, Any]:
        return {"type": self.config_type}


#: Every change of every graph: append-only, read in order per session and subject.
graph_changes_table = session_log(
    "memories_graph_changes",
    "subject",
    sa.Column("object", sa.String(512), nullable=False),
    sa.Column("predicate", sa.Text, nullable=True),
    sa.Index("ix_memories_graph_changes_object", "session_id", "object"),
    index="ix_memories_graph_changes_subject",
)


class SQLEntityGraph(SQLEntityLog, EntityGraph):
    """The graph in a SQL database (any SQLAlchemy URL): it survives a restart.

    Args:
        url: the database; by default ``memories.db`` in the data directory.
        session_id: whose graph this is.
    """

    config_type: ClassVar[str] = "sql"
    rows_held: ClassVar[str] = "graph changes"

    def __init__(self, url: str | None = None, *, session_id: str = "default") -> None:
        super().__init__(url, session_id, graph_changes_table)

    def _log(self, subject: str | None = None, /) -> list[GraphChange]:
        table = graph_changes_table
        where = self._mine()
        if subject is not None:
            where = where & (table.c.subject == subject)
        query = (
            sa.select(table.c.subject, table.c.object, table.c.predicate, table.c.created_at)
            .where(where)
            .order_by(table.c.id)
        )
        with self._db.transaction() as connection:
            return [GraphChange(*row) for row in connection.execute(query)]

    def _append(self, changes: Sequence[tuple[str, str, str | None]], /) -> None:
        self._insert([{"subject": s, "object": o, "predicate": p} for s, o, p in changes])

    def _mentions(self, entity: str, /) -> bool:
        table = graph_changes_table
        named = (table.c.subject == entity) | (table.c.object == entity)
        query = sa.select(table.c.id).where(self._mine() & named)
        with self._db.transaction() as connection:
            return connection.execute(query.limit(1)).first() is not None

    def clear(self) -> None:
        self._erase()


class LangChainEntityGraph:
    """LangChain's ``NetworkxEntityGraph`` (or any graph with its methods), with async twins."""

    def __init__(self, graph: Any) -> None:
        self.graph = graph

    def add_triple(self, knowledge_triple: KnowledgeTriple) -> None:
        """The graph's ``add_triple``."""
        self.graph.add_triple(knowledge_triple)

    def get_entity_knowledge(self, entity: str, depth: int = 1) -> list[str]:
        """The graph's ``get_entity_knowledge``."""
        return list(self.graph.get_entity_knowledge(entity, depth=depth))

    def clear(self) -> None:
        """The graph's ``clear``."""
        self.graph.clear()

    aadd_triple = blocking_twin(add_triple)
    aget_entity_knowledge = blocking_twin(get_entity_knowledge)
    aclear = blocking_twin(clear)


#: A graph config's ``type`` -> its class.
GRAPH_TYPES: dict[str, type[EntityGraph]] = {
    "memory": InMemoryEntityGraph,
    "sql": SQLEntityGraph,
}


def networkx_graph() -> Any:
    """LangChain's ``NetworkxEntityGraph``, the graph config ``{"type": "networkx"}``.

    Raises:
        MissingDependencyError: langchain-community or networkx is not installed.
    """
    try:
        from langchain_community.graphs import NetworkxEntityGraph

        return NetworkxEntityGraph()
    except ImportError as exc:  # its constructor imports networkx
        raise MissingDependencyError(
            "The graph type 'networkx' (LangChain's NetworkxEntityGraph, with langchain-community "
            "and networkx)",
            install_hint("kg"),
        ) from exc


def as_entity_graph(value: Any, /) -> Any:
    """``value`` as a graph the memory can use: ours, LangChain's ``NetworkxEntityGraph``, a config.

    Raises:
        ConfigError: ``value`` is none of these.
    """
    return coerced(
        value,
        EntityGraph,
        _graph_from_config,
        ("add_triple", "get_entity_knowledge", "clear"),
        lambda graph: graph,  # the memory keeps LangChain's graph as given
        "kg must be a knowledge graph (memories' InMemoryEntityGraph or SQLEntityGraph, or "
        "LangChain's NetworkxEntityGraph) or a config dict such as {'type': 'sql', 'url': "
        "'sqlite:///kg.db'}",
    )


def _graph_from_config(config: Mapping[str, Any]) -> Any:
    options = {k: v for k, v in config.items() if k != "type"}
    if config.get("type") == "networkx" and options:
        raise ConfigError(f"The graph type 'networkx' takes no options; got {options!r:.80}")
    return from_config(config, {**GRAPH_TYPES, "networkx": networkx_graph}, "graph")
