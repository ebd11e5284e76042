"""The memory contract every memory class implements.

``BaseMemory`` is LangChain's classic memory interface (it subclasses
LangChain's own base class, see :mod:`memories._langchain`) plus configuration:
``to_config()`` describes the memory so :func:`memories.create_memory` can
rebuild it.

Implementing a subclass
-----------------------
A memory over a chat history subclasses :class:`ChatMemory` and implements two
methods: :meth:`ChatMemory._select` and its async twin :meth:`ChatMemory._aselect`,
which return the messages the memory shows. Saving, formatting, key selection,
clearing and configuration are written once here. A memory that derives state
from the log (a cursor, token counts, a summary) overrides
:meth:`ChatMemory._after_save` / :meth:`ChatMemory._aafter_save` too, and keeps
that state in the history under :meth:`ChatMemory.state_key`.

A memory that is not a chat log (vector recall, a profile) subclasses
:class:`BaseMemory` and implements LangChain's four members and their async
twins; it calls :func:`memories.keys.select_turn` to pick its input and output.
"""

from __future__ import annotations

import hashlib
import json
from abc import abstractmethod
from collections.abc import Mapping, Sequence
from functools import cached_property
from typing import Any, ClassVar

from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import BaseMessage
from pydantic import ConfigDict, Field, ValidationError, field_validator

from memories._langchain import LangChainBaseMemory
from memories.errors import ConfigError, InvalidInputError
from memories.history.base import ChatHistory
from memories.history.langchain import LangChainHistory
from memories.history.memory import InMemoryHistory
from memories.keys import turn_messages_for
from memories.messages import format_buffer

__all__ = ["BaseMemory", "ChatMemory"]


class BaseMemory(LangChainBaseMemory):
    """A conversation memory: LangChain's classic interface, configurable by dict.

    Constructor arguments are keyword arguments with defaults, stored under the
    same name; an unknown argument is an error. Conversation state lives in a
    backend, never in these fields, so ``to_config()`` round-trips exactly.
    """

    model_config = ConfigDict(
        arbitrary_types_allowed=True, extra="forbid", validate_assignment=True
    )

    #: The name this class has in configs and in the registry (``"buffer"``, ...).
    config_type: ClassVar[str]

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            # Pydantic wraps the ConfigErrors our validators raise; give the user ours back.
            raise ConfigError(f"Bad options for {type(self).__name__}: {_reasons(exc)}") from exc

    def __setattr__(self, name: str, value: Any) -> None:
        try:
            super().__setattr__(name, value)
        except ValidationError as exc:
            raise ConfigError(
                f"Bad value for {type(self).__name__}.{name}: {_reasons(exc)}"
            ) from exc
        if name in type(self).model_fields:
            # Configuration changed: forget what was derived from it (cached properties).
            for base in type(self).__mro__:
                for attribute, member in vars(base).items():
                    if isinstance(member, cached_property):
                        self.__dict__.pop(attribute, None)

    def to_config(self) -> dict[str, Any]:
        """A config that :func:`memories.create_memory` turns back into an equal memory.

        Holds the ``type`` and every argument that differs from its default.

        Raises:
            ConfigError: an argument (a model object, a custom callable) has no
                config form; pass it by name or rebuild the memory in code.
        """
        config: dict[str, Any] = {"type": self.config_type}
        for name, field in type(self).model_fields.items():
            value = getattr(self, name)
            default = field.get_default(call_default_factory=True)
            if value == default:
                continue
            if field.exclude:
                raise ConfigError(
                    f"{type(self).__name__}.{name} is set to {value!r:.60}, which has no config "
                    "form; leave it at its default to describe this memory by config."
                )
            form = self._config_value(name, value)
            if isinstance(default, ChatHistory) and form == self._config_value(name, default):
                continue
            config[field.alias or name] = form
        return config

    def _config_value(self, name: str, value: Any) -> Any:
        """The config form of one argument; subclasses extend it for their own types."""
        if isinstance(value, ChatHistory):
            try:
                return value.to_config()
            except NotImplementedError as exc:
                raise ConfigError(
                    f"{type(self).__name__}.{name} is a {value!r}, which has no config form; "
                    "use a memories history (SQLiteHistory, SQLHistory) to describe it by config."
                ) from exc
        if value is None or isinstance(value, str | int | float | bool):
            return value
        if isinstance(value, list | tuple) and all(isinstance(v, str | int | float) for v in value):
            return list(value)
        raise ConfigError(
            f"{type(self).__name__}.{name} = {value!r:.80} has no config form. "
            "Give it by name (a string) or build this memory in code."
        )


