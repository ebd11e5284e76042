"""Memory tools for agents: the model saves and searches memories in the hot path.

:func:`memory_tools` (a collection memory, with langmem's argument names),
:func:`profile_tool` and :func:`read_profile_tool` (a profile) and
:func:`entity_tools` (an entity, knowledge-graph or entity graph memory) work in
``create_agent`` or any tool-calling loop. The model never chooses whose memories: a
namespace's ``{name}`` labels are filled from the run's ``configurable`` values (one missing
is an error, never a shared fallback), a session's from ``configurable.thread_id``. Errors go
back to the model as the tool's answer (``"Error: ..."``); every argument is bounded
(``MAX_*``) and checked before anything is written.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar

from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, StructuredTool, ToolException

from memories.core.base import BaseMemory
from memories.core.config import filled_namespace
from memories.core.langchain import LangChainBaseMemory
from memories.errors import MemoriesError
from memories.faces.runnable import MemoryFactory, SessionMemories, close_dropped
from memories.kernel.lru import Built
from memories.kernel.namespaces import in_namespace
from memories.stores.entities.triples import KnowledgeTriple

if TYPE_CHECKING:
    from memories.long_term.entity_graph import EntityMemory

__all__ = [
    "MAX_CONTENT",
    "MAX_LIMIT",
    "MAX_NAME",
    "MAX_OFFSET",
    "MAX_OPERATIONS",
    "MAX_QUERY",
    "entity_tools",
    "memory_tools",
    "profile_tool",
    "read_profile_tool",
]

#: The most memories one ``search_memory`` call returns.
MAX_LIMIT = 50
#: How deep ``search_memory`` pages (``offset``).
MAX_OFFSET = 1_000
#: The longest ``search_memory`` query, in characters.
MAX_QUERY = 2_000
#: The longest memory ``manage_memory`` saves, and the longest profile patch (as JSON), in
#: characters: a memory is a fact about the user, not a document.
MAX_CONTENT = 10_000
#: The most operations one ``update_profile`` call applies.
MAX_OPERATIONS = 100
#: The longest entity name, or part of a relation, ``manage_entity`` and ``manage_relation``
#: write (the SQL stores' columns hold 512).
MAX_NAME = 500


M = TypeVar("M", bound=BaseMemory)

#: Namespaces whose memories a tool keeps built (a process serving many users stays bounded).
_KEPT_NAMESPACES = 256


class _PerRun(Generic[M]):
    """The memory a run's tools use: ``template`` in the namespace the run's config fills.

    One memory per filled namespace is built (:func:`~memories.kernel.namespaces.in_namespace`)
    and kept for later runs, those of the :data:`_KEPT_NAMESPACES` most recent namespaces:
    past that the least recent is closed (its deferred work written) and built again when used.
    """

    def __init__(self, template: M) -> None:
        self.template = template
        self._made: Built[tuple[str, ...], M] = Built(_KEPT_NAMESPACES, close=close_dropped)

    def memory(self, config: RunnableConfig | None) -> M:
        """The run's memory.

        Raises:
            ToolException: a templated label's field is missing from ``configurable``, or no label.
        """
        namespace: tuple[str, ...] = self.template.namespace  # type: ignore[attr-defined]
        with _told_to_the_model():
            key = filled_namespace(namespace, (config or {}).get("configurable") or {})
        if key == namespace:
            return self.template
        # A dropped memory is closed; one a run still holds stays usable, working inline.
        return self._made.built(key, partial(in_namespace, self.template, key))


def _checked(memory: Any, kind: type[M], function: str) -> M:
    """``memory``, which ``function`` takes only as a ``kind``."""
    if not isinstance(memory, kind):
        raise TypeError(f"{function}() takes a {kind.__name__}, got {type(memory).__name__}.")
    return memory


def _tools(*functions: Callable[..., str]) -> list[BaseTool]:
    """Each function as a tool whose errors go back to the model, as ``"Error: ..."``."""
    return [
        StructuredTool.from_function(f, handle_tool_error=lambda error: f"Error: {error}")
        for f in functions
    ]


def _in_range(value: int, what: str, most: int, *, least: int = 1) -> None:
    if not least <= value <= most:
        raise ToolException(f"{what} must be between {least} and {most}, got {value}.")


def _bounded(most: int, /, **texts: str | None) -> None:
    """Refuse a text over ``most`` characters, by its name (None: not given)."""
    for what, text in texts.items():
        if text is not None and len(text) > most:
            raise ToolException(f"{what} is {len(text):,} characters; at most {most:,}.")


@contextlib.contextmanager
def _told_to_the_model() -> Iterator[None]:
    """Library errors become the tool's answer: the model reads them and can fix its call."""
    try:
        yield
    except MemoriesError as exc:
        raise ToolException(str(exc)) from exc


