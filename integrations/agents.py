"""Memories in LangChain 1.x agents: a ``create_agent`` middleware.

Before every model call :class:`MemoryMiddleware` shows the model what the
memory of the run's ``thread_id`` holds; after the run it saves the run's turn
(the user's message, tool calls and results, the final answer). Its use and its
two ``inject`` modes are on the docs' Agents and LangGraph page.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Literal

from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest, ModelResponse
from langchain_core.messages import SystemMessage
from langgraph.config import get_config
from langgraph.runtime import Runtime

from memories.core.langchain import LangChainBaseMemory
from memories.errors import ConfigError
from memories.faces.exchange import (
    DEFAULT_HEADER,
    MemoryView,
    aview_memory,
    last_exchange,
    saving_exchange,
    turn_query,
    view_memory,
)
from memories.faces.runnable import MemoryFactory, SessionMemories
from memories.kernel.steps import Steps, twins

__all__ = ["DEFAULT_HEADER", "Inject", "MemoryMiddleware"]

Inject = Literal["messages", "system"]


class MemoryMiddleware(AgentMiddleware):
    """Shows a memory to the model before each call and saves each agent run to it.

    Args:
        memory: one memory for every thread, or a factory ``thread_id -> memory``
            called once per thread (the id comes from the run config's
            ``configurable.thread_id``, the checkpointer's thread).
        inject: ``"messages"`` replaces the model's message list with the
            memory's view plus this run's messages (a memory with no view of
            the conversation leaves it alone); ``"system"`` adds the memory to
            the system message as text.
        tool_messages: save the run's tool calls and results with it, so a
            chat memory's window holds whole, valid tool-calling turns; False
            saves only the user's message and the final answer.
        header: the line above the memory's text in the system message.
        name: the middleware's name in the agent graph, different for each memory
            middleware of an agent. Default: ``MemoryMiddleware[history]``, the
            memory's (or a ``memory_factory``'s) variables; give one for a factory function.
        max_sessions: keep at most this many per-thread memories in the process,
            least recently used dropped first (None keeps all; see
            :class:`memories.faces.runnable.SessionMemories` for when that is safe).
    """

    def __init__(
        self,
        memory: LangChainBaseMemory | MemoryFactory,
        /,
        *,
        inject: Inject = "messages",
        tool_messages: bool = True,
        header: str = DEFAULT_HEADER,
        name: str | None = None,
        max_sessions: int | None = None,
    ) -> None:
        if inject not in ("messages", "system"):
            raise ConfigError(f"inject must be 'messages' or 'system', got {inject!r}.")
        if not isinstance(memory, LangChainBaseMemory) and not callable(memory):
            raise ConfigError(
                f"MemoryMiddleware takes a memory or a function thread_id -> memory; "
                f"got {memory!r:.80}."
            )
        super().__init__()
        self.memory = memory
        self.inject: Inject = inject
        self.tool_messages = tool_messages
        self.header = header
        self._name = name or _default_name(memory)
        self._memories = SessionMemories(
            memory, "thread_id", owner="MemoryMiddleware", max_sessions=max_sessions
        )

    @property
    def name(self) -> str:
        return self._name

    def memory_for(self, thread_id: str, **fields: str) -> LangChainBaseMemory:
        """The memory of one thread, outside a run; ``fields`` fill a namespace template."""
        return self._memories.get({"configurable": {**fields, "thread_id": thread_id}})

    def _current_memory(self) -> LangChainBaseMemory:
        return self._memories.get(get_config())

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> Any:
        view = view_memory(
            self._current_memory(), turn_query(request.messages), as_messages=self._as_messages
        )
        return handler(self._shown(request, view))

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> Any:
        view = await aview_memory(
            self._current_memory(), turn_query(request.messages), as_messages=self._as_messages
        )
        return await handler(self._shown(request, view))

    @property
    def _as_messages(self) -> bool:
        return self.inject == "messages"

    def _shown(self, request: ModelRequest[Any], view: MemoryView) -> ModelRequest[Any]:
        """The request with the memory in it (pure: the same for sync and async)."""
        overrides: dict[str, Any] = {}
        text = view.system_text(self.header)
        if text:
            overrides["system_message"] = _extend_system(request.system_message, text)
        if self.inject == "messages" and view.conversation:
            overrides["messages"] = [*view.messages, *last_exchange(request.messages)]
        return request.override(**overrides) if overrides else request

    def _after_agent_steps(
        self, state: AgentState[Any], runtime: Runtime[Any]
    ) -> Steps[dict[str, Any] | None]:
        """Save the run's turn (its messages since the last human one) to the thread's memory."""
        exchange = last_exchange(state["messages"])
        yield from saving_exchange(self._current_memory(), exchange, self.tool_messages)
        return None

    after_agent, aafter_agent = twins(_after_agent_steps)

    def __repr__(self) -> str:
        return f"MemoryMiddleware({self.memory!r:.80}, inject={self.inject!r})"


def _extend_system(system: SystemMessage | None, text: str) -> SystemMessage:
    if system is None:
        return SystemMessage(text)
    content: Any = system.content
    if isinstance(content, str):
        content = f"{content}\n\n{text}" if content else text
    else:
        content = [*content, {"type": "text", "text": text}]
    return system.model_copy(update={"content": content})


def _default_name(memory: Any) -> str:
    """``MemoryMiddleware[history]``: a memory's, or a config factory's, variables in the name."""
    variables = getattr(memory, "memory_variables", None)  # a memory, or memory_factory(...)
    if isinstance(variables, list) and variables:
        return f"MemoryMiddleware[{','.join(variables)}]"
    return "MemoryMiddleware"