def _reasons(exc: ValidationError) -> str:
    """Pydantic's errors as one line each, with our own error messages kept word for word."""
    lines = []
    for error in exc.errors():
        cause = (error.get("ctx") or {}).get("error")
        where = ".".join(str(p) for p in error["loc"])
        message = str(cause) if isinstance(cause, Exception) else error["msg"]
        lines.append(f"{where}: {message}" if where else message)
    return "; ".join(lines)


class ChatMemory(BaseMemory):
    """A memory over a chat history: buffer, window, token buffer, summaries.

    Args:
        chat_memory: where the session's messages live. A memories history
            (``InMemoryHistory`` by default, ``SQLiteHistory`` to survive a
            restart), any LangChain ``BaseChatMessageHistory``, or a history
            config dict such as ``{"type": "sqlite", "path": "chat.db", "session_id": "u1"}``.
        memory_key: the variable the memory fills in the prompt.
        input_key: the chain input to store; by default the only input that is
            not a memory variable or ``"stop"``.
        output_key: the chain output to store; by default the only output, or ``"output"``.
        return_messages: give a list of messages instead of one string.
        human_prefix: the speaker name of human messages in the string form.
        ai_prefix: the speaker name of AI messages in the string form.
    """

    chat_memory: ChatHistory = Field(default_factory=InMemoryHistory)
    memory_key: str = "history"
    input_key: str | None = None
    output_key: str | None = None
    return_messages: bool = False
    human_prefix: str = "Human"
    ai_prefix: str = "AI"

    @field_validator("chat_memory", mode="before")
    @classmethod
    def _as_history(cls, value: Any) -> ChatHistory:
        if isinstance(value, ChatHistory):
            return value
        if isinstance(value, BaseChatMessageHistory):
            return LangChainHistory(value)
        if isinstance(value, Mapping):
            from memories.config import create_history

            return create_history(value)
        raise ConfigError(
            f"chat_memory must be a history (memories.InMemoryHistory, SQLiteHistory, a "
            f"LangChain BaseChatMessageHistory) or a history config dict; got {value!r:.80}"
        )

    # -- what subclasses implement --------------------------------------------

    @abstractmethod
    def _select(self) -> list[BaseMessage]:
        """The messages this memory shows now."""

    @abstractmethod
    async def _aselect(self) -> list[BaseMessage]:
        """Async :meth:`_select`."""

    def _after_save(self) -> None:
        """Update derived state after a turn was appended (default: none)."""

    async def _aafter_save(self) -> None:
        """Async :meth:`_after_save`."""

    def _state_parameters(self) -> dict[str, Any]:
        """The arguments that shape this memory's derived state (default: none)."""
        return {}

    @cached_property
    def state_key(self) -> str:
        """Where this memory keeps its derived state in the history.

        It names the type, the memory key and a digest of the arguments that
        shape the state, so changing ``max_token_limit`` starts a fresh state
        instead of reusing one computed for another limit. Computed once per
        configuration (every turn reads it).
        """
        shape = json.dumps(self._state_parameters(), sort_keys=True, default=str)
        digest = hashlib.sha1(shape.encode(), usedforsecurity=False).hexdigest()[:12]
        return f"{self.config_type}:{self.memory_key}:{digest}"

    # -- LangChain's interface, written once ----------------------------------

    @property
    def memory_variables(self) -> list[str]:
        """The prompt variables this memory fills: ``[memory_key]``."""
        return [self.memory_key]

    def _turn(self, inputs: Mapping[str, Any], outputs: Mapping[str, Any]) -> list[BaseMessage]:
        """The messages a chain run is stored as; raises before anything is written."""
        return turn_messages_for(self, inputs, outputs)

    def save_context(self, inputs: dict[str, Any], outputs: dict[str, Any]) -> None:
        """Append the run's input and output to the history, then update derived state."""
        self.chat_memory.append(self._turn(inputs, outputs))
        self._after_save()

    async def asave_context(self, inputs: dict[str, Any], outputs: dict[str, Any]) -> None:
        """Async :meth:`save_context`: the same work, awaited."""
        await self.chat_memory.aappend(self._turn(inputs, outputs))
        await self._aafter_save()

    def save_messages(self, messages: Sequence[BaseMessage], /) -> None:
        """Append whole messages (an agent turn with its tool calls), then update derived state.

        ``save_context`` stores one input and one output; an agent's turn is a
        human message, AI messages with tool calls, tool results and the final
        answer, and a window must be able to keep them together.

        Raises:
            InvalidInputError: an item is not a LangChain message (nothing is written).
        """
        self.chat_memory.append(_checked_messages(messages))
        self._after_save()

    async def asave_messages(self, messages: Sequence[BaseMessage], /) -> None:
        """Async :meth:`save_messages`: the same work, awaited."""
        await self.chat_memory.aappend(_checked_messages(messages))
        await self._aafter_save()

    def load_memory_variables(self, inputs: dict[str, Any]) -> dict[str, Any]:
        """``{memory_key: buffer}``: a string, or messages with ``return_messages=True``."""
        return {self.memory_key: self._format(self._select())}

    async def aload_memory_variables(self, inputs: dict[str, Any]) -> dict[str, Any]:
        """Async :meth:`load_memory_variables`: the same work, awaited."""
        return {self.memory_key: self._format(await self._aselect())}

    def clear(self) -> None:
        """Erase the session: its messages and every memory's state in the history."""
        self.chat_memory.clear()

    async def aclear(self) -> None:
        """Async :meth:`clear`."""
        await self.chat_memory.aclear()

    def _format(self, messages: list[BaseMessage]) -> str | list[BaseMessage]:
        if self.return_messages:
            return messages
        return format_buffer(messages, self.human_prefix, self.ai_prefix)

    @property
    def buffer(self) -> str | list[BaseMessage]:
        """What the memory shows, as a string or as messages (``return_messages``)."""
        return self._format(self._select())

    async def abuffer(self) -> str | list[BaseMessage]:
        """Async :attr:`buffer`."""
        return self._format(await self._aselect())

    @property
    def buffer_as_str(self) -> str:
        """What the memory shows, as LangChain's ``get_buffer_string``."""
        return format_buffer(self._select(), self.human_prefix, self.ai_prefix)

    async def abuffer_as_str(self) -> str:
        """Async :attr:`buffer_as_str`."""
        return format_buffer(await self._aselect(), self.human_prefix, self.ai_prefix)

    @property
    def buffer_as_messages(self) -> list[BaseMessage]:
        """What the memory shows, as messages."""
        return self._select()

    async def abuffer_as_messages(self) -> list[BaseMessage]:
        """Async :attr:`buffer_as_messages`."""
        return await self._aselect()


def _checked_messages(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    wrong = [m for m in messages if not isinstance(m, BaseMessage)]
    if isinstance(messages, str | bytes) or wrong:
        shown = messages if isinstance(messages, str | bytes) else wrong[0]
        raise InvalidInputError(
            f"save_messages takes a list of LangChain messages; got {shown!r:.80}. "
            "Use save_context for plain input and output values."
        )
    return list(messages)