def memory_tools(memory: Any, /) -> list[BaseTool]:
    """``manage_memory`` and ``search_memory`` over a collection memory, in each run's namespace."""
    from memories.long_term.collection import CollectionMemory

    per_run = _PerRun(_checked(memory, CollectionMemory, "memory_tools"))

    def manage_memory(
        content: str | None = None,
        action: Literal["create", "update", "delete"] = "create",
        *,
        id: str | None = None,
        config: RunnableConfig,
    ) -> str:
        """Create, update or delete a memory that persists across conversations.

        Save what the user tells you about themselves, their preferences and
        their plans; update a memory when it changes; delete it when it is no
        longer true. Give the id (from search_memory) to update or delete.
        """
        target = per_run.memory(config)
        _bounded(MAX_CONTENT, content=content)
        with _told_to_the_model():
            if action == "create":
                if not content:
                    raise ToolException("create needs content.")
                found = target.duplicate_of(content)
                if found is not None:
                    return f"Already remembered as memory {found.id}: {found.content}"
                return f"created memory {target.put(content)}"
            if not id:
                raise ToolException(f"{action} needs the memory's id (search_memory gives it).")
            if action == "update":
                if not content:
                    raise ToolException("update needs the new content.")
                return f"updated memory {target.update(id, content).id}"
            target.delete(id)
            return f"deleted memory {id}"

    def search_memory(
        query: str,
        limit: int = 10,
        offset: int = 0,
        *,
        config: RunnableConfig,
    ) -> str:
        """Search your long-term memories about the user; returns them with their ids."""
        target = per_run.memory(config)
        _in_range(limit, "limit", MAX_LIMIT)
        _in_range(offset, "offset", MAX_OFFSET, least=0)
        _bounded(MAX_QUERY, query=query)
        with _told_to_the_model():
            found = target.search(query, k=limit + offset)[offset:]
        return json.dumps(
            [
                {"id": r.id, "content": r.content, "updated_at": r.updated_at.isoformat()}
                for r in found
            ],
            ensure_ascii=False,
        )

    return _tools(manage_memory, search_memory)


def profile_tool(profile: Any, /) -> BaseTool:
    """``update_profile``: the model edits a :class:`~memories.ProfileMemory` with a JSON patch."""
    from memories.long_term.profile import ProfileMemory

    per_run = _PerRun(_checked(profile, ProfileMemory, "profile_tool"))

    def update_profile(operations: Sequence[dict[str, Any]], *, config: RunnableConfig) -> str:
        """Change the user's profile with RFC 6902 JSON Patch operations.

        For example [{"op": "replace", "path": "/city", "value": "Berlin"}].
        Returns the profile as it now stands.
        """
        target = per_run.memory(config)
        if len(operations) > MAX_OPERATIONS:
            raise ToolException(
                f"{len(operations)} operations in one patch; at most {MAX_OPERATIONS}."
            )
        _bounded(MAX_CONTENT, **{"the patch": json.dumps(list(operations), default=str)})
        with _told_to_the_model():
            target.update(list(operations))
            return json.dumps(target.get(), ensure_ascii=False)

    return _tools(update_profile)[0]


