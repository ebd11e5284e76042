"""Any LangChain ``BaseChatMessageHistory`` used as a memories history.

A migrating user passes ``chat_memory=SomeLangChainHistory(...)``; the memory
wraps it here. Sequence numbers are list positions (1-based). LangChain's
histories have no place for derived state, so memory state lives in this
object only: a restarted process rebuilds it from the log (correct, but it
re-reads and, for a token buffer, re-counts the tail once). Use
:class:`~memories.history.sql.SQLiteHistory` to keep that state too.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import BaseMessage

from memories.history.base import DEFAULT_SESSION_ID, ChatHistory, Entry, select_entries

__all__ = ["LangChainHistory"]


class LangChainHistory(ChatHistory):
    """Adapts a LangChain chat message history to the :class:`ChatHistory` contract."""

    def __init__(self, history: BaseChatMessageHistory, /) -> None:
        self.history = history
        self.session_id = str(getattr(history, "session_id", DEFAULT_SESSION_ID))
        self._state: dict[str, dict[str, Any]] = {}

    def append(self, messages: Sequence[BaseMessage], /) -> list[int]:
        before = len(self.history.messages)
        self.history.add_messages(list(messages))
        return list(range(before + 1, before + 1 + len(messages)))

    def entries(self, *, after: int | None = None, last: int | None = None) -> list[Entry]:
        log = [Entry(i, m) for i, m in enumerate(self.history.messages, start=1)]
        return select_entries(log, after, last)

    def clear(self) -> None:
        self.history.clear()
        self._state.clear()

    def load_state(self, key: str, /) -> dict[str, Any] | None:
        value = self._state.get(key)
        return copy.deepcopy(value) if value is not None else None

    def save_state(self, key: str, value: dict[str, Any], /) -> None:
        self._state[key] = copy.deepcopy(value)

    def __repr__(self) -> str:
        return f"LangChainHistory({self.history!r})"
