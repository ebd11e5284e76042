"""The whole conversation: LangChain's ``ConversationBufferMemory``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from langchain_core.messages import BaseMessage
from pydantic import field_validator

from memories.core.base import ChatMemory
from memories.errors import ConfigError
from memories.kernel.keys import turn_messages_for
from memories.kernel.messages import format_buffer
from memories.kernel.steps import Steps, step

__all__ = ["BufferMemory", "StringBufferMemory"]


class BufferMemory(ChatMemory):
    """Shows every message of the session.

    Loading reads the whole log, so the prompt grows with the conversation:
    use :class:`~memories.short_term.window.WindowMemory` or
    :class:`~memories.short_term.token_buffer.TokenBufferMemory` to bound it.
    """

    config_type: ClassVar[str] = "buffer"
    _makes_calls: ClassVar[bool] = False

    def _selection(self) -> Steps[list[BaseMessage]]:
        entries = yield step(self.chat_memory.entries)
        return [entry.message for entry in entries]


class StringBufferMemory(BufferMemory):
    """LangChain's ``ConversationStringBufferMemory``: the buffer as one string.

    Its string (loaded, and ``buffer``) starts with a newline before each exchange, exactly
    as LangChain's does (``"\\nHuman: hi\\nAI: hello"``); ``return_messages`` must stay False.
    """

    config_type: ClassVar[str] = "string_buffer"
    langchain_names: ClassVar[dict[str, str]] = {"buffer": "initial_buffer"}
    initial_buffer: str = ""  # LangChain's buffer=: text shown before the turns, until clear()

    @field_validator("return_messages")
    @classmethod
    def _strings_only(cls, value: bool) -> bool:
        if value:
            raise ConfigError("return_messages must be False for ConversationStringBufferMemory")
        return value

    def _format(self, messages: list[BaseMessage]) -> str:
        text = format_buffer(messages, self.human_prefix, self.ai_prefix)
        return self.initial_buffer + (f"\n{text}" if text else "")

    def _turn(self, inputs: Mapping[str, Any], outputs: Mapping[str, Any]) -> list[BaseMessage]:
        # Several outputs and no output_key: LangChain's raises, guessing no "output".
        return turn_messages_for(self, inputs, outputs, guess=False)

    def _clear_steps(self) -> Steps[None]:
        self.initial_buffer = ""  # LangChain's clear() empties the buffer it was given
        yield from super()._clear_steps()
