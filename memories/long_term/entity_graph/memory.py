"""``EntityMemory``: a temporal graph of entities and typed relations, kept by a model.

Turns are queued durably; an update is checked whole and committed with the
turns it folds in by one compare-and-set transaction, recomputed from a fresh
read when another writer got in first. A failed update applies nothing and
keeps the turns queued.
"""

from __future__ import annotations

import builtins
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar, Literal

from langchain_core.messages import SystemMessage
from pydantic import Field

from memories.errors import InvalidInputError, LLMError
from memories.kernel.background import MemoryStatus
from memories.kernel.capabilities import Capabilities
from memories.kernel.conversation import UpdateMethod, bind_reply_tool, conversing
from memories.kernel.keys import input_text_for
from memories.kernel.steps import Steps, step, twins
from memories.kernel.times import aware
from memories.long_term.entity_graph.exchange import checked, graph_records, import_commits
from memories.long_term.entity_graph.extractor import extract
from memories.long_term.entity_graph.operations import (
    GRAPH_TOOL,
    GRAPH_TOOL_NAME,
    GraphSession,
    Plan,
    Planner,
    graph_prompt,
)
from memories.long_term.entity_graph.recall import Recalled, entity_line, recall, relation_line
from memories.long_term.stored import StoredDocumentMemory, TurnPolicy, batches_until
from memories.stores.documents import Change, PendingTurn
from memories.stores.entities.temporal_graph import (
    ENTITY_PREFIX,
    Entity,
    EntityGraphStore,
    Graph,
    Relation,
)

__all__ = ["EntityMemory", "GraphStatus", "GraphUpdate"]


# How many times an update is recomputed when another writer changed the graph first.
_MAX_CONFLICTS = 5
# A direct write retries longer: it has no model call to repeat.
_MAX_DIRECT_TRIES = 50


@dataclass(frozen=True)
class GraphUpdate:
    """What :meth:`EntityMemory.refresh` or :meth:`EntityMemory.apply` did."""

    status: Literal["updated", "unchanged", "failed", "idle"]
    """``updated``: the graph changed; ``unchanged``: nothing to change; ``failed``:
    recorded in ``status()``, the turns kept; ``idle``: nothing queued."""
    turns: int = 0
    """How many queued turns were folded in."""
    changes: int = 0
    """How many entities and relations were written."""
    error: str | None = None
    """Why it failed."""


@dataclass(frozen=True)
class GraphStatus(MemoryStatus):
    """Where an entity graph stands: ``pending`` counts the turns not folded in yet."""


