"""A history seen without writing to it: what a memory would show, computed in place.

``memories inspect`` shows each memory's derived state and its view, which a
memory brings up to date as it loads (a token buffer saves its window). On a
:class:`ReadOnlyView` the state a memory saves stays in the view, so looking
never writes to the store.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from memories.stores.history.base import Changes, ChatHistory, Edit, Entry
from memories.stores.history.records import Item

if TYPE_CHECKING:
    from memories.kernel.retention import Retention
    from memories.stores.sql import Database

__all__ = ["ReadOnlyView"]


class ReadOnlyView(ChatHistory):
    """Reads go to ``history``; saved state stays here; appending or clearing is refused."""

    def __init__(self, history: ChatHistory) -> None:
        self.history = history
        self.session_id = history.session_id
        # What the history can do, the view can read: a retention in days needs write times.
        self.lists_sessions = history.lists_sessions  # type: ignore[misc]
        self.keeps_times = history.keeps_times  # type: ignore[misc]
        self._state: dict[str, dict[str, Any]] = {}

    def record(self, items: Sequence[Item], /) -> list[int]:
        """Refused: a read-only view writes nothing."""
        raise PermissionError(f"{self!r} is read-only: nothing can be appended or edited.")

    def records(self, *, after: int | None = None) -> list[Entry | Edit]:
        """The history's log as written."""
        return self.history.records(after=after)

    def count(self) -> int:
        """How many messages the history shows."""
        return self.history.count()

    def edits(self, *, after: int | None = None) -> list[Edit]:
        """The history's edit records."""
        return self.history.edits(after=after)

    def changes(self, *, after: int | None, edits_after: int | None) -> Changes:
        """As the history answers it (a backend may answer it in one query)."""
        return self.history.changes(after=after, edits_after=edits_after)

    def state_and_changes(
        self, key: str, /, *, after: int | None, edits_after: int | None
    ) -> tuple[dict[str, Any] | None, Changes]:
        """The state saved in this view (else the history's) and the history's changes."""
        if key in self._state:
            return self._state[key], self.changes(after=after, edits_after=edits_after)
        return self.history.state_and_changes(key, after=after, edits_after=edits_after)

    def seqs_of(self, ids: Iterable[str], /) -> dict[str, int]:
        """As the history answers it."""
        return self.history.seqs_of(ids)

    def entries(self, *, after: int | None = None, last: int | None = None) -> list[Entry]:
        """The history's entries."""
        return self.history.entries(after=after, last=last)

    def clear(self) -> None:
        """Refused: a read-only view writes nothing."""
        raise PermissionError(f"{self!r} is read-only: nothing can be cleared.")

    def load_state(self, key: str, /) -> dict[str, Any] | None:
        """The state saved in this view, else the history's."""
        return self._state[key] if key in self._state else self.history.load_state(key)

    def save_state(self, key: str, value: dict[str, Any], /) -> None:
        """Keep the state in this view; the history is left as it was."""
        self._state[key] = value

    def log_key(self) -> Hashable:
        return self.history.log_key()

    def state_keys(self, prefix: str = "", /) -> list[str]:
        """The history's keys and this view's own."""
        mine = [k for k in self._state if k.startswith(prefix)]
        return sorted({*self.history.state_keys(prefix), *mine})

    @property
    def database(self) -> Database | None:
        """The history's database."""
        return self.history.database

    def batch(self, *, write: bool) -> AbstractContextManager[None] | None:
        """The history's read batch (a view writes nothing)."""
        return self.history.batch(write=False)

    def last_exchanges(self, k: int, /) -> list[Entry]:
        """As the history answers it (a backend may answer it in one query)."""
        return self.history.last_exchanges(k)

    def horizon(self) -> int | None:
        """The history's horizon (a retained history hides what expired)."""
        return self.history.horizon()

    async def ahorizon(self) -> int | None:
        """Async :meth:`horizon`."""
        return await self.history.ahorizon()

    def expired_through(self, retention: Retention, /, *, now: float) -> int | None:
        """As the history answers it."""
        return self.history.expired_through(retention, now=now)

    def first_entry(self) -> Entry | None:
        """The history's oldest entry."""
        return self.history.first_entry()

    def start_of_last_exchanges(self, k: int, /) -> int | None:
        """As the history answers it (a backend may answer it in one query)."""
        return self.history.start_of_last_exchanges(k)

    def __repr__(self) -> str:
        return repr(self.history)
