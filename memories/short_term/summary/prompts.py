"""Prompt arguments as LangChain's memories take them, checked when the memory is built.

``prompt`` (a template with exactly ``summary`` and ``new_lines``, refused with
LangChain's own message) and ``summary_message_cls`` (a message class, or
``"system"``, ``"human"``, ``"ai"``, ``"chat"`` in a config) as field types.
"""

from __future__ import annotations

from typing import Annotated, Any

from langchain_core.messages import AIMessage, BaseMessage, ChatMessage, HumanMessage, SystemMessage
from langchain_core.prompts import BasePromptTemplate, PromptTemplate
from pydantic import BeforeValidator

from memories.errors import ConfigError

__all__ = [
    "MESSAGE_CLASSES",
    "MessageClassField",
    "SummaryPromptField",
    "message_class_config",
    "prompt_config",
]

_SUMMARY_VARIABLES = frozenset({"summary", "new_lines"})

#: A message class's name in a config -> the class.
MESSAGE_CLASSES: dict[str, type[BaseMessage]] = {
    "system": SystemMessage,
    "human": HumanMessage,
    "ai": AIMessage,
    "chat": ChatMessage,
}


def _summary_prompt(value: Any) -> Any:
    if isinstance(value, str):
        value = PromptTemplate.from_template(value)
    if isinstance(value, BasePromptTemplate):
        variables = value.input_variables
        if set(variables) != _SUMMARY_VARIABLES:
            # LangChain's message, word for word.
            raise ConfigError(
                "Got unexpected prompt input variables. The prompt expects "
                f"{variables}, but it should have {set(_SUMMARY_VARIABLES)}."
            )
    return value


def _message_class(value: Any) -> Any:
    if isinstance(value, str):
        found = MESSAGE_CLASSES.get(value.lower().removesuffix("message"))
        if found is None:
            raise ConfigError(
                f"Unknown summary_message_cls {value!r}; use one of "
                f"{sorted(MESSAGE_CLASSES)} or a BaseMessage subclass."
            )
        return found
    return value


#: A summary prompt: a template (or its string) with the variables ``summary`` and ``new_lines``.
SummaryPromptField = Annotated[BasePromptTemplate, BeforeValidator(_summary_prompt)]
#: A message class, or its name (``"system"``, ``"SystemMessage"``...).
MessageClassField = Annotated[type[BaseMessage], BeforeValidator(_message_class)]


def prompt_config(value: BasePromptTemplate) -> Any:
    """A prompt's config form: its template string when it has one, else the prompt itself."""
    if (
        isinstance(value, PromptTemplate)
        and value.template_format == "f-string"
        and not value.partial_variables
    ):
        return value.template
    return value


def message_class_config(value: type[BaseMessage]) -> Any:
    """A message class's config form: its name when it has one, else the class itself."""
    return next((name for name, cls in MESSAGE_CLASSES.items() if value is cls), value)
