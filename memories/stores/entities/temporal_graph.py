"""A temporal entity graph in SQL: entities, typed relations, merges, every version kept.

A namespace's graph lives in the profile store's tables: a document per entity
(``entity:<id>``) and per relation (``relation:<id>``), and a head document
that every change moves on. A change is one compare-and-set commit of the head
and what it touches, so two writers never both apply changes computed from one
read. An ended relation gets an ``invalid_at`` and stays, so
:meth:`EntityGraphStore.recorded` reads the graph as it stood at any past time.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from langchain_core.messages import BaseMessage

from memories.errors import BackendError
from memories.kernel.steps import blocking_twin
from memories.kernel.times import utc
from memories.stores.documents import (
    MAX_WRITE_TRIES,
    ProfileChange,
    ProfileItem,
    ProfileStore,
    version_of,
)

__all__ = ["ENTITY_PREFIX", "RELATION_PREFIX", "Entity", "EntityGraphStore", "Graph", "Relation"]

#: Ledger keys of entities: ``entity:<id>``.
ENTITY_PREFIX = "entity:"
#: Ledger keys of relations: ``relation:<id>``.
RELATION_PREFIX = "relation:"

Turns = tuple[tuple[BaseMessage, ...], ...]


@dataclass(frozen=True)
class Entity:
    """A person, place, thing or idea of the graph, as it stands (or stood, with ``as_of``)."""

    id: str
    """Its id, stable across renames and merges."""
    name: str
    """Its name."""
    type: str | None
    """What it is (``person``, ``place``...), when known."""
    summary: str
    """What is known about it, in a sentence or two."""
    aliases: tuple[str, ...]
    """Other names it goes by (old names after a rename, merged entities' names)."""
    merged_into: str | None
    """The entity it was merged into (None: it stands on its own)."""
    merge_reason: str | None
    """Why it was merged."""
    version: int
    """How many changes it has had."""
    created_at: datetime
    """When it was first stored (UTC)."""
    updated_at: datetime
    """When this version was stored (UTC)."""


@dataclass(frozen=True)
class Relation:
    """A typed relation between an entity and another entity or a value, with its valid time."""

    id: str
    """Its id."""
    subject_id: str
    """The entity it is about (merges followed)."""
    subject: str
    """That entity's name."""
    predicate: str
    """The relation's type, such as ``lives_in`` or ``sister``."""
    object_id: str | None
    """The entity it points to (merges followed), or None for a value."""
    object: str
    """That entity's name, or the value."""
    valid_at: datetime
    """When it became true (UTC)."""
    invalid_at: datetime | None
    """When it stopped being true (None: still true)."""
    ended: str | None = None
    """Why it stopped: ``contradicted`` (a later fact replaced it) or ``retracted``."""
    turns: Turns = ()
    """The conversation turns that caused it (empty for a direct write)."""
    ended_by: Turns = ()
    """The turns that ended it."""
    version: int = 1
    """How many changes it has had."""

    def text(self) -> str:
        """``subject predicate object``, as a prompt shows it."""
        return f"{self.subject} {self.predicate} {self.object}"


@dataclass
class Graph:
    """A namespace's graph read at once: what a change is planned on.

    ``entities`` and ``relations`` are keyed by id, each with the stored
    version a compare-and-set checks; ``head`` is the head document's version.
    """

    entities: dict[str, Entity] = field(default_factory=dict)
    relations: dict[str, Relation] = field(default_factory=dict)
    head: int = 0
    documents: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Every stored document by key, as written (merges not followed): what a change edits."""
    former: dict[str, Entity] = field(default_factory=dict)
    """Entities cleared since, as they last stood (old relations still name them)."""

    def canonical(self, entity_id: str) -> str:
        """The entity ``entity_id`` stands for now: itself, or what it was merged into."""
        seen = set()
        while (entity := self.entities.get(entity_id)) is not None and entity.merged_into:
            if entity_id in seen:  # a loop is never written; stop rather than spin
                break
            seen.add(entity_id)
            entity_id = entity.merged_into
        return entity_id

    def standing(self) -> list[Entity]:
        """The entities that are not merged into another."""
        return [e for e in self.entities.values() if e.merged_into is None]

    def current(self) -> list[Relation]:
        """The relations true now (not ended)."""
        return [r for r in self.relations.values() if r.invalid_at is None]

    def versions(self) -> dict[str, int]:
        """Each entity's and relation's stored version by its key: what a compare-and-set checks."""
        found = {ENTITY_PREFIX + e.id: e.version for e in self.entities.values()}
        return found | {RELATION_PREFIX + r.id: r.version for r in self.relations.values()}

    def named(self, name: str) -> Entity | None:
        """The standing entity called ``name`` (its name or an alias; case and spacing ignored)."""
        wanted = name_key(name)
        for entity in self.entities.values():
            if wanted in (name_key(n) for n in (entity.name, *entity.aliases)):
                return self.entities.get(self.canonical(entity.id))
        return None


def name_key(name: str) -> str:
    """A name as compared: case, spacing and surrounding punctuation ignored."""
    return " ".join(name.casefold().strip(" .,;:!?'\"").split())


def _entity(
    entity_id: str, document: Mapping[str, Any], version: int, first: float, last: float
) -> Entity:
    return Entity(
        id=entity_id,
        name=str(document.get("name") or ""),
        type=document.get("type"),
        summary=str(document.get("summary") or ""),
        aliases=tuple(document.get("aliases") or ()),
        merged_into=document.get("merged_into"),
        merge_reason=document.get("merge_reason"),
        version=version,
        created_at=utc(first),
        updated_at=utc(last),
    )


def _relation(
    relation_id: str,
    document: Mapping[str, Any],
    version: int,
    graph: Graph,
    turns: Turns = (),
    ended_by: Turns = (),
) -> Relation:
    subject_id = graph.canonical(str(document["subject"]))
    given = document.get("object")
    object_id = None if given is None else graph.canonical(str(given))
    subject = graph.entities.get(subject_id) or graph.former.get(subject_id)
    target = (
        None if object_id is None else graph.entities.get(object_id) or graph.former.get(object_id)
    )
    ended = document.get("invalid_at")
    return Relation(
        id=relation_id,
        subject_id=subject_id,
        subject=subject.name if subject is not None else subject_id,
        predicate=str(document["predicate"]),
        object_id=object_id,
        object=target.name if target is not None else str(document.get("value") or object_id),
        valid_at=utc(float(document["valid_at"])),
        invalid_at=None if ended is None else utc(float(ended)),
        ended=document.get("ended"),
        turns=turns,
        ended_by=ended_by,
        version=version,
    )


def _from_items(items: Sequence[ProfileItem], relations: Sequence[ProfileItem], head: int) -> Graph:
    graph = Graph(head=head)
    for item in items:
        entity_id = item.key.removeprefix(ENTITY_PREFIX)
        graph.entities[entity_id] = _entity(
            entity_id, item.value or {}, item.version, item.created_at, item.updated_at
        )
        graph.documents[item.key] = dict(item.value or {})
    for item in relations:
        graph.documents[item.key] = dict(item.value or {})
        relation_id = item.key.removeprefix(RELATION_PREFIX)
        graph.relations[relation_id] = _relation(relation_id, item.value or {}, item.version, graph)
    return _merged_names(graph)


def _from_changes(
    entity_changes: Sequence[tuple[str, ProfileChange]],
    relation_changes: Sequence[tuple[str, ProfileChange]],
    when: float | None,
) -> Graph:
    """The graph as recorded up to ``when`` (None: now), each relation with its turns."""
    graph = Graph()
    for key, changes in _by_key(entity_changes, when).items():
        entity_id = key.removeprefix(ENTITY_PREFIX)
        held = [c for c in changes if c.document is not None]
        if not held:
            continue
        last = held[-1]
        assert last.document is not None
        entity = _entity(
            entity_id, last.document, last.version or 0, changes[0].created_at, last.created_at
        )
        if changes[-1].document is None:
            graph.former[entity_id] = entity
        else:
            graph.entities[entity_id] = entity
    for key, changes in _by_key(relation_changes, when).items():
        last = changes[-1]
        if last.document is None:
            continue
        relation_id = key.removeprefix(RELATION_PREFIX)
        caused = changes[0].turns
        ended_by = next((c.turns for c in changes if (c.document or {}).get("invalid_at")), ())
        graph.relations[relation_id] = _relation(
            relation_id, last.document, last.version or 0, graph, caused, ended_by
        )
    return _merged_names(graph)


def _merged_names(graph: Graph) -> Graph:
    """Each standing entity with the names of the entities merged into it among its aliases."""
    extra: dict[str, list[str]] = {}
    for entity in graph.entities.values():
        if entity.merged_into is not None:
            extra.setdefault(graph.canonical(entity.id), []).extend([entity.name, *entity.aliases])
    for entity_id, names in extra.items():
        standing = graph.entities.get(entity_id)
        if standing is not None:
            held = {name_key(n) for n in (standing.name, *standing.aliases)}
            new = [n for n in dict.fromkeys(names) if name_key(n) not in held]
            graph.entities[entity_id] = replace(standing, aliases=(*standing.aliases, *new))
    return graph


def _by_key(
    changes: Sequence[tuple[str, ProfileChange]], when: float | None
) -> dict[str, list[ProfileChange]]:
    by_key: dict[str, list[ProfileChange]] = {}
    for key, change in changes:
        if when is None or change.created_at <= when:
            by_key.setdefault(key, []).append(change)
    return by_key


class EntityGraphStore(ProfileStore):
    """Entity graphs in a SQL database: a profile store (its tables, arguments, compare-and-set)."""

    def graph(self, namespace: tuple[str, ...], head_key: str, /) -> Graph:
        """The namespace's graph now, with the versions a change is planned on.

        The reads are consistent: every change of the graph moves the head on,
        so a read that saw the head move meanwhile is made again.
        """
        for _ in range(MAX_WRITE_TRIES):
            head = version_of(self.load(namespace, head_key))
            entities = self.keys(namespace, ENTITY_PREFIX)
            relations = self.keys(namespace, RELATION_PREFIX)
            if version_of(self.load(namespace, head_key)) == head:
                return _from_items(entities, relations, head)
        raise BackendError(f"The graph of {namespace!r} kept changing while it was read.")

    def recorded(self, namespace: tuple[str, ...], /, *, as_of: datetime | None = None) -> Graph:
        """The graph as it was recorded at ``as_of`` (None: now), relations with their turns.

        Ended relations are in it (with ``invalid_at``); :meth:`Graph.current`
        leaves them out. Reads every change of the namespace's graph.
        """
        when = None if as_of is None else as_of.timestamp()
        entities = self.key_changes(namespace, ENTITY_PREFIX)
        relations = self.key_changes(namespace, RELATION_PREFIX)
        graph = _from_changes(entities, relations, when)
        if when is not None:  # what was true then, as it was known then
            graph.relations = {
                i: r
                for i, r in graph.relations.items()
                if r.valid_at.timestamp() <= when
                and (r.invalid_at is None or r.invalid_at.timestamp() > when)
            }
        return graph

    agraph = blocking_twin(graph)
    arecorded = blocking_twin(recorded)