class EntityMemory(StoredDocumentMemory):
    """Entities and the typed relations between them, each fact with the time it held.

    Args:
        llm: the model that proposes the changes (a LangChain model or
            ``"provider:model"``). Without one, the rule-based extractor
            (:mod:`memories.long_term.entity_graph.extractor`) proposes them.
        user_name: the entity the user is (``I``, ``my`` in their turns).
        single_valued: predicates a subject holds one of at a time (a new
            ``lives_in`` closes the current one even if the model does not say).
        k: how many entities a search of summaries adds to those an input names.
        hops: 1 shows the named entities' relations; 2 adds their neighbours'.
        max_tokens: the most tokens the loaded text takes.
        related_k: how many entities (with their relations) the model is shown per update.
        update_method: ``"auto"``, ``"tool"`` or ``"json"``.

    The store's, the policy's and the model's arguments (``namespace``,
    ``url``, ``policy``, ``every_n``, ``instructions``, ``max_retries``,
    ``memory_key``...) are :class:`~memories.long_term.stored.StoredDocumentMemory`'s.
    """

    config_type: ClassVar[str] = "entity"
    store_owner: ClassVar[str | None] = "entity_graph"
    capabilities: ClassVar[Capabilities] = Capabilities(
        scope="namespace", exportable=True, deferred=True
    )
    store_class: ClassVar[type[EntityGraphStore]] = EntityGraphStore

    key: str = Field(default="entity_graph", min_length=1)
    policy: TurnPolicy = "turn"
    user_name: str = Field(default="User", min_length=1)
    single_valued: list[str] = Field(default_factory=list)
    k: int = Field(default=5, ge=0)
    hops: int = Field(default=2, ge=1, le=3)
    max_tokens: int = Field(default=600, gt=0)
    related_k: int = Field(default=20, ge=1)
    update_method: UpdateMethod = "auto"
    memory_key: str = Field(default="entities", min_length=1)

    @property
    def store(self) -> EntityGraphStore:
        """The SQL store the graph (every version, the queued turns) lives in."""
        assert isinstance(self._store, EntityGraphStore)
        return self._store

    def _reading(self, as_of: datetime | None) -> Steps[Graph]:
        if as_of is None:
            graph: Graph = yield step(self.store.graph, self.namespace, self.key)
        else:
            graph = yield step(self.store.recorded, self.namespace, as_of=aware(as_of))
        return graph

    def _entities_steps(self, *, as_of: datetime | None = None) -> Steps[builtins.list[Entity]]:
        """The entities that stand on their own (not merged into another), now or at ``as_of``."""
        graph = yield from self._reading(as_of)
        return sorted(graph.standing(), key=lambda e: e.name)

    entities, aentities = twins(_entities_steps)

    def _merges_steps(self) -> Steps[builtins.list[Entity]]:
        """The entities merged into another, each with ``merged_into`` and ``merge_reason``."""
        graph = yield from self._reading(None)
        return sorted((e for e in graph.entities.values() if e.merged_into), key=lambda e: e.name)

    merges, amerges = twins(_merges_steps)

    def _entity_steps(self, name: str, /) -> Steps[Entity | None]:
        """The entity called ``name`` (its name or an alias, merges followed), or None."""
        graph = yield from self._reading(None)
        return graph.named(name)

    entity, aentity = twins(_entity_steps)

    def _relations_steps(self, *, as_of: datetime | None = None) -> Steps[builtins.list[Relation]]:
        """The relations true now (or at ``as_of``), oldest first, with the turns behind them."""
        graph = yield step(self.store.recorded, self.namespace, as_of=as_of and aware(as_of))
        return _by_time(graph.current() if as_of is None else list(graph.relations.values()))

    relations, arelations = twins(_relations_steps)

    def _history_steps(self) -> Steps[builtins.list[Relation]]:
        """The closed relations (contradicted or retracted), oldest first, with their turns."""
        graph = yield step(self.store.recorded, self.namespace)
        return _by_time([r for r in graph.relations.values() if r.invalid_at is not None])

    history, ahistory = twins(_history_steps)

    def _recall_steps(self, text: str, /, *, as_of: datetime | None = None) -> Steps[Recalled]:
        """The entities ``text`` names or is about, and their relations (``hops`` deep)."""
        graph = yield from self._reading(as_of)
        return recall(
            graph,
            text,
            user=self.user_name,
            k=self.k,
            hops=self.hops,
            max_tokens=self.max_tokens,
            count=lambda line: self._counter([SystemMessage(line)]),
        )

    recall, arecall = twins(_recall_steps)

    def _showing(self, inputs: Mapping[str, Any]) -> Steps[str]:
        found = yield from self._recall_steps(input_text_for(self, inputs))
        return found.text()

    def _committing(
        self, graph: Graph, commits: list[tuple[str, Change, int]], turns: Sequence[PendingTurn]
    ) -> Steps[bool]:
        """One compare-and-set commit of ``commits``, the head, and the turns they fold in."""
        if commits:
            head = Change({"revision": graph.head + 1}, "graph", [], tuple(turns))
            commits = [*commits, (self.key, head, graph.head)]
        return (yield from self._committing_many(commits, turns)) is not None

    def _apply_steps(self, operations: Sequence[Mapping[str, Any]], /) -> Steps[GraphUpdate]:
        """Apply operations now, all or none (references: entity names, or entity and relation ids).

        The operations are the model's (:mod:`memories.long_term.entity_graph.operations`):
        ``entity``, ``relate``, ``end``, ``merge``, ``unmerge``.

        Raises:
            InvalidInputError: an operation is invalid (every problem listed; nothing written).
        """
        if isinstance(operations, str | Mapping) or not isinstance(operations, Sequence):
            raise InvalidInputError(f"operations must be a list of dicts, got {operations!r:.80}.")
        for _ in range(_MAX_DIRECT_TRIES):
            graph = yield from self._reading(None)
            ids = {i: i for i in [*graph.entities, *graph.relations]}
            try:
                plan = self._planner(graph, ids, time.time()).apply(list(operations))
            except LLMError as exc:
                raise InvalidInputError(f"Nothing applied: {exc}.") from exc
            if (yield from self._committing(graph, plan.commits(()), ())):
                return GraphUpdate("updated" if plan else "unchanged", changes=len(plan))
        raise InvalidInputError("The graph kept changing during the update; try again.")

    apply, aapply = twins(_apply_steps)

    def _export_records_steps(self) -> Steps[builtins.list[dict[str, Any]]]:
        """Every entity (merged ones too) and relation (ended ones too, with their turns), as
        ``memories export`` writes them; :meth:`import_records` takes them back."""
        graph = yield from self._reading(None)
        recorded = yield step(self.store.recorded, self.namespace)
        return graph_records(graph, recorded)

    export_records, aexport_records = twins(_export_records_steps)

    def _import_records_steps(self, records: Sequence[Mapping[str, Any]], /) -> Steps[int]:
        """Write the exported entities and relations this graph lacks (or holds otherwise),
        under their ids, all or none; return how many were written (0 the second time).

        Raises:
            InvalidInputError: a record is not an entity or relation record (nothing written).
        """
        wanted = checked(records)
        for _ in range(_MAX_DIRECT_TRIES):
            graph = yield from self._reading(None)
            recorded = yield step(self.store.recorded, self.namespace)
            commits = import_commits(graph, recorded, wanted)
            if not commits:
                return 0
            if (yield from self._committing(graph, commits, ())):
                return len({key for key, _, _ in commits})
        raise InvalidInputError("The graph kept changing during the import; try again.")

    import_records, aimport_records = twins(_import_records_steps)

    def _merge_steps(self, name: str, into: str, /, *, reason: str) -> Steps[GraphUpdate]:
        """Make ``name`` the same entity as ``into`` (undone by :meth:`undo_merge`)."""
        operation = {"op": "merge", "id": name, "into": into, "reason": reason}
        return (yield from self._apply_steps([operation]))

    merge, amerge = twins(_merge_steps)

    def _undo_merge_steps(self, name: str, /) -> Steps[GraphUpdate]:
        """Make the merged entity called ``name`` stand on its own again, its relations with it."""
        return (yield from self._apply_steps([{"op": "unmerge", "id": name}]))

    undo_merge, aundo_merge = twins(_undo_merge_steps)

    def _planner(self, graph: Graph, aliases: Mapping[str, str], when: float) -> Planner:
        return Planner(graph, aliases, when, self.single_valued)

    def _refresh_steps(self) -> Steps[GraphUpdate]:
        """Fold the queued turns in now (at most ``max_turns_per_update`` per model call)."""
        return (yield from batches_until(self._folding_batch, GraphUpdate("idle")))

    refresh, arefresh = twins(_refresh_steps)

    def _folding_batch(self) -> Steps[GraphUpdate]:
        for _ in range(_MAX_CONFLICTS):
            turns = yield step(
                self.store.pending, self.namespace, self.key, limit=self.max_turns_per_update
            )
            if not turns:
                return GraphUpdate("idle")
            graph = yield from self._reading(None)
            when = max(t.created_at for t in turns)
            if self._caller is None:
                names = {e.id: e.id for e in graph.entities.values()}
                operations = extract([t.messages for t in turns], graph, self.user_name)
                plan: Plan | None = self._planner(graph, names, when).apply(
                    operations, skip_bad=True
                )
            else:
                session, caller, model = self._session(graph, turns, when)
                plan, raw, error = yield from conversing(session, caller, model)
                if plan is None:
                    yield from self._failing(turns, error or "", raw)
                    return GraphUpdate("failed", error=error)
            assert plan is not None
            if (yield from self._committing(graph, plan.commits(turns), turns)):
                return GraphUpdate(
                    "updated" if plan else "unchanged", turns=len(turns), changes=len(plan)
                )
        error = f"the graph changed {_MAX_CONFLICTS} times meanwhile"
        yield from self._failing(turns, error, [])  # its turns stay queued
        return GraphUpdate("failed", error=error)

    def _session(
        self, graph: Graph, turns: Sequence[PendingTurn], when: float
    ) -> tuple[GraphSession, Any, Any]:
        assert self._caller is not None
        model, tools = bind_reply_tool(
            self._caller.model, GRAPH_TOOL, GRAPH_TOOL_NAME, self.update_method
        )
        text = "\n".join(str(m.text) for t in turns for m in t.messages)
        shown = recall(
            graph,
            text,
            user=self.user_name,
            k=self.related_k,
            hops=1,
            max_tokens=10**9,
            count=len,
        )
        entities = {f"e{i + 1}": e for i, e in enumerate(shown.entities)}
        relations = {f"r{i + 1}": r for i, r in enumerate(shown.relations)}
        opening = graph_prompt(
            {alias: entity_line(e)[2:] for alias, e in entities.items()},
            {alias: relation_line(r)[2:] for alias, r in relations.items()},
            [t.messages for t in turns],
            instructions=self.instructions,
            tools=tools,
        )
        aliases = {alias: e.id for alias, e in entities.items()}
        aliases.update((alias, r.id) for alias, r in relations.items())
        session = GraphSession(
            opening, self.max_retries, tools, lambda: self._planner(graph, aliases, when)
        )
        return session, self._caller, model

    def _clear_steps(self) -> Steps[None]:
        """End every current relation, clear every entity, drop the queued turns.

        The history keeps the relations (ended) and every version of the entities.
        """
        if self._in_background:
            self._background.cancel()
        for _ in range(_MAX_DIRECT_TRIES):
            graph = yield from self._reading(None)
            turns = yield step(self.store.pending, self.namespace, self.key)
            ends = [{"op": "end", "id": r.id} for r in graph.current()]
            ids = {r.id: r.id for r in graph.current()}
            plan = self._planner(graph, ids, time.time()).apply(ends)
            for entity in graph.entities.values():
                plan.changed[ENTITY_PREFIX + entity.id] = (None, "clear", entity.version)
            if (yield from self._committing(graph, plan.commits(turns), turns)):
                return
        raise InvalidInputError("The graph kept changing while it was cleared; try again.")

    def _status_steps(self) -> Steps[GraphStatus]:
        """The queued turns, and the last failed update if none succeeded since."""
        _, shown = yield from self._standing()
        return GraphStatus(**shown)

    status, astatus = twins(_status_steps)


def _by_time(relations: builtins.list[Relation]) -> builtins.list[Relation]:
    return sorted(relations, key=lambda r: (r.valid_at, r.text()))
