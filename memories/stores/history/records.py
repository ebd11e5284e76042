"""What a session's log holds: messages (:class:`Entry`) and edit records (:class:`Edit`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from langchain_core.messages import BaseMessage, message_to_dict, messages_from_dict

__all__ = ["REMOVE_ALL_MESSAGES", "Edit", "Entry", "Item", "NewEdit"]

#: LangGraph's id for "remove every message" (``langgraph.graph.message.REMOVE_ALL_MESSAGES``).
REMOVE_ALL_MESSAGES = "__remove_all__"


@dataclass(frozen=True, slots=True)
class Entry:
    """One message of a session's log."""

    seq: int
    """Position in the log: grows with every append, never reused within a session."""
    message: BaseMessage
    """The stored message, exactly as it was appended (or as an edit replaced it)."""


@dataclass(frozen=True, slots=True)
class NewEdit:
    """An edit about to be written: what it changes, not yet where it sits in the log."""

    target: int
    """The ``seq`` of the message it changes (with ``through``: the last one it removes)."""
    message: BaseMessage | None = None
    """The replacement; None removes the target."""
    through: bool = False
    """Remove every message up to and including ``target``."""

    @property
    def kind(self) -> str:
        """``"replace"``, ``"remove"`` or ``"remove_through"``: how a backend files it."""
        if self.through:
            return "remove_through"
        return "remove" if self.message is None else "replace"

    def body(self) -> dict[str, Any]:
        """The JSON form a backend stores (target, cut flag, replacement)."""
        message = None if self.message is None else message_to_dict(self.message)
        return {"target": self.target, "through": self.through, "message": message}


@dataclass(frozen=True, slots=True)
class Edit(NewEdit):
    """An edit record of the log."""

    seq: int = 0
    """Its own place in the log (always after its target's)."""

    @classmethod
    def written(cls, edit: NewEdit, seq: int) -> Edit:
        """``edit`` as the record written at ``seq``."""
        return cls(edit.target, edit.message, edit.through, seq)

    @classmethod
    def from_body(cls, body: dict[str, Any], seq: int) -> Edit:
        """Inverse of :meth:`NewEdit.body`, as the record written at ``seq``.

        Raises:
            KeyError, TypeError, ValueError: ``body`` is not an edit's JSON form.
        """
        message = body["message"]
        replacement = None if message is None else messages_from_dict([message])[0]
        return cls(int(body["target"]), replacement, bool(body["through"]), seq)


#: What a write appends: a new message, or an edit of one already there.
Item = BaseMessage | NewEdit
