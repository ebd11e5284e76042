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

from langchain_core.messages import BaseMessage, SystemMessage
from pydantic import Field

from memories.errors import InvalidInputError, LLMError
from memories.kernel.background import MemoryStatus, merged_batches
from memories.kernel.capabilities import Capabilities
from memories.kernel.conversation import UpdateMethod, bind_reply_tool, conversing
from memories.kernel.keys import input_text_for
from memories.kernel.steps import Steps, arun, run, step
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
from memories.long_term.stored import StoredDocumentMemory, TurnPolicy
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
    capabilities: ClassVar[Capabilities] = Capabilities(scope="namespace", deferred=True)
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
            _check_time(as_of)
            graph = yield step(self.store.recorded, self.namespace, as_of=as_of)
        return graph

    def entities(self, *, as_of: datetime | None = None) -> builtins.list[Entity]:
        """The entities that stand on their own (not merged into another), now or at ``as_of``."""
        return sorted(run(self._reading(as_of)).standing(), key=lambda e: e.name)

    async def aentities(self, *, as_of: datetime | None = None) -> builtins.list[Entity]:
        """Async :meth:`entities`."""
        return sorted((await arun(self._reading(as_of))).standing(), key=lambda e: e.name)

    def merges(self) -> builtins.list[Entity]:
        """The entities merged into another, each with ``merged_into`` and ``merge_reason``."""
        return _merged_entities(run(self._reading(None)))

    async def amerges(self) -> builtins.list[Entity]:
        """Async :meth:`merges`."""
        return _merged_entities(await arun(self._reading(None)))

    def entity(self, name: str, /) -> Entity | None:
        """The entity called ``name`` (its name or an alias, merges followed), or None."""
        return run(self._reading(None)).named(name)

    async def aentity(self, name: str, /) -> Entity | None:
        """Async :meth:`entity`."""
        return (await arun(self._reading(None))).named(name)

    def relations(self, *, as_of: datetime | None = None) -> builtins.list[Relation]:
        """The relations true now (or at ``as_of``), oldest first, with the turns behind them."""
        graph = self.store.recorded(self.namespace, as_of=as_of and _check_time(as_of))
        return _by_time(graph.current() if as_of is None else list(graph.relations.values()))

    async def arelations(self, *, as_of: datetime | None = None) -> builtins.list[Relation]:
        """Async :meth:`relations`."""
        graph = await self.store.arecorded(self.namespace, as_of=as_of and _check_time(as_of))
        return _by_time(graph.current() if as_of is None else list(graph.relations.values()))

    def history(self) -> builtins.list[Relation]:
        """The closed relations (contradicted or retracted), oldest first, with their turns."""
        graph = self.store.recorded(self.namespace)
        return _by_time([r for r in graph.relations.values() if r.invalid_at is not None])

    async def ahistory(self) -> builtins.list[Relation]:
        """Async :meth:`history`."""
        graph = await self.store.arecorded(self.namespace)
        return _by_time([r for r in graph.relations.values() if r.invalid_at is not None])

    def _recalling(self, text: str, as_of: datetime | None) -> Steps[Recalled]:
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

    def recall(self, text: str, /, *, as_of: datetime | None = None) -> Recalled:
        """The entities ``text`` names or is about, and their relations (``hops`` deep)."""
        return run(self._recalling(text, as_of))

    async def arecall(self, text: str, /, *, as_of: datetime | None = None) -> Recalled:
        """Async :meth:`recall`."""
        return await arun(self._recalling(text, as_of))

    def _showing(self, inputs: Mapping[str, Any]) -> Steps[str | builtins.list[BaseMessage]]:
        found = yield from self._recalling(input_text_for(self, inputs), None)
        text = found.text()
        if self.return_messages:
            return [SystemMessage(text)] if text else []
        return text

    def _committing(self, graph: Graph, plan: Plan, turns: Sequence[PendingTurn]) -> Steps[bool]:
        """One compare-and-set commit of the plan, the head, and the turns it folds in."""
        commits = plan.commits(turns)
        if commits:
            head = Change({"revision": graph.head + 1}, "graph", [], tuple(turns))
            commits.append((self.key, head, graph.head))
        written = yield step(
            self.store.commit_many,
            self.namespace,
            commits,
            drop_key=self.key,
            drop_ids=[t.id for t in turns],
        )
        return written is not None

    def apply(self, operations: Sequence[Mapping[str, Any]], /) -> GraphUpdate:
        """Apply operations now, all or none (references: entity names, or entity and relation ids).

        The operations are the model's (:mod:`memories.long_term.entity_graph.operations`):
        ``entity``, ``relate``, ``end``, ``merge``, ``unmerge``.

        Raises:
            InvalidInputError: an operation is invalid (every problem listed; nothing written).
        """
        return run(self._applying(operations))

    async def aapply(self, operations: Sequence[Mapping[str, Any]], /) -> GraphUpdate:
        """Async :meth:`apply`."""
        return await arun(self._applying(operations))

    def _applying(self, operations: Sequence[Mapping[str, Any]]) -> Steps[GraphUpdate]:
        if isinstance(operations, str | Mapping) or not isinstance(operations, Sequence):
            raise InvalidInputError(f"operations must be a list of dicts, got {operations!r:.80}.")
        for _ in range(_MAX_DIRECT_TRIES):
            graph = yield from self._reading(None)
            ids = {i: i for i in [*graph.entities, *graph.relations]}
            try:
                plan = self._planner(graph, ids, time.time()).apply(list(operations))
            except LLMError as exc:
                raise InvalidInputError(f"Nothing applied: {exc}.") from exc
            if (yield from self._committing(graph, plan, ())):
                return GraphUpdate("updated" if plan else "unchanged", changes=len(plan))
        raise InvalidInputError("The graph kept changing during the update; try again.")

    def export_records(self) -> builtins.list[dict[str, Any]]:
        """Every entity (merged ones too) and relation (ended ones too, with their turns), as
        ``memories export`` writes them; :meth:`import_records` takes them back."""
        return run(self._exporting())

    async def aexport_records(self) -> builtins.list[dict[str, Any]]:
        """Async :meth:`export_records`."""
        return await arun(self._exporting())

    def _exporting(self) -> Steps[builtins.list[dict[str, Any]]]:
        graph = yield from self._reading(None)
        recorded = yield step(self.store.recorded, self.namespace)
        return graph_records(graph, recorded)

    def import_records(self, records: Sequence[Mapping[str, Any]], /) -> int:
        """Write the exported entities and relations this graph lacks (or holds otherwise),
        under their ids, all or none; return how many were written (0 the second time).

        Raises:
            InvalidInputError: a record is not an entity or relation record (nothing written).
        """
        return run(self._importing(records))

    async def aimport_records(self, records: Sequence[Mapping[str, Any]], /) -> int:
        """Async :meth:`import_records`."""
        return await arun(self._importing(records))

    def _importing(self, records: Sequence[Mapping[str, Any]]) -> Steps[int]:
        wanted = checked(records)
        for _ in range(_MAX_DIRECT_TRIES):
            graph = yield from self._reading(None)
            recorded = yield step(self.store.recorded, self.namespace)
            commits = import_commits(graph, recorded, wanted)
            if not commits:
                return 0
            head = Change({"revision": graph.head + 1}, "graph", [])
            commits.append((self.key, head, graph.head))
            written = yield step(self.store.commit_many, self.namespace, commits, drop_key=self.key)
            if written is not None:
                return len({key for key, _, _ in commits[:-1]})
        raise InvalidInputError("The graph kept changing during the import; try again.")

    def merge(self, name: str, into: str, /, *, reason: str) -> GraphUpdate:
        """Make ``name`` the same entity as ``into`` (undone by :meth:`undo_merge`)."""
        return self.apply([{"op": "merge", "id": name, "into": into, "reason": reason}])

    async def amerge(self, name: str, into: str, /, *, reason: str) -> GraphUpdate:
        """Async :meth:`merge`."""
        return await self.aapply([{"op": "merge", "id": name, "into": into, "reason": reason}])

    def undo_merge(self, name: str, /) -> GraphUpdate:
        """Make the merged entity called ``name`` stand on its own again, its relations with it."""
        return self.apply([{"op": "unmerge", "id": name}])

    async def aundo_merge(self, name: str, /) -> GraphUpdate:
        """Async :meth:`undo_merge`."""
        return await self.aapply([{"op": "unmerge", "id": name}])

    def _planner(self, graph: Graph, aliases: Mapping[str, str], when: float) -> Planner:
        return Planner(graph, aliases, when, self.single_valued)

    def refresh(self) -> GraphUpdate:
        """Fold the queued turns in now (at most ``max_turns_per_update`` per model call)."""
        return run(self._refreshing())

    async def arefresh(self) -> GraphUpdate:
        """Async :meth:`refresh`."""
        return await arun(self._refreshing())

    def _refreshing(self) -> Steps[GraphUpdate]:
        total = GraphUpdate("idle")
        while True:
            batch = yield from self._folding_batch()
            total = merged_batches(total, batch)
            if batch.status in ("idle", "failed"):
                return total

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
            if (yield from self._committing(graph, plan, turns)):
                return GraphUpdate(
                    "updated" if plan else "unchanged", turns=len(turns), changes=len(plan)
                )
        return GraphUpdate("failed", error=f"the graph changed {_MAX_CONFLICTS} times meanwhile")

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

    def _clearing(self) -> Steps[None]:
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
            if (yield from self._committing(graph, plan, turns)):
                return
        raise InvalidInputError("The graph kept changing while it was cleared; try again.")

    def status(self) -> GraphStatus:
        """The queued turns, and the last failed update if none succeeded since."""
        return run(self._stating())

    async def astatus(self) -> GraphStatus:
        """Async :meth:`status`."""
        return await arun(self._stating())

    def _stating(self) -> Steps[GraphStatus]:
        _, shown = yield from self._standing()
        if self._caller is None:  # the rule-based extractor calls no model
            shown["model"] = None
        return GraphStatus(**shown)


def _check_time(when: Any) -> datetime:
    # Not the collection's rules.timestamp: importing the collection needs the chroma extra.
    if not isinstance(when, datetime) or when.tzinfo is None:
        raise InvalidInputError(
            f"as_of must be a timezone-aware datetime (datetime.now(UTC)), got {when!r:.80}."
        )
    return when


def _merged_entities(graph: Graph) -> builtins.list[Entity]:
    return sorted((e for e in graph.entities.values() if e.merged_into), key=lambda e: e.name)


def _by_time(relations: builtins.list[Relation]) -> builtins.list[Relation]:
    return sorted(relations, key=lambda r: (r.valid_at, r.text()))
