"""A turn's document and the messages it was made of: their ids in its metadata.

A turn's document text is its input part, a newline, and its output part
(``"input: ...\\noutput: ..."``); its metadata says where the output starts
(:mod:`~memories.stores.vector.embedded`) and names the messages when they had
ids, so the document follows an edit of either: deleted with the message, or
re-indexed with the new text in the edited part.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from langchain_core.messages import BaseMessage

from memories.errors import InvalidInputError
from memories.kernel.messages import checked_message, message_text
from memories.stores.vector.embedded import OUTPUT_AT_KEY
from memories.stores.vector.outbox import OutboxRow
from memories.stores.vector.records import SearchResult

__all__ = [
    "INPUT_MESSAGE_KEY",
    "OUTPUT_AT_KEY",
    "OUTPUT_MESSAGE_KEY",
    "TurnParts",
    "checked_message",
    "edited",
    "of_messages",
]

#: Metadata: the id of the message the turn's input part was made of.
INPUT_MESSAGE_KEY = "input_message_id"
#: Metadata: the id of the message the turn's output part was made of.
OUTPUT_MESSAGE_KEY = "output_message_id"


@dataclass(frozen=True)
class TurnParts:
    """One turn's document text in its two parts, and the ids of the messages behind them."""

    input: str
    output: str
    input_id: str | None = None
    output_id: str | None = None

    @property
    def text(self) -> str:
        """The document text (a part left empty adds no line)."""
        return "\n".join(part for part in (self.input, self.output) if part)

    @property
    def metadata(self) -> dict[str, Any]:
        """What the document's metadata says about its parts: where the output starts, the ids."""
        ids = {INPUT_MESSAGE_KEY: self.input_id, OUTPUT_MESSAGE_KEY: self.output_id}
        named = {key: value for key, value in ids.items() if value is not None}
        both = self.input and self.output
        return {**named, OUTPUT_AT_KEY: len(self.input) + 1} if both else named


def of_messages(ids: Sequence[str]) -> dict[str, Any]:
    """A metadata filter matching the documents of turns made of any of these messages.

    Raises:
        InvalidInputError: ``ids`` is not a non-empty list of strings.
    """
    if isinstance(ids, str) or not ids or not all(isinstance(i, str) and i for i in ids):
        raise InvalidInputError(f"Give a non-empty list of message ids (strings), got {ids!r:.80}.")
    wanted = list(dict.fromkeys(ids))
    return {"$or": [{INPUT_MESSAGE_KEY: {"$in": wanted}}, {OUTPUT_MESSAGE_KEY: {"$in": wanted}}]}


def edited(doc: SearchResult, message_id: str, new_message: BaseMessage) -> OutboxRow:
    """``doc`` (a turn made of message ``message_id``) with ``new_message``'s text in that part."""
    at = int(doc.metadata[OUTPUT_AT_KEY])
    parts = TurnParts(
        doc.text[: at - 1],
        doc.text[at:],
        doc.metadata.get(INPUT_MESSAGE_KEY),
        doc.metadata.get(OUTPUT_MESSAGE_KEY),
    )
    text = message_text(new_message)
    if parts.input_id == message_id:
        parts = replace(parts, input=_relabelled(parts.input, text))
    if parts.output_id == message_id:
        parts = replace(parts, output=_relabelled(parts.output, text))
    return OutboxRow(
        doc.id, parts.text, {**doc.metadata, **parts.metadata}, needs_turn=False, replace=True
    )


def _relabelled(part: str, text: str) -> str:
    """``"key: old"`` with ``text`` after the key."""
    key, separator, _ = part.partition(": ")
    return f"{key}{separator}{text}" if separator else text
