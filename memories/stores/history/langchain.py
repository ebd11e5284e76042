"""Any LangChain ``BaseChatMessageHistory`` used as a memories history.

Sequence numbers are list positions (1-based). LangChain's histories have no
place for derived state, so it lives in this object only: a restarted process
rebuilds it from the log (:class:`~memories.stores.history.sql.SQLiteHistory`
keeps it). An edit is stored as a ``RemoveMessage`` holding it in
``additional_kwargs["memories_edit"]``: LangChain's histories store any
message, and LangGraph's readers know a ``RemoveMessage``.
"""

from __future__ import annotations

import copy
from collections.abc import Hashable, Sequence
from typing import Any

from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import BaseMessage, RemoveMessage

from memories.errors import BackendError
from memories.stores.history.base import DEFAULT_SESSION_ID, ChatHistory, Entry, select_entries
from memories.stores.history.edits import shown
from memories.stores.history.records import Edit, Item, NewEdit

__all__ = ["LangChainHistory"]

_EDIT_KEY = "memories_edit"


class LangChainHistory(ChatHistory):
    """Adapts a LangChain chat message history to the :class:`ChatHistory` contract."""

    def __init__(self, history: BaseChatMessageHistory, /) -> None:
        self.history = history
        self.session_id = str(getattr(history, "session_id", DEFAULT_SESSION_ID))
        self._state: dict[str, dict[str, Any]] = {}

    def record(self, items: Sequence[Item], /) -> list[int]:
        before = len(self.history.messages)
        self.history.add_messages([_stored(item) for item in items])
        return list(range(before + 1, before + 1 + len(items)))

    def records(self, *, after: int | None = None) -> list[Entry | Edit]:
        log = [_record(seq, m) for seq, m in enumerate(self.history.messages, start=1)]
        return log if after is None else log[after:]

    def entries(self, *, after: int | None = None, last: int | None = None) -> list[Entry]:
        return select_entries(shown(self.records()), after, last)

    def clear(self) -> None:
        self.history.clear()
        self._state.clear()

    def load_state(self, key: str, /) -> dict[str, Any] | None:
        value = self._state.get(key)
        return copy.deepcopy(value) if value is not None else None

    def save_state(self, key: str, value: dict[str, Any], /) -> None:
        self._state[key] = copy.deepcopy(value)

    def log_key(self) -> Hashable:
        return ("object", id(self.history), self.session_id)

    def state_keys(self, prefix: str = "", /) -> list[str]:
        return sorted(k for k in self._state if k.startswith(prefix))

    def __repr__(self) -> str:
        return f"LangChainHistory({self.history!r})"


def _stored(item: Item) -> BaseMessage:
    if not isinstance(item, NewEdit):
        return item
    return RemoveMessage(
        id=f"memories-{item.kind}-{item.target}", additional_kwargs={_EDIT_KEY: item.body()}
    )


def _record(seq: int, message: BaseMessage) -> Entry | Edit:
    if not isinstance(message, RemoveMessage):
        return Entry(seq, message)
    try:
        return Edit.from_body(message.additional_kwargs[_EDIT_KEY], seq)
    except (ValueError, KeyError, TypeError) as exc:
        raise BackendError(
            f"The wrapped history holds {message!r:.120}, which is not an edit this "
            "library wrote; a LangChain history's messages are shown as they are."
        ) from exc
