"""Changes to an entity graph as checked operations: the model's, the rule-based extractor's, yours.

The operations (``entity``, ``relate``, ``end``, ``merge``, ``unmerge``) are
those of docs/memories/entity-graph.md. :class:`Planner` applies them to a read
of the graph with no I/O and collects every problem; :class:`GraphSession`
feeds the problems of a model's reply back to it. A plan is taken whole or not at all.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

from memories.errors import LLMError
from memories.kernel.conversation import OperationsReply, operations_tool, proposed_items
from memories.kernel.messages import format_buffer
from memories.stores.documents import Change, PendingTurn
from memories.stores.entities.temporal_graph import ENTITY_PREFIX, RELATION_PREFIX, Graph, name_key

__all__ = ["GRAPH_TOOL", "GRAPH_TOOL_NAME", "GraphSession", "Plan", "Planner", "graph_prompt"]

GRAPH_TOOL_NAME = "update_graph"
_KINDS = ("entity", "relate", "end", "merge", "unmerge")
#: The tool a model with tool calling answers through.
GRAPH_TOOL: dict[str, Any] = operations_tool(
    GRAPH_TOOL_NAME,
    "Change the entity graph. Call with an empty list to change nothing.",
    {
        "type": "object",
        "properties": {
            "op": {"type": "string", "enum": list(_KINDS)},
            "id": {"type": "string", "description": "an alias: e1..., r1..."},
            "name": {"type": "string"},
            "type": {"type": "string"},
            "summary": {"type": "string"},
            "aliases": {"type": "array", "items": {"type": "string"}},
            "subject": {"type": "string"},
            "predicate": {"type": "string"},
            "object": {"type": "string"},
            "value": {"type": "string"},
            "replaces": {"type": "array", "items": {"type": "string"}},
            "into": {"type": "string"},
            "reason": {"type": "string"},
            "valid_at": {"type": "string", "description": "ISO date"},
        },
        "required": ["op"],
    },
)

_SYSTEM = """\
You keep a graph of the entities (people, places, things) in a conversation and the relations \
between them. You are shown the entities and current relations most related to the new turns, \
each under an alias (e1..., r1...), and the turns. Reply with operations:
- {{"op": "entity", "name": ..., "type": ..., "summary": ..., "aliases": [...]}} adds an entity \
or updates the one of that name; with "id": "e2" it renames or describes e2;
- {{"op": "relate", "subject": "e1" or a name, "predicate": "lives_in", "object": "e3" or a \
name}} adds a relation to an entity; use "value" instead of "object" for a plain value (a \
date, a colour); "replaces": ["r2"] closes the relations it contradicts;
- {{"op": "end", "id": "r2"}} when a relation stopped being true and nothing replaces it;
- {{"op": "merge", "id": "e4", "into": "e1", "reason": ...}} when two entities are the same.
Predicates are short snake_case verbs or nouns. Never repeat a relation that is shown. Record \
only what the turns state or clearly imply.{instructions}

