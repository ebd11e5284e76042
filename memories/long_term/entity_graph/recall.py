"""What an entity graph shows for an input: the entities it names, their facts, one more hop.

No I/O: a read of the graph in, lines out in the order they matter
(docs/memories/entity-graph.md, "Recall"), until the token budget is spent.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from memories.stores.entities.temporal_graph import Entity, Graph, Relation, name_key

__all__ = ["Recalled", "recall"]

_SELF = frozenset({"i", "me", "my", "mine", "myself", "i'm", "i've"})


@dataclass(frozen=True)
class Recalled:
    """What the graph shows for an input, in the order it matters."""

    entities: tuple[Entity, ...]
    """The entities shown."""
    relations: tuple[Relation, ...]
    """The relations shown (first hop, then second)."""

    def text(self) -> str:
        """The entities and then the facts, as a prompt shows them."""
        lines = [entity_line(e) for e in self.entities]
        facts = [relation_line(r) for r in self.relations]
        parts = []
        if lines:
            parts.append("Entities:\n" + "\n".join(lines))
        if facts:
            parts.append("Facts:\n" + "\n".join(facts))
        return "\n\n".join(parts)


def entity_line(entity: Entity) -> str:
    about = ", ".join(filter(None, [entity.type, *(f"also {a}" for a in entity.aliases)]))
    head = f"- {entity.name}" + (f" ({about})" if about else "")
    return f"{head}: {entity.summary}" if entity.summary else head


def relation_line(relation: Relation) -> str:
    since = relation.valid_at.date().isoformat()
    if relation.invalid_at is not None:
        return f"- {relation.text()} ({since} to {relation.invalid_at.date().isoformat()})"
    return f"- {relation.text()} (since {since})"


def named(graph: Graph, text: str, user: str) -> list[str]:
    """The standing entities ``text`` names, in order of first mention."""
    folded = " " + " ".join(re.findall(r"[\w']+", text.casefold())) + " "
    found: list[tuple[int, str]] = []
    for entity in graph.entities.values():
        for name in (entity.name, *entity.aliases):
            at = folded.find(f" {name_key(name)} ")
            if at >= 0:
                found.append((at, graph.canonical(entity.id)))
    words = set(folded.split())
    me = graph.named(user)
    if me is not None and words & _SELF:
        found.append((-1, me.id))
    return list(dict.fromkeys(i for _, i in sorted(found)))


def searched(graph: Graph, text: str, k: int) -> list[str]:
    """The standing entities whose name, aliases and summary best match ``text`` (BM25)."""
    standing = graph.standing()
    found = _bm25([(e.id, " ".join([e.name, *e.aliases, e.summary])) for e in standing], text, k)
    return [entity_id for entity_id, _ in found]


def _bm25(documents: list[tuple[str, str]], text: str, k: int) -> list[tuple[str, float]]:
    """The ids of the ``k`` documents that best match ``text`` by BM25, with their scores.

    Without numpy and PyStemmer (the ``chroma`` extra), by the number of the
    text's words each document holds.
    """
    if not documents or k == 0:
        return []
    try:
        from memories.stores.recall.config import RecallConfig  # numpy: imported when used
    except ImportError:
        wanted = set(re.findall(r"\w+", text.casefold()))
        overlap = [
            (i, float(len(wanted & set(re.findall(r"\w+", d.casefold()))))) for i, d in documents
        ]
        return sorted([(i, n) for i, n in overlap if n > 0], key=lambda hit: -hit[1])[:k]
    index = RecallConfig().lexical_index()  # the same BM25 as every memory's recall
    index.add_many("graph", documents)
    return [(hit.id, hit.score) for hit in index.search("graph", text, limit=k) if hit.score > 0]


def by_relevance(relations: list[Relation], text: str) -> list[Relation]:
    """``relations`` with those whose words best match ``text`` first (BM25), then by time."""
    scores = dict(_bm25([(r.id, r.text()) for r in relations], text, len(relations)))
    return sorted(relations, key=lambda r: -scores.get(r.id, 0.0))


def recall(
    graph: Graph,
    text: str,
    *,
    user: str,
    k: int,
    hops: int,
    max_tokens: int,
    count: Callable[[str], int],
) -> Recalled:
    """The entities and relations to show for ``text``, within ``max_tokens``."""
    first = named(graph, text, user)
    found = [i for i in searched(graph, text, k) if i not in first]
    me = graph.named(user)
    if not first and not found and me is not None:
        first = [me.id]  # an input about nothing known: what is known about the user
    current = by_relevance(sorted(graph.current(), key=lambda r: (r.valid_at, r.text())), text)
    chosen_entities: list[Entity] = []
    chosen_relations: dict[str, Relation] = {}
    seen_facts: set[str] = set()
    budget = [max_tokens]

    def take(line: str) -> bool:
        cost = count(line)
        if cost > budget[0]:
            return False
        budget[0] -= cost
        return True

    def show(entity_ids: list[str], with_entities: bool) -> list[str]:
        """Show these entities and their facts; return the neighbours they lead to."""
        neighbours: list[str] = []
        for entity_id in entity_ids:
            entity = graph.entities.get(entity_id)
            if entity is None:
                continue
            if with_entities and entity not in chosen_entities and take(entity_line(entity)):
                chosen_entities.append(entity)
            for relation in (r for r in current if entity_id in (r.subject_id, r.object_id)):
                line = relation.text()
                if relation.id in chosen_relations or line in seen_facts:
                    continue
                if not take(relation_line(relation)):
                    continue
                seen_facts.add(line)
                chosen_relations[relation.id] = relation
                for other in (relation.subject_id, relation.object_id):
                    if other is not None and other not in entity_ids:
                        neighbours.append(other)
        return list(dict.fromkeys(neighbours))

    near = show(first, True) + show(found, True)
    for _ in range(max(hops - 1, 0)):
        shown = {*first, *found}
        near = show([n for n in dict.fromkeys(near) if n not in shown], False)
    return Recalled(tuple(chosen_entities), tuple(chosen_relations.values()))
