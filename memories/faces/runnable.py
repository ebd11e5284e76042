"""Memory for LCEL runnables: load before the call, save after it.

``with_memory`` replaces LangChain's deprecated ``RunnableWithMessageHistory``: a dict input
without ``*_messages_key`` gets the memory's variables (a ``MessagesPlaceholder``'s as
messages) and is saved with ``save_context``; otherwise, by ``RunnableWithMessageHistory``'s
rules, what the memory shows goes in as messages and the input and output messages are saved.
The input is checked before the runnable runs (a bad turn costs no model call); docs/lcel.md
shows both.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    message_chunk_to_message,
)
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables import Runnable, RunnableConfig, RunnableSequence, ensure_config
from langchain_core.runnables.utils import ConfigurableFieldSpec

from memories.core.base import BaseMemory, keeps_chat_log
from memories.core.combined import leaves_of
from memories.core.config import SessionFactory
from memories.core.langchain import LangChainBaseMemory
from memories.errors import ConfigError, InvalidInputError
from memories.faces.exchange import saving_messages, view_sections
from memories.kernel.checks import whole_number
from memories.kernel.lru import Built
from memories.kernel.messages import check_storable
from memories.kernel.steps import Steps, arun, run, step, twins

__all__ = ["MemoryFactory", "MemoryRunnable", "SessionMemories", "with_memory"]

MemoryFactory = Callable[..., LangChainBaseMemory | BaseChatMessageHistory]
#: How long closing a dropped memory may wait for its deferred work.
_CLOSE_SECONDS = 30.0


class SessionMemories:
    """One memory per session, made by the factory once and then reused.

    Args:
        memory: one memory for every session, or a factory called with the run
            config's ``configurable`` fields named by ``keys`` (positionally
            when there is one), returning a memory or a LangChain chat message
            history (wrapped in a buffer memory, and asked for again on every
            call, as ``RunnableWithMessageHistory`` asks).
        keys: the ``configurable`` fields that identify a session.
        owner: names the caller in error messages.
        max_sessions: keep at most this many memories, the least recently used
            dropped (None: all) and closed, its deferred work written. A dropped memory
            is made again on its next use, so this suits data in a database; an
            in-memory history's would be gone.
    """

    def __init__(
        self,
        memory: LangChainBaseMemory | MemoryFactory,
        keys: str | Sequence[str] = "session_id",
        owner: str = "This runnable",
        *,
        max_sessions: int | None = None,
    ) -> None:
        if max_sessions is not None:
            whole_number(max_sessions, "max_sessions", least=1, hint="or None: keep all")
        self._memory = memory
        self._keys = (keys,) if isinstance(keys, str) else tuple(keys)
        self._owner = owner
        self._by_session: Built[tuple[str, ...], LangChainBaseMemory | BaseChatMessageHistory]
        self._by_session = Built(
            max_sessions,
            close=close_dropped,
            keeps=lambda made: not isinstance(made, BaseChatMessageHistory),
        )

    def get(self, config: RunnableConfig | None) -> LangChainBaseMemory:
        """The memory of the session the run config names."""
        if isinstance(self._memory, LangChainBaseMemory):
            return self._memory
        configurable = (config or {}).get("configurable", {})
        missing = [k for k in self._keys if configurable.get(k) in (None, "")]
        if missing:
            example = ", ".join(f"'{k}': '<id>'" for k in self._keys)
            got = {k: configurable.get(k) for k in missing}
            raise ConfigError(
                f"{self._owner} makes one memory per session: call it with "
                f"config={{'configurable': {{{example}}}}} (got {got})."
            )
        values = [configurable[k] for k in self._keys]
        # A factory from a config names the fields its namespace templates need (user_id...).
        wanted = self._memory.fields if isinstance(self._memory, SessionFactory) else ()
        extra = {name: configurable.get(name) for name in wanted if name not in self._keys}
        key = tuple(map(repr, (*values, *extra.values())))  # a missing user_id is not "None"
        made = self._by_session.built(key, partial(self._made, values, extra))
        if isinstance(made, BaseChatMessageHistory):  # asked for again next time, as LangChain
            from memories.short_term.buffer import BufferMemory

            return BufferMemory(chat_memory=made, return_messages=True)
        return made

    def _made(self, values: list[Any], extra: dict[str, Any]) -> Any:
        assert not isinstance(self._memory, LangChainBaseMemory)
        if len(values) == 1:
            return self._memory(values[0], **extra)
        named = dict(zip(self._keys, values, strict=True))
        if isinstance(self._memory, SessionFactory):  # the fields as one mapping, with session_id
            return self._memory(named, **extra)
        return self._memory(**named)


def close_dropped(memory: Any) -> None:
    """Close a memory dropped from a cache: ours write their deferred work (at most 30 s)."""
    if isinstance(memory, BaseMemory):
        memory.close(timeout=_CLOSE_SECONDS)


@dataclass
class _Turn:
    """One call: its memory, how the runnable is fed, and what is saved afterwards."""

    memory: LangChainBaseMemory
    value: Any
    """The caller's input, as given."""
    inputs: dict[str, Any] | None = None
    """Variables mode: the input dict the memory's variables are added to."""
    messages: list[BaseMessage] = field(default_factory=list)
    """Messages mode: the input messages (saved with the output's)."""


