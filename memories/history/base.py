"""The history contract: an append-only message log per session, plus memory state.

Implementing a subclass
-----------------------
Implement five methods: :meth:`ChatHistory.append`, :meth:`ChatHistory.entries`,
:meth:`ChatHistory.clear`, :meth:`ChatHistory.load_state` and
:meth:`ChatHistory.save_state`. Everything else (LangChain's
``BaseChatMessageHistory`` surface, the async twins, exchange lookup) is written
once here on top of them. Override an async twin only when the backend has a
native async client; override :meth:`ChatHistory.start_of_last_exchanges` when
the backend can answer it with an index.

Why a log plus state
--------------------
Memories never delete history to trim it. The log only grows; each memory keeps
its own derived state (a cursor into the log, token counts, a running summary)
under its own key beside the log. A restarted process reads that state back and
sees the same memory, and nothing the user said is destroyed by trimming.
:meth:`ChatHistory.clear` is the one explicit way to erase a session.
"""

from __future__ import annotations

import bisect
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import BaseMessage, HumanMessage

from memories.kernel.steps import blocking_twin, to_thread

__all__ = ["ChatHistory", "Entry"]

DEFAULT_SESSION_ID = "default"


@dataclass(frozen=True, slots=True)
class Entry:
    """One message of a session's log."""

    seq: int
    """Position in the log: grows with every append, never reused within a session."""
    message: BaseMessage
    """The stored message, exactly as it was appended."""


class ChatHistory(BaseChatMessageHistory, ABC):
    """An append-only log of one session's messages, with per-memory state beside it.

    It is also a LangChain ``BaseChatMessageHistory``, so it works wherever
    LangChain expects one (``RunnableWithMessageHistory``, classic memories).
    """

    session_id: str

    # -- the five methods a backend implements ---------------------------------

    @abstractmethod
    def append(self, messages: Sequence[BaseMessage], /) -> list[int]:
        """Append messages atomically (all or none) and return their sequence numbers."""

    @abstractmethod
    def entries(self, *, after: int | None = None, last: int | None = None) -> list[Entry]:
        """Entries in log order.

        Args:
            after: only entries whose ``seq`` is greater than this.
            last: only the last ``last`` of those (``0`` gives none).
        """

    @abstractmethod
    def clear(self) -> None:
        """Erase the session: every message and every memory's state."""

    @abstractmethod
    def load_state(self, key: str, /) -> dict[str, Any] | None:
        """The state a memory saved under ``key``, or None."""

    @abstractmethod
    def save_state(self, key: str, value: dict[str, Any], /) -> None:
        """Replace the state saved under ``key`` (a JSON-serialisable dict).

        Callers treat state as immutable: they save a new dict and never mutate
        one they loaded, so an in-process backend may keep it by reference.
        """

    # -- derived ----------------------------------------------------------------

    def to_config(self) -> dict[str, Any]:
        """A config that :func:`memories.create_history` turns back into an equal history."""
        raise NotImplementedError(f"{type(self).__name__} cannot be described by a config.")

    def first_entry(self) -> Entry | None:
        """The oldest entry of the log, or None when it is empty."""
        log = self.entries()
        return log[0] if log else None

    def start_of_last_exchanges(self, k: int, /) -> int | None:
        """The ``seq`` of the human message that opens the ``k``-th last exchange.

        An exchange is a human message and everything after it up to the next
        human message. Returns None when the log holds fewer than ``k`` human
        messages (then the window is the whole log). Reads the tail in growing
        chunks, so a long log is not read whole.
        """
        if k <= 0:
            raise ValueError(f"k must be positive, got {k}")
        chunk = max(8, 4 * k)
        while True:
            tail = self.entries(last=chunk)
            humans = [e.seq for e in tail if isinstance(e.message, HumanMessage)]
            if len(humans) >= k:
                return humans[-k]
            if len(tail) < chunk:
                return None
            chunk *= 4

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        """Every message of the session (LangChain's interface; reads the whole log)."""
        return [entry.message for entry in self.entries()]

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """LangChain's interface: append messages."""
        self.append(messages)

    # -- async twins: a thread by default; a native async backend overrides -----

    aappend = blocking_twin(append)
    aentries = blocking_twin(entries)
    aload_state = blocking_twin(load_state)
    asave_state = blocking_twin(save_state)
    afirst_entry = blocking_twin(first_entry)
    astart_of_last_exchanges = blocking_twin(start_of_last_exchanges)

    async def aclear(self) -> None:
        """Async :meth:`clear` (LangChain's base class declares it, so it is written out)."""
        await to_thread(self.clear)

    async def aget_messages(self) -> list[BaseMessage]:
        """LangChain's async interface: every message of the session."""
        return [entry.message for entry in await self.aentries()]

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        """LangChain's async interface: append messages."""
        await self.aappend(messages)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(session_id={self.session_id!r})"


def _seq(entry: Entry) -> int:
    return entry.seq


def select_entries(log: Sequence[Entry], after: int | None, last: int | None) -> list[Entry]:
    """Apply :meth:`ChatHistory.entries`' filters to a log held in order in memory."""
    if last is not None and last < 0:
        raise ValueError(f"last must be >= 0, got {last}")
    start = 0
    if after is not None:
        # seqs are increasing: binary search for the first entry past `after`.
        start = bisect.bisect_right(log, after, key=_seq)
    if last is not None:
        start = max(start, len(log) - last)
    return list(log[start:])
