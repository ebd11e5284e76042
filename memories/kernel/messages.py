"""Turning chain values into messages, and messages into text or JSON.

Pure functions shared by every memory and every history backend.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    get_buffer_string,
    message_to_dict,
    messages_from_dict,
)

from memories.errors import BackendError, InvalidInputError
from memories.kernel.bounded_json import lone_surrogate

__all__ = [
    "dump_message",
    "format_buffer",
    "load_message",
    "message_text",
    "to_message",
    "turn_messages",
]


def to_message(value: Any, role: type[HumanMessage] | type[AIMessage], what: str) -> BaseMessage:
    """Make the message one side of a turn is stored as.

    Strings and content-block lists become ``role`` messages; a message is kept
    as it is (an ``AIMessage`` keeps its tool calls, ids and metadata).

    Raises:
        InvalidInputError: ``value`` is None or of a type no chat model accepts.
    """
    if isinstance(value, BaseMessage):
        # A copy: the caller keeps its object, and mutating it later must not
        # change what was stored.
        return value.model_copy(deep=True)
    if isinstance(value, str):
        return role(content=value)
    if isinstance(value, list) and all(isinstance(block, str | dict) for block in value):
        return role(content=value)
    shown = "None" if value is None else f"{type(value).__name__} {value!r:.80}"
    raise InvalidInputError(
        f"The {what} must be a string, a list of content blocks or a langchain message; "
        f"got {shown}. Convert it to text before saving it to memory."
    )


def turn_messages(input_value: Any, output_value: Any) -> list[BaseMessage]:
    """The two messages one chain run is stored as (validated before anything is written)."""
    return [
        to_message(input_value, HumanMessage, "input"),
        to_message(output_value, AIMessage, "output"),
    ]


def message_text(message: BaseMessage) -> str:
    """The plain text of a message, tool calls included, for token counting and search."""
    text = str(message.text)
    if isinstance(message, AIMessage) and message.tool_calls:
        calls = json.dumps([[c["name"], c["args"]] for c in message.tool_calls], default=str)
        text = f"{text}\n{calls}" if text else calls
    return text


def check_storable(messages: Sequence[BaseMessage], /) -> list[BaseMessage]:
    """``messages``, after checking that every text in them can be stored as UTF-8.

    A lone surrogate (``"\\ud800"``, from a bad decode upstream) cannot be written
    to SQLite, Chroma or a file, and a list content that is not LangChain content
    blocks (strings, dicts with a ``"type"``) would show as an empty turn: both
    are refused here, before anything is written, on every backend alike.

    Raises:
        InvalidInputError: a lone surrogate in a text or name, or a content list
            holding something that is not a content block.
    """
    for message in messages:
        _check_blocks(message)
        content = message.content
        body = content if isinstance(content, str) else message_text(message)
        for text in (body, message.name or ""):
            at = None if text.isascii() else lone_surrogate(text)  # the common case, inline
            if at is not None:
                raise InvalidInputError(
                    f"A {type(message).__name__} holds {text[at]!r} at position {at}, a lone "
                    "surrogate that no store can write; decode the text with errors='replace' "
                    "before saving it."
                )
    return list(messages)


def checked_messages(
    messages: Sequence[BaseMessage],
    /,
    what: str = "save_messages takes a list of LangChain messages",
    hint: str = "Use save_context for plain input and output values.",
) -> list[BaseMessage]:
    """``messages`` as ``save_messages`` takes them (``what``, ``hint``: another's words)."""
    listed = isinstance(messages, Sequence) and not isinstance(messages, str | bytes)
    wrong = [m for m in messages if not isinstance(m, BaseMessage)] if listed else [messages]
    if wrong:
        raise InvalidInputError(f"{what}; got {wrong[0]!r:.80}. {hint}")
    return check_storable(messages)


def checked_message(message: BaseMessage, /) -> BaseMessage:
    """``message`` as ``edit_message`` takes it: one storable message."""
    what = "edit_message takes a LangChain message as the new message"
    return checked_messages([message], what, "Build one, such as AIMessage('new text').")[0]


def _check_blocks(message: BaseMessage) -> None:
    if isinstance(message.content, str):
        return
    for i, block in enumerate(message.content):
        if isinstance(block, str) or (
            isinstance(block, dict) and isinstance(block.get("type"), str) and block["type"]
        ):
            continue
        raise InvalidInputError(
            f"A {type(message).__name__}'s content[{i}] is {block!r:.80}, not a content block: "
            "give a string, or a dict with a 'type' such as {'type': 'text', 'text': '...'}."
        )


def format_buffer(messages: Sequence[BaseMessage], human_prefix: str, ai_prefix: str) -> str:
    """LangChain's ``get_buffer_string``: ``"Human: hi\\nAI: hello"``; plain messages written
    here alike (LangChain's read of each one's ``text`` property cost a load 80 µs)."""
    prefixes = {HumanMessage: human_prefix, AIMessage: ai_prefix, SystemMessage: "System"}
    lines = []
    for m in messages:
        prefix = prefixes.get(type(m)) if isinstance(m.content, str) else None
        if isinstance(m, AIMessage) and (m.tool_calls or "function_call" in m.additional_kwargs):
            prefix = None
        if prefix is None:
            lines.append(get_buffer_string([m], human_prefix=human_prefix, ai_prefix=ai_prefix))
        else:
            lines.append(f"{prefix}: {m.content}")
    return "\n".join(lines)


def dump_message(message: BaseMessage) -> str:
    """Serialise a message to JSON, losslessly (tool calls, names, ids, kwargs)."""
    try:
        text = json.dumps(message_to_dict(message), ensure_ascii=False)
        text.encode("utf-8")
        return text
    except UnicodeEncodeError as exc:
        raise InvalidInputError(
            f"A {type(message).__name__} cannot be stored: it holds a lone surrogate "
            f"({exc.object[exc.start : exc.end]!r}); decode its text with errors='replace'."
        ) from exc
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(
            f"A {type(message).__name__} cannot be stored: {exc}. "
            "additional_kwargs and metadata must be JSON-serialisable."
        ) from exc


def load_message(text: str) -> BaseMessage:
    """Inverse of :func:`dump_message`."""
    try:
        return messages_from_dict([json.loads(text)])[0]
    except (ValueError, KeyError, TypeError) as exc:
        raise BackendError(
            f"A stored message is not valid JSON of a message: {text!r:.120}"
        ) from exc
