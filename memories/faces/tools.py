"""Memory tools for agents: the model saves and searches memories in the hot path.

``memory_tools(collection)`` gives ``manage_memory`` and ``search_memory``, with
langmem's argument names (``content``, ``action``, ``id``; ``query``,
``limit``), ``profile_tool(profile)`` gives ``update_profile`` (a JSON
patch) and ``read_profile_tool(profile)`` gives ``read_profile``. Each works
in ``create_agent`` or any LangChain tool-calling loop::

    memory = CollectionMemory(namespace=("memories", "{user_id}"), path="chroma")
    agent = create_agent(model, memory_tools(memory))
    agent.invoke({"messages": [...]}, {"configurable": {"user_id": "alice"}})

**Whose memories.** Labels of the memory's namespace written as ``{name}``
are filled from the run's ``configurable`` values, so each user gets their
own namespace; the model never chooses one (the tools take no namespace
argument, and an id from another namespace is simply not found). A
templated label with no value in the run config is an error, never a
shared fallback.

**Errors** go back to the model as the tool's answer (``"Error: ..."``), so it
can correct itself; they never end the run. Every argument is bounded
(:data:`MAX_LIMIT`, :data:`MAX_OFFSET`, :data:`MAX_QUERY`, :data:`MAX_CONTENT`,
:data:`MAX_OPERATIONS`) and checked before anything is written.
"""

from __future__ import annotations

import contextlib
import json
import string
import threading
from collections.abc import Iterator, Sequence
from typing import Any, Literal

from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, StructuredTool, ToolException

from memories.core.base import BaseMemory
from memories.errors import MemoriesError
from memories.kernel.namespaces import in_namespace

__all__ = [
    "MAX_CONTENT",
    "MAX_LIMIT",
    "MAX_OFFSET",
    "MAX_OPERATIONS",
    "MAX_QUERY",
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


class _PerRun:
    """The memory a run's tools use: ``template`` in the namespace the run's config fills.

    Labels written ``{name}`` take the run's ``configurable`` values; one
    memory per filled namespace is built (:func:`~memories.kernel.namespaces.in_namespace`)
    and kept for later runs.
    """

    def __init__(self, template: BaseMemory) -> None:
        self.template = template
        self._lock = threading.Lock()
        self._made: dict[tuple[str, ...], BaseMemory] = {}

    def memory(self, config: RunnableConfig | None) -> BaseMemory:
        """The run's memory.

        Raises:
            ToolException: a templated label has no value in ``configurable``.
        """
        namespace: tuple[str, ...] = self.template.namespace  # type: ignore[attr-defined]
        if not any(_fields(label) for label in namespace):
            return self.template
        values = (config or {}).get("configurable") or {}
        filled = []
        for label in namespace:
            names = _fields(label)
            missing = [n for n in names if not isinstance(values.get(n), str) or not values.get(n)]
            if missing:
                raise ToolException(
                    f"The memory's namespace {namespace!r} needs {missing} in the run's "
                    "configurable values (e.g. config={'configurable': {'user_id': ...}})."
                )
            filled.append(label.format(**{n: values[n] for n in names}))
        with self._lock:
            key = tuple(filled)
            if key not in self._made:
                self._made[key] = in_namespace(self.template, key)
            return self._made[key]


def _bounded(text: str, what: str, most: int) -> str:
    if len(text) > most:
        raise ToolException(f"{what} is {len(text):,} characters; at most {most:,}.")
    return text


def _fields(label: str) -> list[str]:
    return [name for _, name, _, _ in string.Formatter().parse(label) if name]


@contextlib.contextmanager
def _told_to_the_model() -> Iterator[None]:
    """Library errors become the tool's answer: the model reads them and can fix its call."""
    try:
        yield
    except MemoriesError as exc:
        raise ToolException(str(exc)) from exc


def memory_tools(memory: Any, /) -> list[BaseTool]:
    """``manage_memory`` and ``search_memory`` over a collection memory.

    The tools answer for the namespace of each run (see the module's docstring).
    """
    from memories.long_term.collection import CollectionMemory

    if not isinstance(memory, CollectionMemory):
        raise TypeError(f"memory_tools() takes a CollectionMemory, got {type(memory).__name__}.")
    per_run = _PerRun(memory)

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
        assert isinstance(target, CollectionMemory)
        if content is not None:
            _bounded(content, "content", MAX_CONTENT)
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
        assert isinstance(target, CollectionMemory)
        if not 1 <= limit <= MAX_LIMIT:
            raise ToolException(f"limit must be between 1 and {MAX_LIMIT}, got {limit}.")
        if not 0 <= offset <= MAX_OFFSET:
            raise ToolException(f"offset must be between 0 and {MAX_OFFSET}, got {offset}.")
        _bounded(query, "query", MAX_QUERY)
        with _told_to_the_model():
            found = target.search(query, k=limit + offset)[offset:]
        return json.dumps(
            [
                {"id": r.id, "content": r.content, "updated_at": r.updated_at.isoformat()}
                for r in found
            ],
            ensure_ascii=False,
        )

    return [
        StructuredTool.from_function(manage_memory, handle_tool_error=_answer),
        StructuredTool.from_function(search_memory, handle_tool_error=_answer),
    ]


def profile_tool(profile: Any, /) -> BaseTool:
    """``update_profile``: the model edits a :class:`~memories.ProfileMemory` with a JSON patch."""
    from memories.long_term.profile import ProfileMemory

    if not isinstance(profile, ProfileMemory):
        raise TypeError(f"profile_tool() takes a ProfileMemory, got {type(profile).__name__}.")
    per_run = _PerRun(profile)

    def update_profile(operations: Sequence[dict[str, Any]], *, config: RunnableConfig) -> str:
        """Change the user's profile with RFC 6902 JSON Patch operations.

        For example [{"op": "replace", "path": "/city", "value": "Berlin"}].
        Returns the profile as it now stands.
        """
        target = per_run.memory(config)
        assert isinstance(target, ProfileMemory)
        if len(operations) > MAX_OPERATIONS:
            raise ToolException(
                f"{len(operations)} operations in one patch; at most {MAX_OPERATIONS}."
            )
        _bounded(json.dumps(list(operations), default=str), "the patch", MAX_CONTENT)
        with _told_to_the_model():
            target.update(list(operations))
            return json.dumps(target.get(), ensure_ascii=False)

    return StructuredTool.from_function(update_profile, handle_tool_error=_answer)


def read_profile_tool(profile: Any, /) -> BaseTool:
    """``read_profile``: the model reads a :class:`~memories.ProfileMemory`'s document."""
    from memories.long_term.profile import ProfileMemory

    if not isinstance(profile, ProfileMemory):
        raise TypeError(f"read_profile_tool() takes a ProfileMemory, got {type(profile).__name__}.")
    per_run = _PerRun(profile)

    def read_profile(*, config: RunnableConfig) -> str:
        """The user's profile as it now stands, a JSON document ({} when nothing is known).

        Read it before update_profile, to patch the paths it has.
        """
        target = per_run.memory(config)
        assert isinstance(target, ProfileMemory)
        with _told_to_the_model():
            return json.dumps(target.get() or {}, ensure_ascii=False)

    return StructuredTool.from_function(read_profile, handle_tool_error=_answer)


def _answer(error: ToolException) -> str:
    return f"Error: {error}"
