"""Edits by id on an append-only log: replacements, tombstones and cuts, folded in on read.

A history never rewrites a stored message: an edit appends a record naming its
target's ``seq`` (a replacement, a tombstone, or a cut of every message through
it), and reads fold the records in (:func:`fold`): memories see the edited
conversation, the log keeps what was said. An edit always comes after its
target, so folding from any point on gives the exact view from there.
:func:`planned` maps LangGraph's ``add_messages`` onto edits; :func:`repaired`
keeps tool calls and their results together.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from operator import attrgetter

from langchain_core.messages import AIMessage, BaseMessage, RemoveMessage, ToolMessage

from memories.errors import InvalidInputError
from memories.stores.history.records import REMOVE_ALL_MESSAGES, Edit, Entry, Item, NewEdit

__all__ = ["current_ids", "fold", "planned", "repaired", "shown"]


def fold(entries: Iterable[Entry], edits: Iterable[Edit]) -> list[Entry]:
    """The messages as edited: ``entries`` with every edit applied, in log order.

    An edit whose target is not among ``entries`` changes nothing.
    """
    shown = {entry.seq: entry for entry in entries}
    for edit in sorted(edits, key=attrgetter("seq")):
        if edit.through:
            shown = {seq: entry for seq, entry in shown.items() if seq > edit.target}
        elif edit.target in shown:
            if edit.message is None:
                del shown[edit.target]
            else:
                shown[edit.target] = Entry(edit.target, edit.message)
    return sorted(shown.values(), key=attrgetter("seq"))


def shown(records: Sequence[Entry | Edit]) -> list[Entry]:
    """The messages among log ``records`` (in order) with the edits among them applied."""
    edits = [r for r in records if isinstance(r, Edit)]
    entries = [r for r in records if isinstance(r, Entry)]
    return fold(entries, edits) if edits else entries


def current_ids(records: Iterable[Entry | Edit], ids: Iterable[str]) -> dict[str, int]:
    """Where each of ``ids`` is now: the ``seq`` of the shown message with that id.

    ``records``: in log order, every record holding one of ``ids`` and every cut.
    """
    wanted = set(ids)
    found: dict[str, int] = {}
    for record in records:
        if isinstance(record, Entry):
            if record.message.id in wanted:
                found[record.message.id] = record.seq
            continue
        through, target = record.through, record.target
        found = {i: seq for i, seq in found.items() if (seq > target if through else seq != target)}
        if record.message is not None and record.message.id in wanted and not through:
            found[record.message.id] = target
    return found


def planned(
    messages: Sequence[BaseMessage], known: Mapping[str, int], *, last: int | None, session: str
) -> list[Item]:
    """LangGraph's ``add_messages`` applied to a log: the messages and edits to write.

    Args:
        messages: as :meth:`~memories.stores.history.base.ChatHistory.write` takes
            them; a message added earlier in the same list is edited before anything
            is written.
        known: the ``seq`` of each message id already shown in the log.
        last: the ``seq`` of the newest shown message (None: the log shows nothing).
        session: the session's id, for error messages.

    Raises:
        InvalidInputError: a ``RemoveMessage`` names an id that no message has
            (nothing is written).
    """
    known = dict(known)
    items: list[Item | None] = []
    pending: dict[str, int] = {}  # id -> index in items of a message added by this write
    for message in messages:
        message_id = message.id
        if isinstance(message, RemoveMessage):
            if message_id == REMOVE_ALL_MESSAGES:
                items = [None] * len(items)
                pending.clear()
                if last is not None:
                    items.append(NewEdit(last, through=True))
                known.clear()
            elif message_id in pending:
                items[pending.pop(message_id)] = None
            elif message_id in known:
                items.append(NewEdit(known.pop(message_id)))
            else:
                raise InvalidInputError(
                    f"RemoveMessage(id={message_id!r}): no message of session {session!r} has "
                    "that id (it was never saved, or was removed already); nothing was written."
                )
        elif message_id is not None and message_id in pending:
            items[pending[message_id]] = message
        elif message_id is not None and message_id in known:
            items.append(NewEdit(known[message_id], message))
        else:
            if message_id is not None:
                pending[message_id] = len(items)
            items.append(message)
    return [item for item in items if item is not None]


def repaired(items: Sequence[Item], shown: Sequence[Entry]) -> list[Item]:
    """``items`` plus the edits that keep every tool call with its results.

    A removed AI message (or a replacement dropping some of its calls) takes their
    results with it; a removed result takes its call out of the AI message (which
    goes too when it had nothing else to say).

    Args:
        items: messages and edits about to be written.
        shown: the shown messages from the oldest edit target on, in order.
    """
    cuts = [i for i in items if isinstance(i, NewEdit) and i.through]
    cut = max((c.target for c in cuts), default=None)
    edits = {i.target: i for i in items if isinstance(i, NewEdit) and not i.through}

    def now(entry: Entry) -> BaseMessage | None:
        if cut is not None and entry.seq <= cut:
            return None
        edit = edits.get(entry.seq)
        return entry.message if edit is None else edit.message

    gone_calls: set[str] = set()
    for entry in shown:
        gone_calls |= _call_ids(entry.message) - _call_ids(now(entry))
    for entry in shown:
        message = now(entry)
        if isinstance(message, ToolMessage) and message.tool_call_id in gone_calls:
            edits[entry.seq] = NewEdit(entry.seq)

    gone_results = {
        e.message.tool_call_id
        for e in shown
        if isinstance(e.message, ToolMessage) and now(e) is None
    }
    for entry in shown:
        message = now(entry)
        dropped = _call_ids(message) & gone_results
        if not isinstance(message, AIMessage) or not dropped:
            continue
        calls = [c for c in message.tool_calls if c.get("id") not in dropped]
        keeps = calls or message.content
        edits[entry.seq] = NewEdit(
            entry.seq, message.model_copy(update={"tool_calls": calls}) if keeps else None
        )
    new = [i for i in items if not isinstance(i, NewEdit)]
    return [*cuts, *(edits[seq] for seq in sorted(edits)), *new]


def _call_ids(message: BaseMessage | None) -> set[str]:
    if not isinstance(message, AIMessage):
        return set()
    return {call["id"] for call in message.tool_calls if call["id"] is not None}
