"""What a memory class can do, declared on the class and read by every tool.

The CLI, the agent middleware, the LangGraph nodes and the contract test
suite ask ``type(memory).capabilities`` (or walk ``memory.leaves()``), never
``hasattr`` or a class name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["Capabilities", "Scope", "capabilities_of"]

#: What a memory's data is keyed by: a chat session, a namespace (a user, an
#: agent, shared by sessions), or nothing it stores itself.
Scope = Literal["session", "namespace", "none"]


@dataclass(frozen=True)
class Capabilities:
    """A memory class's declared abilities."""

    scope: Scope = "none"
    """What its stored data is keyed by (``session``: ``chat_memory.session_id``;
    ``namespace``: its ``namespace`` field; ``none``: it stores nothing itself)."""
    chat_log: bool = False
    """It keeps the session's messages in a history (``chat_memory``)."""
    searchable: bool = False
    """It has ``search(query, *, k, filter)`` ranking what it stores."""
    exportable: bool = False
    """``memories export`` writes what it stores and ``memories import`` reads it back
    (an export names what it leaves out)."""
    deferred: bool = False
    """It may defer work (``flush`` / ``close`` / ``status`` report on it)."""
    composite: bool = False
    """It holds other memories; ``leaves()`` lists them."""
    message_edits: bool = False
    """It keeps documents of messages by their id and follows ``delete_messages`` /
    ``edit_message`` (a chat log follows edits through ``save_messages``)."""
    expires: bool = False
    """What it stores may expire (a retention, a time to live): ``sweep(*, batch, dry_run)``
    deletes what expired and returns the count per session or namespace."""


def capabilities_of(memory: Any, /) -> Capabilities:
    """What ``memory`` (or a memory class) declares it can do (a LangChain memory: nothing)."""
    declared = getattr(memory if isinstance(memory, type) else type(memory), "capabilities", None)
    return declared if isinstance(declared, Capabilities) else Capabilities()