def read_profile_tool(profile: Any, /) -> BaseTool:
    """``read_profile``: the model reads a :class:`~memories.ProfileMemory`'s document."""
    from memories.long_term.profile import ProfileMemory

    per_run = _PerRun(_checked(profile, ProfileMemory, "read_profile_tool"))

    def read_profile(*, config: RunnableConfig) -> str:
        """The user's profile as it now stands, a JSON document ({} when nothing is known).

        Read it before update_profile, to patch the paths it has.
        """
        target = per_run.memory(config)
        with _told_to_the_model():
            return json.dumps(target.get() or {}, ensure_ascii=False)

    return _tools(read_profile)[0]


def entity_tools(
    memory: LangChainBaseMemory | MemoryFactory,
    /,
    *,
    kind: Literal["entity", "kg"] | None = None,
    session_key: str = "thread_id",
) -> list[BaseTool]:
    """Tools that let the model keep an entity or knowledge-graph memory's knowledge.

    ``manage_entity`` and ``search_entities`` over a
    :class:`~memories.ConversationEntityMemory`; ``manage_relation`` and
    ``entity_knowledge`` over a :class:`~memories.ConversationKGMemory`;
    ``manage_entity``, ``manage_relation`` and ``search_entities`` over an
    :class:`~memories.EntityMemory` (each call applied whole or not at all).

    Args:
        memory: the memory, or a factory ``session -> memory`` called once per
            session with the run's ``configurable[session_key]``.
        kind: which memory a factory makes (``"entity"`` or ``"kg"``); a
            memory given says it itself.
        session_key: the ``configurable`` field naming the session.
    """
    from memories.long_term.entities import ConversationEntityMemory, ConversationKGMemory
    from memories.long_term.entity_graph import EntityMemory

    if isinstance(memory, EntityMemory):
        return _graph_tools(_PerRun(memory))

    classes: dict[str, type[Any]] = {"entity": ConversationEntityMemory, "kg": ConversationKGMemory}
    if isinstance(memory, LangChainBaseMemory):
        kind = "entity" if isinstance(memory, ConversationEntityMemory) else "kg"
        if not isinstance(memory, classes[kind]):
            raise TypeError(
                "entity_tools() takes a ConversationEntityMemory or a ConversationKGMemory "
                f"(or a factory of them), got {type(memory).__name__}."
            )
    elif kind not in classes:
        raise TypeError(
            "entity_tools() with a memory factory needs kind='entity' (it makes "
            f"ConversationEntityMemory) or kind='kg' (ConversationKGMemory); got {kind!r}."
        )
    sessions = SessionMemories(memory, session_key, owner="entity_tools")
    wanted = classes[kind]

    def memory_for(config: RunnableConfig) -> Any:
        with _told_to_the_model():
            found = sessions.get(config)
        if not isinstance(found, wanted):
            raise ToolException(
                f"entity_tools(kind={kind!r}) needs a {wanted.__name__}; the memory factory "
                f"made a {type(found).__name__}."
            )
        return found

    return _entity_summary_tools(memory_for) if kind == "entity" else _relation_tools(memory_for)


def _words(text: str) -> set[str]:
    return set(re.findall(r"\w+", text.casefold()))


