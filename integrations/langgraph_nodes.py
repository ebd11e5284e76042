"""Memories in a LangGraph graph: a node that loads a memory into state, one that saves a turn.

:class:`MemoryNodes` chooses the memory by ``configurable.thread_id``, as a
checkpointer's thread; both nodes run sync and async. A graph wired with them,
and how a node edits the memory (``memory_edits``), are on the docs' Agents and
LangGraph page.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AnyMessage, BaseMessage, SystemMessage
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langgraph.graph.message import add_messages

from memories.core.langchain import LangChainBaseMemory
from memories.faces import exchange as turns
from memories.faces.runnable import MemoryFactory, SessionMemories
from memories.kernel.messages import checked_messages
from memories.kernel.steps import Steps, twins

__all__ = ["MemoryNodes", "MemoryState"]


def pending_edits(
    left: Sequence[AnyMessage] | None, right: Sequence[AnyMessage] | None
) -> list[AnyMessage]:
    """The reducer of ``memory_edits``: updates add edits; ``None`` (the save node's) empties it."""
    if right is None:
        return []
    return [*(left or []), *right]


class MemoryState(TypedDict, total=False):
    """Graph state with the keys the memory nodes read and write."""

    messages: Annotated[list[AnyMessage], add_messages]
    """The thread's messages (a checkpointer keeps all of them)."""
    memory_messages: list[AnyMessage]
    """The memory's conversation view for the turn in progress, replaced by each load
    (absent when the memory has no conversation view)."""
    memory_text: str
    """The memory's text sections (summary, recalled facts, profile), replaced by each load."""
    memory_edits: Annotated[list[AnyMessage], pending_edits]
    """Edits for the memory's chat log (``RemoveMessage``, replacements by id), applied
    and emptied by the save node."""


class MemoryNodes:
    """A load node and a save node over one memory per thread.

    Args:
        memory: one memory for every thread, or a factory ``thread_id -> memory``.
        as_messages: give a chat memory's window as messages in
            ``memory_messages``; False renders it into ``memory_text``.
        tool_messages: save the turn's tool calls and results too.
        messages_key: the state key that holds the thread's messages.
        header: the line above the memory's text in ``memory_text``.
        max_sessions: keep at most this many per-thread memories, least recently
            used dropped first (None keeps all; see
            :class:`memories.faces.runnable.SessionMemories`).
    """

    def __init__(
        self,
        memory: LangChainBaseMemory | MemoryFactory,
        /,
        *,
        as_messages: bool = True,
        tool_messages: bool = True,
        messages_key: str = "messages",
        header: str = "",
        max_sessions: int | None = None,
    ) -> None:
        self.memory = memory
        self.as_messages = as_messages
        self.tool_messages = tool_messages
        self.messages_key = messages_key
        self.header = header
        self._memories = SessionMemories(
            memory, "thread_id", owner="MemoryNodes", max_sessions=max_sessions
        )
        self.load: RunnableLambda[Any, dict[str, Any]] = RunnableLambda(
            self._load, afunc=self._aload, name="load_memory"
        )
        """The node that writes ``memory_messages`` and ``memory_text``."""
        self.save: RunnableLambda[Any, dict[str, Any]] = RunnableLambda(
            self._save, afunc=self._asave, name="save_memory"
        )
        """The node that saves the turn in progress to the memory."""

    def __repr__(self) -> str:
        return f"MemoryNodes({self.memory!r}, messages_key={self.messages_key!r})"

    def memory_for(self, thread_id: str, **fields: str) -> LangChainBaseMemory:
        """The memory of one thread; ``fields`` fill a namespace template (``user_id=...``)."""
        return self._memories.get({"configurable": {**fields, "thread_id": thread_id}})

    def _messages(self, state: Mapping[str, Any]) -> list[BaseMessage]:
        what = f"MemoryNodes takes state[{self.messages_key!r}] as a list of LangChain messages"
        return checked_messages(state.get(self.messages_key) or [], what, "Or set messages_key.")

    def _update(self, view: turns.MemoryView) -> dict[str, Any]:
        update: dict[str, Any] = {"memory_text": view.system_text(self.header)}
        if view.conversation:
            update["memory_messages"] = list(view.messages)
        return update

    def _query(self, state: Mapping[str, Any]) -> str:
        return turns.turn_query(self._messages(state))

    def _load(self, state: Mapping[str, Any], config: RunnableConfig) -> dict[str, Any]:
        memory = self._memories.get(config)
        view = turns.view_memory(memory, self._query(state), as_messages=self.as_messages)
        return self._update(view)

    async def _aload(self, state: Mapping[str, Any], config: RunnableConfig) -> dict[str, Any]:
        memory = self._memories.get(config)
        view = await turns.aview_memory(memory, self._query(state), as_messages=self.as_messages)
        return self._update(view)

    def __save_steps(
        self, state: Mapping[str, Any], config: RunnableConfig
    ) -> Steps[dict[str, Any]]:
        """The memory's edits of the turn first (then emptied), then the turn itself."""
        memory = self._memories.get(config)
        edits = list(state.get("memory_edits") or [])
        if edits:
            yield from turns.editing_messages(memory, edits)
        exchange = turns.last_exchange(self._messages(state))
        yield from turns.saving_exchange(memory, exchange, self.tool_messages)
        return {"memory_edits": None} if edits else {}

    _save, _asave = twins(__save_steps)

    def prompt(self, state: Mapping[str, Any], *, system: str = "") -> list[BaseMessage]:
        """The model's messages: system text with the memory's text, its window, the turn.

        The thread's older messages in ``state`` are left out when the memory
        gives a view of the conversation: the view replaces them, so a
        checkpointed thread is not shown twice. A memory without one (a
        profile, fixed values) leaves the thread's messages as they are.
        """
        text = "\n\n".join(t for t in (system, state.get("memory_text", "")) if t)
        head: list[BaseMessage] = [SystemMessage(text)] if text else []
        shown = state.get("memory_messages")
        if shown is None:
            return [*head, *self._messages(state)]
        return [*head, *shown, *turns.last_exchange(self._messages(state))]
