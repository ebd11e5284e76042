"""Memory for LCEL runnables: load before the call, save after it.

chain = with_memory(prompt | model, lambda sid: TokenBufferMemory(
    chat_memory=SQLiteHistory("chat.db", session_id=sid)))
chain.invoke({"input": "hi"}, config={"configurable": {"session_id": "user-42"}})
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

from langchain_core.messages import BaseMessage
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda

from memories._langchain import LangChainBaseMemory
from memories.errors import ConfigError, InvalidInputError
from memories.scoping import SessionFactory

__all__ = ["MemoryFactory", "SessionMemories", "with_memory"]

MemoryFactory = Callable[..., LangChainBaseMemory]


class SessionMemories:
    """One memory per session id, made by the factory once and then reused.

    Args:
        memory: one memory for every session, or a factory ``session_id -> memory``.
        session_key: the ``configurable`` field of the run config holding the id.
        owner: names the caller in error messages.
        max_sessions: keep at most this many memories, dropping the least
            recently used (None: keep all). A dropped memory is made again by the
            factory on its next use, so this suits memories whose data lives in a
            database (SQLite, PostgreSQL, Chroma); with in-memory histories a
            dropped session's conversation would be gone.
    """

    def __init__(
        self,
        memory: LangChainBaseMemory | MemoryFactory,
        session_key: str,
        owner: str = "This runnable",
        *,
        max_sessions: int | None = None,
    ) -> None:
        if max_sessions is not None and max_sessions < 1:
            raise ConfigError(f"max_sessions must be >= 1 or None, got {max_sessions!r}.")
        self._memory = memory
        self._session_key = session_key
        self._owner = owner
        self._max_sessions = max_sessions
        self._by_session: OrderedDict[tuple[str, ...], LangChainBaseMemory] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, config: RunnableConfig | None) -> LangChainBaseMemory:
        if isinstance(self._memory, LangChainBaseMemory):
            return self._memory
        configurable = (config or {}).get("configurable", {})
        session_id = configurable.get(self._session_key)
        if not isinstance(session_id, str) or not session_id:
            raise ConfigError(
                f"{self._owner} makes one memory per session: call it with "
                f"config={{'configurable': {{'{self._session_key}': '<id>'}}}} "
                f"(got {self._session_key}={session_id!r})."
            )
        # A factory from a config names the fields its namespace templates need (user_id...).
        wanted = self._memory.fields if isinstance(self._memory, SessionFactory) else ()
        fields = {name: configurable.get(name) for name in wanted}
        key = (session_id, *(str(fields[name]) for name in wanted))
        with self._lock:
            memory = self._by_session.get(key)
            if memory is None:
                memory = self._memory(session_id, **fields)
                self._by_session[key] = memory
                if self._max_sessions is not None and len(self._by_session) > self._max_sessions:
                    self._by_session.popitem(last=False)
            else:
                self._by_session.move_to_end(key)
            return memory


def with_memory(
    runnable: Runnable[Any, Any],
    memory: LangChainBaseMemory | MemoryFactory,
    *,
    input_key: str = "input",
    output_key: str = "output",
    session_key: str = "session_id",
    max_sessions: int | None = None,
) -> Runnable[Any, Any]:
    """Wrap a runnable so each call sees the memory and is saved to it.

    Args:
        runnable: takes a dict of inputs plus the memory's variables.
        memory: one memory for every call, or a factory ``session_id -> memory``
            called once per session (the session id comes from
            ``config["configurable"][session_key]``).
        input_key: the key a plain string input is put under.
        output_key: the key the output is saved under.
        session_key: the configurable field that holds the session id.
        max_sessions: keep at most this many per-session memories, least recently
            used dropped first (see :class:`SessionMemories`); None keeps all.

    The wrapped runnable's output is returned unchanged. A message output is
    saved as the message (tool calls kept); a dict output saves its
    ``output_key`` entry.
    """
    memories = SessionMemories(memory, session_key, max_sessions=max_sessions)

    def invoke(value: Any, config: RunnableConfig) -> Any:
        chosen = memories.get(config)
        inputs = _as_inputs(value, input_key)
        loaded = chosen.load_memory_variables(inputs)
        output = runnable.invoke({**inputs, **loaded}, config)
        chosen.save_context(inputs, {output_key: _saved_output(output, output_key)})
        return output

    async def ainvoke(value: Any, config: RunnableConfig) -> Any:
        chosen = memories.get(config)
        inputs = _as_inputs(value, input_key)
        loaded = await chosen.aload_memory_variables(inputs)
        output = await runnable.ainvoke({**inputs, **loaded}, config)
        await chosen.asave_context(inputs, {output_key: _saved_output(output, output_key)})
        return output

    return RunnableLambda(invoke, afunc=ainvoke, name=f"with_memory({runnable.get_name()})")


def _as_inputs(value: Any, input_key: str) -> dict[str, Any]:
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, str | BaseMessage):
        return {input_key: value}
    raise InvalidInputError(
        f"A memory runnable takes a dict of inputs, a string or a message; got "
        f"{type(value).__name__} {value!r:.80}."
    )


def _saved_output(output: Any, output_key: str) -> Any:
    if isinstance(output, Mapping):
        if output_key in output:
            return output[output_key]
        if len(output) == 1:
            return next(iter(output.values()))
        raise InvalidInputError(
            f"The runnable returned a dict with keys {sorted(output)}; pass "
            f"output_key=<one of them> to with_memory to say which to save."
        )
    return output
