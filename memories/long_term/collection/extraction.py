"""One update of a collection from conversation turns: the model proposes operations on memories.

:class:`ExtractionSession` (no I/O) shows the model the new turns and the related
memories under short aliases (``m1``...: never a stored id, so it cannot invent one
that exists). Every operation of a reply is checked (a known alias, an enabled
operation, valid content); a reply with any error goes back with all of them (bounded
retries), and a reply is taken whole or not at all.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from langchain_core.messages import (
    BaseMessage,
    HumanMessage,
    SystemMessage,
)

from memories.errors import InvalidInputError, LLMError
from memories.kernel.conversation import OperationsReply, operations_tool, proposed_items
from memories.kernel.messages import format_buffer

__all__ = [
    "OPERATIONS_TOOL",
    "OPERATIONS_TOOL_NAME",
    "ExtractionOutcome",
    "ExtractionSession",
    "Operation",
]

OPERATIONS_TOOL_NAME = "update_memories"
OpKind = Literal["insert", "update", "delete"]

#: The tool a model with tool calling answers through.
OPERATIONS_TOOL: dict[str, Any] = operations_tool(
    OPERATIONS_TOOL_NAME,
    "Insert, update or delete memories. Call with an empty list to change nothing.",
    {
        "type": "object",
        "properties": {
            "op": {"type": "string", "enum": ["insert", "update", "delete"]},
            "id": {"type": "string", "description": "the memory's alias, m1..."},
            "content": {"description": "the memory (insert and update)"},
        },
        "required": ["op"],
    },
)


@dataclass(frozen=True)
class Operation:
    """One accepted operation, with the alias resolved to the memory's id."""

    op: OpKind
    """What to do."""
    content: Any = None
    """The new content (insert, update)."""
    memory_id: str | None = None
    """The memory it changes (update, delete)."""


@dataclass(frozen=True)
class ExtractionOutcome:
    """What one update produced."""

    operations: tuple[Operation, ...]
    """The accepted operations (empty: nothing to change, or a failure)."""
    raw: tuple[str, ...]
    """Every reply, as text."""
    error: str | None
    """Why it failed, or None."""


_SYSTEM = """\
You keep a collection of memories about the user: small, self-contained facts, preferences \
and events worth remembering across conversations. You are shown the memories most related to \
the new conversation turns, each under an alias, and the turns. Decide what to change:
- "insert" a memory for something new worth remembering;
- "update" a memory (by its alias) when the turns refine or correct it: give its whole new \
content;
- "delete" a memory (by its alias) only when the turns say it is no longer true and nothing \
replaces it.
Never insert what a memory already says; update it instead. Record only what the turns state \
or clearly imply.{allowed}{content_rule}{instructions}

{reply_format}"""

_TOOL_FORMAT = (
    f"Call {OPERATIONS_TOOL_NAME} with the operations; call it with an empty list when nothing "
    "should change."
)
_TEXT_FORMAT = (
    "Reply with only a JSON array of operations, for example "
    '[{"op": "insert", "content": "..."}, {"op": "update", "id": "m2", "content": "..."}, '
    '{"op": "delete", "id": "m3"}]. Reply [] when nothing should change.'
)
_NOT_JSON = f"Your reply is not a JSON array of operations. {_TEXT_FORMAT}"


def extraction_prompt(
    memories: Sequence[tuple[str, str]],
    turns: Sequence[Sequence[BaseMessage]],
    *,
    allowed: Sequence[OpKind],
    content_rule: str,
    instructions: str | None,
    tools: bool,
) -> list[BaseMessage]:
    """The first two messages of an update: the rules, then the aliased memories and the turns."""
    only = ""
    if len(allowed) < 3:
        only = f"\nOnly these operations are allowed: {', '.join(allowed)}."
    system = _SYSTEM.format(
        allowed=only,
        content_rule=f"\n{content_rule}" if content_rule else "",
        instructions=f"\n\n{instructions.strip()}" if instructions else "",
        reply_format=_TOOL_FORMAT if tools else _TEXT_FORMAT,
    )
    listed = "\n".join(f"{alias}: {text}" for alias, text in memories) or "(none yet)"
    transcript = "\n---\n".join(format_buffer(list(turn), "Human", "AI") for turn in turns)
    body = f"Related memories:\n{listed}\n\nNew conversation turns:\n{transcript}"
    return [SystemMessage(system), HumanMessage(body)]


@dataclass
class ExtractionSession(OperationsReply[tuple[Operation, ...]]):
    """One update: asks for operations, checks them all, sends errors back (bounded).

    Args:
        opening: the first messages (:func:`extraction_prompt`).
        max_retries: how many times a bad reply is sent back.
        tools: whether the model answers through :data:`OPERATIONS_TOOL`.
        aliases: alias -> memory id, for the memories the model was shown.
        allowed: the operations this collection enables.
        check: validates a content (raises InvalidInputError), returns it as stored.
    """

    aliases: Mapping[str, str]
    allowed: Sequence[OpKind]
    check: Callable[[Any], Any]

    tool_name = OPERATIONS_TOOL_NAME

    def outcome(self) -> ExtractionOutcome:
        """The result, once :meth:`request` returns None."""
        return ExtractionOutcome(self.accepted or (), tuple(self._raw), self._error)

    def _accept(self, reply: BaseMessage) -> tuple[Operation, ...]:
        items = proposed_items(reply, OPERATIONS_TOOL_NAME, _NOT_JSON)
        accepted: list[Operation] = []
        problems: list[str] = []
        touched: set[str] = set()
        for i, item in enumerate(items):
            try:
                operation = self._checked(item, i)
            except LLMError as exc:
                problems.append(str(exc))
                continue
            if operation.memory_id is not None:
                if operation.memory_id in touched:
                    problems.append(f"operations[{i}] changes {item.get('id')!r} a second time")
                    continue
                touched.add(operation.memory_id)
            accepted.append(operation)
        if problems:
            raise LLMError("; ".join(problems))
        return tuple(accepted)

    def _checked(self, item: Any, index: int) -> Operation:
        if not isinstance(item, dict):
            raise LLMError(f"operations[{index}] is not an object")
        kind = item.get("op")
        if kind not in ("insert", "update", "delete"):
            raise LLMError(f"operations[{index}] has op {kind!r}; use insert, update or delete")
        if kind not in self.allowed:
            raise LLMError(f"operations[{index}]: {kind} is not allowed here")
        memory_id = None
        if kind != "insert":
            alias = item.get("id")
            memory_id = self.aliases.get(alias) if isinstance(alias, str) else None
            if memory_id is None:
                known = ", ".join(self.aliases) or "none"
                raise LLMError(
                    f"operations[{index}] names the memory {alias!r}, which is not one of the "
                    f"memories shown ({known})"
                )
        content = None
        if kind != "delete":
            try:
                content = self.check(item.get("content"))
            except InvalidInputError as exc:
                raise LLMError(f"operations[{index}]: {exc}") from exc
        return Operation(kind, content, memory_id)
