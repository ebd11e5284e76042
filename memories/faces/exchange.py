"""Agent turns and memories: which messages a turn is, how a memory saves it, how it is shown.

An agent's turn is a list of messages (the user's, tool calls and results, the answer), not
one input and one output. The create_agent middleware, the LangGraph nodes and ``memories
chat`` save turns and show memories through these functions, so the rules live in one
place: a chat memory stores a turn whole (its window stays a valid chat sequence), any other
gets ``save_context``; a view splits into conversation messages and text sections.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
)

from memories.core.base import keeps_chat_log
from memories.core.combined import leaves_of, saves_of
from memories.core.langchain import LangChainBaseMemory
from memories.kernel.capabilities import capabilities_of
from memories.kernel.messages import format_buffer
from memories.kernel.steps import Steps, step, twins
from memories.stores.history.records import REMOVE_ALL_MESSAGES

__all__ = [
    "DEFAULT_HEADER",
    "MemoryView",
    "aapply_message_edits",
    "apply_message_edits",
    "asave_exchange",
    "aview_memory",
    "editing_messages",
    "last_exchange",
    "save_exchange",
    "saving_exchange",
    "saving_messages",
    "turn_query",
    "view_memory",
    "view_sections",
]

#: The line above a memory's text in a system message.
DEFAULT_HEADER = "## Memory\nWhat you remember from earlier conversations with this user."


def last_exchange(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """The last human message and everything after it (all messages when there is none)."""
    for index in range(len(messages) - 1, -1, -1):
        if isinstance(messages[index], HumanMessage):
            return list(messages[index:])
    return list(messages)


def turn_query(messages: Sequence[BaseMessage]) -> str:
    """The text of the turn's user message (of :func:`last_exchange`), for a memory to search."""
    exchange = last_exchange(messages)
    return exchange[0].text if exchange else ""


def _input_and_answer(exchange: Sequence[BaseMessage]) -> tuple[BaseMessage, BaseMessage] | None:
    """The user's message and the final answer of a turn, or None when it has neither."""
    human = next((m for m in exchange if isinstance(m, HumanMessage)), None)
    if human is None or len(exchange) < 2 or exchange[-1] is human:
        return None
    final = exchange[-1]
    if not isinstance(final, AIMessage):
        # A tool that returns directly ends the turn; its result is the answer.
        final = AIMessage(content=final.content)
    return human, final


def _save_context_args(
    memory: LangChainBaseMemory, human: BaseMessage, final: BaseMessage
) -> tuple[dict[str, Any], dict[str, Any]]:
    input_key = getattr(memory, "input_key", None) or "input"
    output_key = getattr(memory, "output_key", None) or "output"
    if capabilities_of(memory).message_edits:
        # The messages themselves, so that the memory knows their ids and follows their edits.
        return {input_key: _text_only(human)}, {output_key: _text_only(final)}
    return {input_key: human.text}, {output_key: final.text}


def _text_only(message: BaseMessage) -> BaseMessage:
    """``message`` as its text with its id (a final answer's tool calls are not the turn)."""
    return type(message)(content=message.text, id=message.id) if message.id else message


def _save_exchange_steps(
    memory: LangChainBaseMemory, exchange: Sequence[BaseMessage], tool_messages: bool = True
) -> Steps[bool]:
    """Save one agent turn to a memory; False when it has no human message or no answer.

    Args:
        memory: any of our memories, or any LangChain classic memory.
        exchange: the turn's messages, from :func:`last_exchange`.
        tool_messages: store AI tool calls and tool results in chat memories too;
            False keeps only the user's message and the final answer.
    """
    pair = _input_and_answer(exchange)
    if pair is None:
        return False
    yield from saving_messages(memory, list(exchange) if tool_messages else list(pair))
    return True


save_exchange, asave_exchange = twins(_save_exchange_steps)
saving_exchange = _save_exchange_steps
"""The steps of :func:`save_exchange`, for a loop of one's own."""


def saving_messages(memory: LangChainBaseMemory, messages: list[BaseMessage]) -> Steps[None]:
    """Steps that save messages to a memory: whole to a chat log, else as one input and output.

    Each member of a combined memory saves (a read-only member's save does
    nothing, as in a chain); members sharing a history write it once, the
    others follow (:func:`~memories.core.combined.saves_of`).
    """
    for save in saves_of(memory):
        member = save.memory
        if save.follower is not None:
            yield step(save.follower.follow_history)
        elif keeps_chat_log(member):
            yield step(member.save_messages, messages)
        else:
            yield step(member.save_context, *_save_context_args(member, messages[0], messages[-1]))


