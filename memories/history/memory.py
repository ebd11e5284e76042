"""In-process history: the default, like LangChain's ``InMemoryChatMessageHistory``."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import BaseMessage

from memories.history.base import DEFAULT_SESSION_ID, ChatHistory, Entry, select_entries

__all__ = ["InMemoryHistory"]


class InMemoryHistory(ChatHistory):
    """A session's log in a Python list; gone when the process ends.

    Thread-safe. It keeps the message objects it is given, like LangChain's
    ``InMemoryChatMessageHistory`` (memories hand it fresh objects: they copy
    any message a caller passes in); copying on every read or write would
    cost more than the rest of a turn.
    """

    def __init__(self, *, session_id: str = DEFAULT_SESSION_ID) -> None:
        self.session_id = session_id
        self._log: list[Entry] = []
        self._state: dict[str, dict[str, Any]] = {}
        self._humans: list[int] = []  # seqs of human messages: exchange starts, for windows
        self._next_seq = 1
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        # A lock is this process's; a copy or an unpickled history gets its own.
        return {k: v for k, v in self.__dict__.items() if k != "_lock"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def append(self, messages: Sequence[BaseMessage], /) -> list[int]:
        with self._lock:
            seqs = list(range(self._next_seq, self._next_seq + len(messages)))
            for seq, message in zip(seqs, messages, strict=True):
                self._log.append(Entry(seq, message))
                if message.type == "human":
                    self._humans.append(seq)
            self._next_seq += len(messages)
        return seqs

    def entries(self, *, after: int | None = None, last: int | None = None) -> list[Entry]:
        with self._lock:
            return select_entries(self._log, after, last)

    def clear(self) -> None:
        with self._lock:
            self._log.clear()
            self._humans.clear()
            self._state.clear()

    def load_state(self, key: str, /) -> dict[str, Any] | None:
        # Stored by reference: memories treat state as immutable (they save a
        # new dict, never mutate a loaded one), and copying it on every turn
        # would cost more than the rest of a token buffer's work.
        with self._lock:
            return self._state.get(key)

    def save_state(self, key: str, value: dict[str, Any], /) -> None:
        with self._lock:
            self._state[key] = value

    # Nothing here blocks, so the async twins run inline instead of in a thread.

    async def aappend(self, messages: Sequence[BaseMessage], /) -> list[int]:
        return self.append(messages)

    async def aentries(self, *, after: int | None = None, last: int | None = None) -> list[Entry]:
        return self.entries(after=after, last=last)

    async def aclear(self) -> None:
        self.clear()

    async def aload_state(self, key: str, /) -> dict[str, Any] | None:
        return self.load_state(key)

    async def asave_state(self, key: str, value: dict[str, Any], /) -> None:
        self.save_state(key, value)

    def start_of_last_exchanges(self, k: int, /) -> int | None:
        if k <= 0:
            raise ValueError(f"k must be positive, got {k}")
        with self._lock:
            return self._humans[-k] if len(self._humans) >= k else None

    def first_entry(self) -> Entry | None:
        with self._lock:
            return self._log[0] if self._log else None

    async def afirst_entry(self) -> Entry | None:
        return self.first_entry()

    async def astart_of_last_exchanges(self, k: int, /) -> int | None:
        return self.start_of_last_exchanges(k)

    def to_config(self) -> dict[str, Any]:
        return {"type": "memory", "session_id": self.session_id}