@dataclass(frozen=True)
class _Keys:
    """Where a call's messages and values are: :func:`with_memory`'s ``*_key`` arguments."""

    input_messages: str | None
    history_messages: str | None
    output_messages: str | None
    input: str
    output: str


@dataclass
class _Sum:
    """The sum of a stream's chunks (the last chunk where chunks do not add up)."""

    value: Any = None
    started: bool = False

    def add(self, chunk: Any) -> None:
        if not self.started:
            self.value, self.started = chunk, True
            return
        try:
            self.value = self.value + chunk
        except TypeError:
            self.value = chunk


class MemoryRunnable(Runnable[Any, Any]):
    """A runnable that loads a memory before each call and saves the turn after it.

    Made by :func:`with_memory`, whose arguments it holds.
    """

    def __init__(
        self,
        runnable: Runnable[Any, Any],
        sessions: SessionMemories,
        specs: list[ConfigurableFieldSpec],
        keys: _Keys,
    ) -> None:
        self.runnable = runnable
        self.keys = keys
        self._memories = sessions
        self._specs = specs
        self._takes_dict = _takes_dict(runnable)
        self._message_variables = _message_variables(runnable)
        self.name = f"with_memory({runnable.get_name()})"

    def __repr__(self) -> str:
        return f"with_memory({self.runnable!r})"

    @property
    def config_specs(self) -> list[ConfigurableFieldSpec]:
        """The run config fields that name a session, and the wrapped runnable's."""
        return [*self._specs, *self.runnable.config_specs]

    # -- the runnable interface: each call is load, run, save ---------------------

    def _invoke_steps(
        self, input: Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> Steps[Any]:
        """Load the memory, run the runnable, save the turn; return the runnable's output."""
        config = ensure_config(config)
        turn = self._turn(input, config)
        prepared = yield from self._loading(turn)
        output = yield step(self.runnable.invoke, prepared, config, **kwargs)
        yield from self._saving(turn, output)
        return output

    invoke, ainvoke = twins(_invoke_steps)

    def stream(
        self, input: Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> Iterator[Any]:
        """The runnable's chunks as they come; the turn is saved with their sum at the end."""
        config = ensure_config(config)
        turn, total = self._turn(input, config), _Sum()
        for chunk in self.runnable.stream(run(self._loading(turn)), config, **kwargs):
            total.add(chunk)
            yield chunk
        run(self._saving(turn, total.value))

    async def astream(
        self, input: Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> AsyncIterator[Any]:
        """Async :meth:`stream`."""
        config = ensure_config(config)
        turn, total = self._turn(input, config), _Sum()
        prepared = await arun(self._loading(turn))
        async for chunk in self.runnable.astream(prepared, config, **kwargs):
            total.add(chunk)
            yield chunk
        await arun(self._saving(turn, total.value))

    def _turn(self, value: Any, config: RunnableConfig) -> _Turn:
        """The session's memory and the checked input, before anything runs."""
        memory = self._memories.get(config)
        keys = self.keys.input_messages or self.keys.history_messages
        if isinstance(value, Mapping) and not keys and not _one_message_list(value):
            return self._variables_turn(memory, value, dict(value))
        if not isinstance(value, Mapping) and not keys and self._takes_dict:
            if not isinstance(value, str | BaseMessage):
                raise InvalidInputError(
                    f"A memory runnable takes a dict of inputs, a string or a message; got "
                    f"{type(value).__name__} {value!r:.80}."
                )
            return self._variables_turn(memory, value, {self.keys.input: value})
        messages = check_storable(_input_messages(value, self.keys.input_messages))
        return _Turn(memory, value, messages=messages)

    def _variables_turn(
        self, memory: LangChainBaseMemory, value: Any, inputs: dict[str, Any]
    ) -> _Turn:
        if isinstance(memory, BaseMemory):
            memory.check_turn(inputs, {self.keys.output: "..."})
        return _Turn(memory, value, inputs=inputs)

    def _loading(self, turn: _Turn) -> Steps[Any]:
        """The runnable's input: the caller's, with what the memory shows."""
        if turn.inputs is not None:
            if not self._message_variables:
                variables = yield step(turn.memory.load_memory_variables, turn.inputs)
                return {**turn.inputs, **variables}
            # A prompt takes some variable as messages: a chat log under that name
            # gives its messages, even where it would render text; each leaf is read once.
            variables = {}
            for leaf in leaves_of(turn.memory):
                if getattr(leaf, "memory_key", None) in self._message_variables and (
                    keeps_chat_log(leaf)
                ):
                    variables[leaf.memory_key] = yield step(leaf.load_messages)
                else:
                    variables.update((yield step(leaf.load_memory_variables, turn.inputs)))
            return {**turn.inputs, **variables}
        history = yield from _history(turn.memory, turn.messages)
        if self.keys.history_messages:
            return {**turn.value, self.keys.history_messages: history}
        key = self.keys.input_messages
        if key is None and self._takes_dict and _one_message_list(turn.value):
            key = next(iter(turn.value))  # {"messages": [...]} for a runnable that takes it
        if key is not None:
            return {**turn.value, key: [*history, *turn.messages]}
        return [*history, *turn.messages]

    def _saving(self, turn: _Turn, output: Any) -> Steps[None]:
        if turn.inputs is not None:
            saved = {self.keys.output: _saved_output(output, self.keys.output)}
            yield step(turn.memory.save_context, turn.inputs, saved)
        else:
            messages = [*turn.messages, *_output_messages(output, self.keys.output_messages)]
            yield from saving_messages(turn.memory, messages)


def with_memory(
    runnable: Runnable[Any, Any],
    memory: LangChainBaseMemory | MemoryFactory,
    *,
    input_messages_key: str | None = None,
    history_messages_key: str | None = None,
    output_messages_key: str | None = None,
    history_factory_config: Sequence[ConfigurableFieldSpec] | None = None,
    input_key: str = "input",
    output_key: str = "output",
    session_key: str = "session_id",
    max_sessions: int | None = None,
) -> MemoryRunnable:
    """Wrap a runnable so each call sees the memory and is saved to it.

    A port of ``RunnableWithMessageHistory(runnable, get_session_history, ...)``
    is ``with_memory(runnable, get_session_history, ...)``: the same
    arguments, input shapes, outputs and streaming; the factory may return a
    memory (any of ours, or a LangChain classic memory) instead of a history.

    Args:
        runnable: what to run: a chain taking a dict, or a chat model.
        memory: one memory for every call, or a factory called once per session
            with the run config's ``configurable[session_key]`` (or the fields
            of ``history_factory_config``).
        input_messages_key: the input dict's key holding the new messages.
        history_messages_key: the input dict's key the memory's messages go under.
        output_messages_key: the output dict's key holding the answer.
        history_factory_config: the ``configurable`` fields that identify a
            session (``ConfigurableFieldSpec``\\ s), for a factory taking several
            (``user_id``, ``conversation_id``); default: ``session_key``.
        input_key: the key a plain string or message goes under for a runnable
            that takes a dict (variables mode).
        output_key: the output key saved in variables mode.
        session_key: the ``configurable`` field holding the session id.
        max_sessions: keep at most this many per-session memories (see
            :class:`SessionMemories`); None keeps all.

    The output is returned unchanged; a message is saved whole (tool calls kept), a
    dict's ``output_messages_key`` / ``output_key`` entry, or its only one.
    """
    specs = list(history_factory_config or [_session_spec(session_key)])
    sessions = SessionMemories(memory, [s.id for s in specs], max_sessions=max_sessions)
    keys = _Keys(
        input_messages_key, history_messages_key, output_messages_key, input_key, output_key
    )
    return MemoryRunnable(runnable, sessions, specs, keys)


def _session_spec(key: str) -> ConfigurableFieldSpec:
    return ConfigurableFieldSpec(
        id=key,
        annotation=str,
        name="Session ID",
        description="Unique identifier for a session.",
        default="",
        is_shared=True,
    )


def _takes_dict(runnable: Runnable[Any, Any]) -> bool:
    """Whether the runnable's input is a dict (a prompt chain) rather than messages (a model)."""
    try:
        schema = runnable.get_input_jsonschema()
    except Exception:  # a runnable whose schema cannot be built says nothing
        return False
    return schema.get("type") == "object"


def _message_variables(runnable: Runnable[Any, Any]) -> frozenset[str]:
    """The variables the runnable's first prompt takes as a list of messages."""
    first = runnable.first if isinstance(runnable, RunnableSequence) else runnable
    if not isinstance(first, ChatPromptTemplate):
        return frozenset()
    return frozenset(m.variable_name for m in first.messages if isinstance(m, MessagesPlaceholder))


def _history(memory: LangChainBaseMemory, messages: list[BaseMessage]) -> Steps[list[BaseMessage]]:
    """What the memory shows, as messages: chat logs' messages, other memories' text first."""
    query = next((m.text for m in reversed(messages) if isinstance(m, HumanMessage)), "")
    conversation: list[BaseMessage] = []
    for leaf in leaves_of(memory):
        if keeps_chat_log(leaf):
            conversation += yield step(leaf.load_messages)
    text = yield from view_sections(memory, query)
    return [SystemMessage(text), *conversation] if text else conversation


def _one_message_list(value: Any) -> bool:
    """A dict whose only entry is a list of messages (``{"messages": [...]}``)."""
    if not isinstance(value, Mapping) or len(value) != 1:
        return False
    (only,) = value.values()
    return isinstance(only, list | tuple) and all(isinstance(m, BaseMessage) for m in only)


def _input_messages(value: Any, key: str | None) -> list[BaseMessage]:
    """The new messages of a call, by RunnableWithMessageHistory's rules."""
    value = _entry(value, key, "input", "the new messages")
    if isinstance(value, str):
        return [HumanMessage(value)]
    if isinstance(value, BaseMessage):
        return [value]
    if isinstance(value, list | tuple):
        if len(value) == 1 and isinstance(value[0], list):
            value = value[0]  # a batch of one, as chat models take it
        if all(isinstance(m, BaseMessage) for m in value):
            return list(value)
    raise _not_messages(value)


def _output_messages(value: Any, key: str | None) -> list[BaseMessage]:
    """The answer's messages, by RunnableWithMessageHistory's rules."""
    value = _entry(value, key, "output", "the answer")
    if isinstance(value, str):
        return [AIMessage(value)]
    if isinstance(value, BaseMessage):
        return [message_chunk_to_message(value)]  # a stream's sum is stored as a message
    if isinstance(value, list | tuple) and all(isinstance(m, BaseMessage) for m in value):
        return [message_chunk_to_message(m) for m in value]
    raise _not_messages(value)


def _entry(value: Any, key: str | None, side: str, holding: str) -> Any:
    """A mapping's entry under ``key`` (its only one, else ``side``); anything else as it is."""
    if not isinstance(value, Mapping):
        return value
    if key is None:
        key = next(iter(value)) if len(value) == 1 else side
    if key not in value and side == "output" and "generations" in value:
        return value["generations"][0][0]["message"]
    if key not in value:
        raise InvalidInputError(
            f"The {side} has no {key!r} key (keys: {sorted(value)}); pass "
            f"{side}_messages_key=<the key holding {holding}> to with_memory."
        )
    return value[key]


def _not_messages(value: Any) -> InvalidInputError:
    return InvalidInputError(
        f"Expected str, BaseMessage, list[BaseMessage], or tuple[BaseMessage]. Got {value!r:.80}."
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