def _apply_message_edits_steps(
    memory: LangChainBaseMemory, edits: Sequence[BaseMessage]
) -> Steps[int]:
    """Apply edits (``RemoveMessage``, replacements by id) to every chat log in ``memory``.

    Each takes them through ``save_messages`` (its derived state follows), once per shared
    history. Returns how many memories took them (0: none keeps a chat log).

    Raises:
        InvalidInputError: a ``RemoveMessage`` names an id no message has.
    """
    done = 0
    for save in saves_of(memory):
        member = save.memory
        if save.follower is not None:
            yield step(save.follower.follow_history)
        elif keeps_chat_log(member):
            yield step(member.save_messages, list(edits))
        elif capabilities_of(member).message_edits:
            yield from _editing_documents(member, edits)
        else:
            continue
        done += 1
    return done


apply_message_edits, aapply_message_edits = twins(_apply_message_edits_steps)
editing_messages = _apply_message_edits_steps
"""The steps of :func:`apply_message_edits`, for a loop of one's own."""


def _editing_documents(memory: Any, edits: Sequence[BaseMessage]) -> Steps[None]:
    """Edits for a memory that keeps documents of messages (a vector memory).

    ``REMOVE_ALL_MESSAGES`` clears a conversation's messages, not long-term
    recall: it leaves the documents (``clear()`` forgets a session's).
    """
    removed = [m.id for m in edits if isinstance(m, RemoveMessage) and m.id != REMOVE_ALL_MESSAGES]
    if removed:
        yield step(memory.delete_messages, removed)
    for message in edits:
        if not isinstance(message, RemoveMessage) and message.id is not None:
            yield step(memory.edit_message, message.id, message)


@dataclass(frozen=True)
class MemoryView:
    """What a memory shows, split into conversation messages and text sections."""

    messages: tuple[BaseMessage, ...] = ()
    """Conversation messages (a chat memory's window), oldest first; never system messages."""
    sections: tuple[tuple[str, str], ...] = ()
    """``(variable name, text)`` pairs: summaries, recalled facts, profiles, fixed values."""
    conversation: bool = False
    """Whether a memory gave its view of the conversation as messages (even an empty one).

    True: ``messages`` replaces the caller's message history; False: the memory said nothing
    about the conversation (a profile), and the caller's messages stay.
    """

    def __add__(self, other: MemoryView) -> MemoryView:
        return MemoryView(
            self.messages + other.messages,
            self.sections + other.sections,
            self.conversation or other.conversation,
        )

    def system_text(self, header: str = "") -> str:
        """The sections as one block of text for a system message ('' when there are none)."""
        parts = [f"{name}:\n{text}" for name, text in self.sections if text.strip()]
        if not parts:
            return ""
        body = "\n\n".join(parts)
        return f"{header}\n{body}" if header else body


def _from_messages(name: str, messages: Sequence[BaseMessage]) -> MemoryView:
    # A summary memory shows its summary as a leading system message; chat APIs
    # take one system message, first, so system text goes to the sections.
    system = "\n".join(m.text for m in messages if isinstance(m, SystemMessage))
    rest = tuple(m for m in messages if not isinstance(m, SystemMessage))
    return MemoryView(rest, ((name, system),) if system else (), conversation=True)


def _from_variables(
    variables: dict[str, Any], as_messages: bool, human_prefix: str, ai_prefix: str
) -> MemoryView:
    view = MemoryView()
    for name, value in variables.items():
        if isinstance(value, list) and all(isinstance(m, BaseMessage) for m in value):
            if as_messages:
                view += _from_messages(name, value)
            elif value:
                view += MemoryView(
                    sections=((name, format_buffer(value, human_prefix, ai_prefix)),)
                )
        elif value not in (None, "", [], {}):
            view += MemoryView(sections=((name, value if isinstance(value, str) else str(value)),))
    return view


def _view_memory_steps(
    memory: LangChainBaseMemory, query: str, *, as_messages: bool
) -> Steps[MemoryView]:
    """What ``memory`` shows for a turn whose user message is ``query``.

    Args:
        memory: any of our memories, or any LangChain classic memory.
        query: the user's message (a vector memory searches with it).
        as_messages: give a chat memory's window as messages; False renders it
            as text in a section (``"Human: ...\\nAI: ..."``).
    """
    return _viewing(leaves_of(memory), query, as_messages)


view_memory, aview_memory = twins(_view_memory_steps)


def _viewing(leaves: list[LangChainBaseMemory], query: str, as_messages: bool) -> Steps[MemoryView]:
    view = MemoryView()
    for leaf in leaves:
        if as_messages and keeps_chat_log(leaf):
            view += _from_messages(leaf.memory_key, (yield step(leaf.load_messages)))
        else:
            inputs = {getattr(leaf, "input_key", None) or "input": query}
            variables = yield step(leaf.load_memory_variables, inputs)
            prefixes = getattr(leaf, "human_prefix", "Human"), getattr(leaf, "ai_prefix", "AI")
            view += _from_variables(variables, as_messages, *prefixes)
    return view


def view_sections(memory: LangChainBaseMemory, query: str) -> Steps[str]:
    """Steps giving what the memories without a chat log show, as one block of text."""
    others = [leaf for leaf in leaves_of(memory) if not keeps_chat_log(leaf)]
    return (yield from _viewing(others, query, False)).system_text()