def _entity_summary_tools(memory_for: Callable[[RunnableConfig], Any]) -> list[BaseTool]:
    def manage_entity(
        name: str,
        summary: str | None = None,
        action: Literal["update", "delete"] = "update",
        *,
        config: RunnableConfig,
    ) -> str:
        """Write what you know about a person, place or thing, or delete it.

        ``update`` replaces the entity's summary with ``summary`` (give the
        whole summary: what was known plus what is new); ``delete`` forgets it.
        Earlier summaries are kept in the entity's history.
        """
        if not name.strip():
            raise ToolException("name must name the entity (e.g. 'Jane').")
        _bounded(MAX_NAME, name=name)
        _bounded(MAX_CONTENT, summary=summary)
        store = memory_for(config).knowledge_store
        with _told_to_the_model():
            if action == "delete":
                if not store.exists(name):
                    return f"There is no entity {name!r}; nothing deleted."
                store.delete(name)
                return f"deleted entity {name!r}"
            if not summary or not summary.strip():
                raise ToolException("update needs the entity's summary.")
            store.set(name, summary.strip())
            return f"updated entity {name!r}"

    def search_entities(query: str = "", limit: int = 10, *, config: RunnableConfig) -> str:
        """The entities you know about whose name or summary has a word of ``query``.

        An empty query lists them all (the most recently written last).
        """
        _in_range(limit, "limit", MAX_LIMIT)
        _bounded(MAX_QUERY, query=query)
        store = memory_for(config).knowledge_store
        with _told_to_the_model():
            try:
                entities = store.entities()
            except NotImplementedError as exc:
                raise ToolException(str(exc)) from exc
        words = _words(query)
        found = [
            {"name": name, "summary": summary}
            for name, summary in entities.items()
            if not words or words & _words(f"{name} {summary}")
        ]
        return json.dumps(found[-limit:], ensure_ascii=False)

    return _tools(manage_entity, search_entities)


def _relation_tools(memory_for: Callable[[RunnableConfig], Any]) -> list[BaseTool]:
    def manage_relation(
        subject: str,
        predicate: str,
        object: str,
        action: Literal["add", "delete"] = "add",
        *,
        config: RunnableConfig,
    ) -> str:
        """Add or delete a fact (subject, predicate, object), e.g. ('Jane', 'lives in', 'Oslo').

        A subject holds one relation to each object: adding ('Jane', 'moved to',
        'Oslo') replaces ('Jane', 'lives in', 'Oslo'). ``delete`` removes the
        subject's relation to the object, whatever it is.
        """
        parts = {"subject": subject, "predicate": predicate, "object": object}
        empty = [name for name, value in parts.items() if not value.strip()]
        if empty:
            raise ToolException(f"{', '.join(empty)} must not be empty.")
        _bounded(MAX_NAME, **parts)
        triple = KnowledgeTriple(subject.strip(), predicate.strip(), object.strip())
        graph = memory_for(config).knowledge_store
        with _told_to_the_model():
            if action == "delete":
                graph.delete_triple(triple)
                return f"deleted the relation of {triple.subject!r} to {triple.object_!r}"
            graph.add_triple(triple)
            return f"added ({triple.subject}, {triple.predicate}, {triple.object_})"

    def entity_knowledge(entity: str, depth: int = 1, *, config: RunnableConfig) -> str:
        """The facts known about an entity, and up to ``depth`` hops beyond it."""
        _in_range(depth, "depth", 3)
        _bounded(MAX_NAME, entity=entity)
        graph = memory_for(config).knowledge_store
        with _told_to_the_model():
            facts = graph.get_entity_knowledge(entity.strip(), depth=depth)
        return json.dumps(facts, ensure_ascii=False)

    return _tools(manage_relation, entity_knowledge)