{reply_format}"""

_TOOL_FORMAT = (
    f"Call {GRAPH_TOOL_NAME} with the operations; call it with an empty list when nothing changes."
)
_TEXT_FORMAT = (
    'Reply with only a JSON array of operations, for example [{"op": "entity", "name": "Ana", '
    '"type": "person"}, {"op": "relate", "subject": "Ana", "predicate": "lives_in", '
    '"object": "Lisbon"}]. Reply [] when nothing changes.'
)
_NOT_JSON = f"Your reply is not a JSON array of operations. {_TEXT_FORMAT}"


def graph_prompt(
    entities: Mapping[str, str],
    relations: Mapping[str, str],
    turns: Sequence[Sequence[BaseMessage]],
    *,
    instructions: str | None,
    tools: bool,
) -> list[BaseMessage]:
    """The first two messages of an update: the rules, then the aliased graph and the turns."""
    system = _SYSTEM.format(
        instructions=f"\n\n{instructions.strip()}" if instructions else "",
        reply_format=_TOOL_FORMAT if tools else _TEXT_FORMAT,
    )
    listed = "\n".join(f"{alias}: {text}" for alias, text in entities.items()) or "(none yet)"
    facts = "\n".join(f"{alias}: {text}" for alias, text in relations.items()) or "(none yet)"
    transcript = "\n---\n".join(format_buffer(list(turn), "Human", "AI") for turn in turns)
    body = f"Entities:\n{listed}\n\nRelations:\n{facts}\n\nNew conversation turns:\n{transcript}"
    return [SystemMessage(system), HumanMessage(body)]


@dataclass
class Plan:
    """The documents a list of operations changes, ready for one compare-and-set commit."""

    changed: dict[str, tuple[dict[str, Any] | None, str, int]] = field(default_factory=dict)
    """key -> (new document or None to clear it, kind of change, the version it was read at;
    0: new)."""

    def commits(self, turns: Sequence[PendingTurn]) -> list[tuple[str, Change, int]]:
        """The changes, each recording the turns that caused it."""
        return [
            (key, Change(document, kind, [], tuple(turns)), version)
            for key, (document, kind, version) in self.changed.items()
        ]

    def __len__(self) -> int:
        return len(self.changed)


class Planner:
    """Applies operations to a read of the graph, in order, collecting every problem.

    Args:
        graph: what the plan is made on.
        aliases: the references a proposer may use for shown entities and
            relations (``e1`` -> id); names of entities always work too.
        when: the time a new fact becomes true unless it says (Unix time).
        single_valued: predicates a subject has one of at a time: a new one
            closes the current one.
    """

    def __init__(
        self,
        graph: Graph,
        aliases: Mapping[str, str],
        when: float,
        single_valued: Collection[str] = (),
    ) -> None:
        self.graph = graph
        self.aliases = dict(aliases)
        self.when = when
        self.single_valued = {predicate_key(p) for p in single_valued}
        self.documents = {k: dict(v) for k, v in graph.documents.items()}
        self.versions = graph.versions()
        self.plan = Plan()
        self.problems: list[str] = []

    def _entity(self, entity_id: str) -> dict[str, Any]:
        return self.documents[ENTITY_PREFIX + entity_id]

    def _write(self, key: str, document: dict[str, Any], kind: str) -> None:
        self.documents[key] = document
        version = self.versions.get(key, 0)
        earlier = self.plan.changed.get(key)
        self.plan.changed[key] = (document, earlier[1] if earlier else kind, version)

    def _entity_ids(self) -> list[str]:
        return [
            k.removeprefix(ENTITY_PREFIX) for k in self.documents if k.startswith(ENTITY_PREFIX)
        ]

    def _canonical(self, entity_id: str) -> str:
        seen: set[str] = set()
        while entity_id not in seen and self.documents.get(ENTITY_PREFIX + entity_id, {}).get(
            "merged_into"
        ):
            seen.add(entity_id)
            entity_id = self._entity(entity_id)["merged_into"]
        return entity_id

    def _named(self, name: str) -> str | None:
        wanted = name_key(name)
        for entity_id in self._entity_ids():
            document = self._entity(entity_id)
            names = [document.get("name") or "", *(document.get("aliases") or ())]
            if wanted in (name_key(n) for n in names):
                return self._canonical(entity_id)
        return None

    def _reference(self, ref: Any, what: str, *, create: bool) -> str:
        """The entity ``ref`` names (an alias or a name), created when new and ``create``."""
        if not isinstance(ref, str) or not ref.strip():
            raise LLMError(f"{what} must name an entity (an alias such as e1, or a name)")
        target = self.aliases.get(ref.strip())
        if target is not None and ENTITY_PREFIX + target in self.documents:
            return self._canonical(target)
        found = self._named(ref)
        if found is not None:
            return found
        if not create:
            known = ", ".join(
                a for a, i in self.aliases.items() if ENTITY_PREFIX + i in self.documents
            )
            raise LLMError(f"{what} {ref!r} is not a shown entity ({known or 'none'})")
        return self._create(ref.strip(), None, "", [])

    def _relation_ref(self, ref: Any, what: str) -> str:
        target = self.aliases.get(ref) if isinstance(ref, str) else None
        if target is None or RELATION_PREFIX + target not in self.documents:
            known = [a for a, i in self.aliases.items() if RELATION_PREFIX + i in self.documents]
            raise LLMError(f"{what} {ref!r} is not a shown relation ({', '.join(known) or 'none'})")
        return target

    def _create(self, name: str, kind: str | None, summary: str, aliases: list[str]) -> str:
        entity_id = uuid.uuid4().hex[:16]
        document = {"name": name, "type": kind, "summary": summary, "aliases": aliases}
        self._write(ENTITY_PREFIX + entity_id, document, "insert")
        return entity_id

    def apply(self, items: Sequence[Any], *, skip_bad: bool = False) -> Plan:
        """The plan of ``items``, or LLMError listing every problem (nothing is planned then).

        With ``skip_bad`` (the rule-based extractor's guesses), an operation
        with a problem is left out, as if it had not been proposed.
        """
        for index, item in enumerate(items):
            documents, changed = dict(self.documents), dict(self.plan.changed)
            try:
                self._apply(item)
            except LLMError as exc:
                if skip_bad:
                    self.documents, self.plan.changed = documents, changed
                    continue
                self.problems.append(f"operations[{index}]: {exc}")
        if self.problems:
            raise LLMError("; ".join(self.problems))
        return self.plan

    def _apply(self, item: Any) -> None:
        if not isinstance(item, dict):
            raise LLMError("is not an object")
        kind = item.get("op")
        if kind not in _KINDS:
            raise LLMError(f"has op {kind!r}; use one of {', '.join(_KINDS)}")
        handlers = {
            "entity": self._entity_op,
            "relate": self._relate,
            "end": self._end,
            "merge": self._merge,
            "unmerge": self._unmerge,
        }
        handlers[kind](item)

    def _entity_op(self, item: Mapping[str, Any]) -> None:
        name = _text(item.get("name"), "name", required=item.get("id") is None)
        summary = _text(item.get("summary"), "summary")
        kind = _text(item.get("type"), "type")
        aliases = item.get("aliases") or []
        if not isinstance(aliases, list) or not all(
            isinstance(a, str) and a.strip() for a in aliases
        ):
            raise LLMError(f"aliases must be a list of names, got {aliases!r:.80}")
        if item.get("id") is not None:
            entity_id = self._reference(item["id"], "id", create=False)
        else:
            found = self._named(name or "")
            if found is None:
                self._create(name or "", kind, summary or "", [a.strip() for a in aliases])
                return
            entity_id = found
        document = dict(self._entity(entity_id))
        names = [document["name"], *document.get("aliases", [])]
        if name and name_key(name) != name_key(document["name"]):
            other = self._named(name)
            if other is not None and other != entity_id:
                raise LLMError(f"{name!r} is another entity's name; merge the two instead")
            if name_key(name) not in map(name_key, names):
                names.append(name)
            document["name"] = name
        for alias in aliases:
            other = self._named(alias)
            if other is not None and other != entity_id:
                raise LLMError(f"the alias {alias!r} names another entity; merge the two instead")
            if name_key(alias) not in map(name_key, names):
                names.append(alias.strip())
        document["aliases"] = [n for n in names if name_key(n) != name_key(document["name"])]
        if summary:
            document["summary"] = summary
        if kind:
            document["type"] = kind
        if document != self._entity(entity_id):
            self._write(ENTITY_PREFIX + entity_id, document, "update")

    def _relate(self, item: Mapping[str, Any]) -> None:
        predicate = predicate_key(_text(item.get("predicate"), "predicate", required=True) or "")
        if not predicate or len(predicate) > 60:
            raise LLMError(f"predicate {item.get('predicate')!r} must be a short word or phrase")
        has_object, has_value = item.get("object") is not None, item.get("value") is not None
        if has_object == has_value:
            raise LLMError("give exactly one of object (an entity) or value")
        replaces = item.get("replaces") or []
        every = replaces == "all"
        if isinstance(replaces, str) and not every:
            replaces = [replaces]
        if not every and not isinstance(replaces, list):
            raise LLMError(f"replaces must be a list of relation aliases, got {replaces!r:.80}")
        ended = [] if every else [self._relation_ref(ref, "replaces") for ref in replaces]
        since = _time(item.get("valid_at"), self.when)
        subject = self._reference(item.get("subject"), "subject", create=True)
        target = self._reference(item["object"], "object", create=True) if has_object else None
        value = None if has_object else _text(item.get("value"), "value", required=True)
        same = self._same(subject, predicate)
        if self._holding(same, target, value):
            return  # already true: nothing to add
        if every or predicate in self.single_valued:
            ended += [key.removeprefix(RELATION_PREFIX) for key in same]
        for relation_id in dict.fromkeys(ended):
            self._close(relation_id, since, "contradicted")
        document = {
            "subject": subject,
            "predicate": predicate,
            "object": target,
            "value": value,
            "valid_at": since,
            "invalid_at": None,
            "ended": None,
        }
        self._write(RELATION_PREFIX + uuid.uuid4().hex[:16], document, "insert")

    def _same(self, subject: str, predicate: str) -> list[str]:
        """The keys of the current relations of ``subject`` by ``predicate``."""
        return [
            key
            for key, document in self._current()
            if self._canonical(document["subject"]) == subject
            and document["predicate"] == predicate
        ]

    def _holding(self, keys: Sequence[str], target: str | None, value: str | None) -> str | None:
        """The key among ``keys`` of the relation to ``target`` (or ``value``), or None."""
        for key in keys:
            held = self.documents[key].get("object")
            if held is not None and target is not None and self._canonical(held) == target:
                return key
            same_value = name_key(self.documents[key].get("value") or "") == name_key(value or "")
            if held is None and target is None and same_value:
                return key
        return None

    def _current(self) -> list[tuple[str, dict[str, Any]]]:
        return [
            (key, document)
            for key, document in self.documents.items()
            if key.startswith(RELATION_PREFIX) and document.get("invalid_at") is None
        ]

    def _close(self, relation_id: str, at: float, why: str) -> None:
        key = RELATION_PREFIX + relation_id
        document = dict(self.documents[key])
        if document.get("invalid_at") is not None:
            raise LLMError(f"the relation {relation_id!r} has ended already")
        document.update(invalid_at=max(at, float(document["valid_at"])), ended=why)
        self._write(key, document, "end")

    def _end(self, item: Mapping[str, Any]) -> None:
        at = _time(item.get("valid_at"), self.when)
        if item.get("id") is not None:
            self._close(self._relation_ref(item.get("id"), "id"), at, "retracted")
            return
        predicate = predicate_key(_text(item.get("predicate"), "predicate", required=True) or "")
        subject = self._reference(item.get("subject"), "subject", create=False)
        target = value = None
        if item.get("object") is not None:
            target = self._named(str(item["object"]))
            value = None if target is not None else str(item["object"])
        else:
            value = _text(item.get("value"), "value", required=True)
        found = self._holding(self._same(subject, predicate), target, value)
        if found is None:
            raise LLMError(
                f"no current relation {item.get('subject')!r} {predicate} "
                f"{item.get('object') or value!r} to end"
            )
        self._close(found.removeprefix(RELATION_PREFIX), at, "retracted")

    def _merge(self, item: Mapping[str, Any]) -> None:
        source = self._reference(item.get("id"), "id", create=False)
        target = self._reference(item.get("into"), "into", create=False)
        reason = _text(item.get("reason"), "reason", required=True)
        if source == target:
            raise LLMError(f"{item.get('id')!r} and {item.get('into')!r} are one entity already")
        document = dict(self._entity(source), merged_into=target, merge_reason=reason)
        self._write(ENTITY_PREFIX + source, document, "merge")

    def _unmerge(self, item: Mapping[str, Any]) -> None:
        ref = item.get("id")
        entity_id = self.aliases.get(ref) if isinstance(ref, str) else None
        if entity_id is None:  # a merged entity's own name, not the one it stands for now
            entity_id = self._merged_named(str(ref or ""))
        if entity_id is None or not self._entity(entity_id).get("merged_into"):
            raise LLMError(f"{ref!r} is not a merged entity")
        document = dict(self._entity(entity_id), merged_into=None, merge_reason=None)
        self._write(ENTITY_PREFIX + entity_id, document, "unmerge")

    def _merged_named(self, name: str) -> str | None:
        """The merged entity whose own name is ``name``."""
        wanted = name_key(name)
        for entity_id in self._entity_ids():
            document = self._entity(entity_id)
            if document.get("merged_into") and name_key(document.get("name") or "") == wanted:
                return entity_id
        return None


def predicate_key(predicate: str) -> str:
    """A predicate as stored: lower case, words joined by ``_``."""
    return "_".join(re.sub(r"[^\w\s]", " ", predicate.casefold()).split())


def _text(value: Any, what: str, *, required: bool = False) -> str | None:
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.strip() or len(value) > 2_000:
        raise LLMError(
            f"{what} must be a non-empty string (at most 2,000 characters), got {value!r:.80}"
        )
    return value.strip()


def _time(value: Any, default: float) -> float:
    if value is None:
        return default
    try:
        when = datetime.fromisoformat(str(value))
    except ValueError as exc:
        raise LLMError(
            f"valid_at must be an ISO date such as 2024-05-01, got {value!r:.80}"
        ) from exc
    return (when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp()


@dataclass
class GraphSession(OperationsReply[Plan]):
    """One update by a model: asks for operations, plans them all, sends problems back (bounded).

    Args:
        opening: the first messages (:func:`graph_prompt`).
        max_retries: how many times a bad reply is sent back.
        tools: whether the model answers through :data:`GRAPH_TOOL`.
        planner: makes a fresh :class:`Planner` for each reply.
    """

    planner: Any

    tool_name = GRAPH_TOOL_NAME

    def _accept(self, reply: BaseMessage) -> Plan:
        return self.planner().apply(proposed_items(reply, GRAPH_TOOL_NAME, _NOT_JSON))

    def outcome(self) -> tuple[Plan | None, tuple[str, ...], str | None]:
        """The plan (None after a failure), every raw reply, and the error."""
        return self.accepted, tuple(self._raw), self._error
