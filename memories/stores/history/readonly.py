"""A history seen without writing to it: what a memory would show, computed in place.

``memories inspect`` shows each memory's derived state and its view, which a
memory brings up to date as it loads (a token buffer saves its window). On a
:class:`ReadOnlyView` the state a memory saves stays in the view, so looking
never writes to the store.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any

from memories.stores.history.base import Changes, ChatHistory, HistoryView
from memories.stores.history.records import Item

__all__ = ["ReadOnlyView"]


class ReadOnlyView(HistoryView):
    """Reads go to ``history``; saved state stays here; every write is refused."""

    def __init__(self, history: ChatHistory) -> None:
        super().__init__(history)
        self._state: dict[str, dict[str, Any]] = {}

    def record(self, items: Sequence[Item], /) -> list[int]:
        """Refused: a read-only view writes nothing."""
        raise PermissionError(f"{self!r} is read-only: nothing can be appended or edited.")

    def clear(self) -> None:
        """Refused: a read-only view writes nothing."""
        raise PermissionError(f"{self!r} is read-only: nothing can be cleared.")

    def purge(self, through: int, /, *, batch: int = 500, dry_run: bool = False) -> int:
        """Refused: a read-only view writes nothing."""
        raise PermissionError(f"{self!r} is read-only: nothing can be purged.")

    sweep_store = ChatHistory.sweep_store  # through purge: refused when something expired
    to_config = ChatHistory.to_config  # a view is no history of its own

    def state_and_changes(
        self, key: str, /, *, after: int | None, edits_after: int | None
    ) -> tuple[dict[str, Any] | None, Changes]:
        """The state saved in this view (else the history's) and the history's changes."""
        if key in self._state:
            return self._state[key], self.changes(after=after, edits_after=edits_after)
        return self.history.state_and_changes(key, after=after, edits_after=edits_after)

    def load_state(self, key: str, /) -> dict[str, Any] | None:
        """The state saved in this view, else the history's."""
        return self._state[key] if key in self._state else self.history.load_state(key)

    def save_state(self, key: str, value: dict[str, Any], /) -> None:
        """Keep the state in this view; the history is left as it was."""
        self._state[key] = value

    def state_keys(self, prefix: str = "", /) -> list[str]:
        """The history's keys and this view's own."""
        mine = [k for k in self._state if k.startswith(prefix)]
        return sorted({*self.history.state_keys(prefix), *mine})

    def batch(self, *, write: bool) -> AbstractContextManager[None] | None:
        """The history's read batch (a view writes nothing)."""
        return self.history.batch(write=False)