def _graph_tools(per_run: _PerRun[EntityMemory]) -> list[BaseTool]:
    def applied(config: RunnableConfig, operations: list[dict[str, Any]], done: str) -> str:
        with _told_to_the_model():
            update = per_run.memory(config).apply(operations)
        return done if update.changes else "nothing changed: the graph holds that already"

    def manage_entity(
        name: str,
        action: Literal["update", "merge", "unmerge"] = "update",
        *,
        type: str | None = None,
        summary: str | None = None,
        aliases: list[str] | None = None,
        new_name: str | None = None,
        into: str | None = None,
        reason: str | None = None,
        config: RunnableConfig,
    ) -> str:
        """Add a person, place or thing to the graph, or describe, rename or merge one.

        ``update`` adds the entity called ``name`` (or its alias) or changes
        it: ``type`` (person, place...), ``summary`` (the whole summary),
        ``aliases`` (other names it goes by), ``new_name`` (a rename; the old
        name stays an alias). ``merge`` makes ``name`` the same entity as
        ``into``, with a ``reason``; ``unmerge`` undoes a merge.
        """
        _bounded(MAX_NAME, name=name, type=type, new_name=new_name, into=into)
        _bounded(MAX_CONTENT, summary=summary, reason=reason)
        if len(aliases or []) > MAX_OPERATIONS:
            raise ToolException(f"{len(aliases or [])} aliases; at most {MAX_OPERATIONS}.")
        _bounded(MAX_NAME, **{f"aliases[{i}]": alias for i, alias in enumerate(aliases or [])})
        if not name.strip():
            raise ToolException("name must name the entity (e.g. 'Melanie').")
        if action == "merge":
            if not into or not reason:
                raise ToolException("merge needs into (the entity it is) and a reason.")
            operation: dict[str, Any] = {"op": "merge", "id": name, "into": into, "reason": reason}
            return applied(config, [operation], f"merged {name!r} into {into!r}")
        if action == "unmerge":
            return applied(config, [{"op": "unmerge", "id": name}], f"unmerged {name!r}")
        fields = {"type": type, "summary": summary, "aliases": aliases}
        operation = {"op": "entity", **{k: v for k, v in fields.items() if v is not None}}
        if new_name is not None:
            operation.update(id=name, name=new_name)
        else:
            operation["name"] = name
        return applied(config, [operation], f"updated entity {new_name or name!r}")

    def manage_relation(
        subject: str,
        predicate: str,
        object: str | None = None,
        action: Literal["add", "end"] = "add",
        *,
        value: str | None = None,
        replace_current: bool = False,
        id: str | None = None,
        config: RunnableConfig,
    ) -> str:
        """Add a relation between entities, or end one that stopped being true.

        ``add`` relates ``subject`` by ``predicate`` (e.g. lives_in, sister) to
        ``object`` (an entity, created when new) or to a plain ``value`` (a
        date, a colour); ``replace_current`` ends the subject's current
        relations of that predicate (a move ends the old lives_in). ``end``
        closes the relation (give its ``id`` from search_entities, or the
        subject, predicate and object or value). Ended relations are kept in
        the history, never deleted.
        """
        _bounded(MAX_NAME, subject=subject, predicate=predicate, object=object, value=value, id=id)
        if action == "end" and id:
            return applied(config, [{"op": "end", "id": id}], f"ended relation {id}")
        if not subject.strip() or not predicate.strip():
            raise ToolException("subject and predicate must not be empty.")
        if (object is None) == (value is None):
            raise ToolException("give exactly one of object (an entity) or value.")
        target = {"object": object} if object is not None else {"value": value}
        fact = f"({subject}, {predicate}, {object if object is not None else value})"
        operation = {"subject": subject, "predicate": predicate, **target}
        if action == "end":
            return applied(config, [{"op": "end", **operation}], f"ended {fact}")
        if replace_current:
            operation["replaces"] = "all"
        return applied(config, [{"op": "relate", **operation}], f"added {fact}")

    def search_entities(query: str, limit: int = 10, *, config: RunnableConfig) -> str:
        """What the graph knows about ``query``: the entities it names or is about, their
        current relations and one more hop, with ids (for manage_relation's end)."""
        _in_range(limit, "limit", MAX_LIMIT)
        _bounded(MAX_QUERY, query=query)
        with _told_to_the_model():
            found = per_run.memory(config).recall(query)
        entities = [
            {"name": e.name, "type": e.type, "aliases": list(e.aliases), "summary": e.summary}
            for e in found.entities[:limit]
        ]
        relations = [
            {
                "id": r.id,
                "subject": r.subject,
                "predicate": r.predicate,
                "object": r.object,
                "valid_at": r.valid_at.isoformat(),
            }
            for r in found.relations
        ]
        return json.dumps({"entities": entities, "relations": relations}, ensure_ascii=False)

    return _tools(manage_entity, manage_relation, search_entities)
