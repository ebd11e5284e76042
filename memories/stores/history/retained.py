"""A history seen through a retention policy: what expired is hidden at once, swept or not.

What a retention hides, deletes and keeps: ``docs/retention.md``. Writes and memory
state go to the wrapped history untouched; the wrapper's config is the wrapped history's.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any, cast

from memories.kernel.retention import Retention
from memories.kernel.steps import to_thread
from memories.stores.history.base import Changes, ChatHistory, Edit, Entry, HistoryView

__all__ = ["RetainedHistory"]


class RetainedHistory(HistoryView):
    """``history`` with every record the ``retention`` expires hidden from reads.

    Args:
        history: the history that holds the log (its ``clock`` tells the time).
        retention: how much of the log is kept.
    """

    def __init__(self, history: ChatHistory, retention: Retention) -> None:
        if retention.keep_days is not None and not history.keeps_times:
            raise history._no_write_times()
        super().__init__(history)
        self.retention = retention
        # The horizon this thread computed in the current batch: a turn reads it once.
        self._batch = threading.local()

    def horizon(self) -> int | None:
        """The last ``seq`` the retention expires now (None: nothing expired).

        Computed once inside a :meth:`batch`, so a turn sees one consistent view.
        """
        known = getattr(self._batch, "horizon", _UNKNOWN)
        if known is not _UNKNOWN:
            return cast("int | None", known)
        horizon = self.history.expired_through(self.retention, now=self.history.clock())
        if getattr(self._batch, "depth", 0):
            self._batch.horizon = horizon
        return horizon

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "_batch"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._batch = threading.local()

    async def ahorizon(self) -> int | None:
        """Async :meth:`horizon` (a read of the store: on a thread)."""
        return await to_thread(self.horizon)

    def _after(self, after: int | None) -> int | None:
        """``after``, moved up to the horizon."""
        return _moved(after, self.horizon())

    # -- reads: start after the horizon ---------------------------------------

    def records(self, *, after: int | None = None) -> list[Entry | Edit]:
        return self.history.records(after=self._after(after))

    def entries(self, *, after: int | None = None, last: int | None = None) -> list[Entry]:
        return self.history.entries(after=self._after(after), last=last)

    def edits(self, *, after: int | None = None) -> list[Edit]:
        horizon = self.horizon()
        return _live(self.history.edits(after=_moved(after, horizon)), horizon)

    def changes(self, *, after: int | None, edits_after: int | None) -> Changes:
        horizon = self.horizon()
        found = self.history.changes(
            after=_moved(after, horizon), edits_after=_moved(edits_after, horizon)
        )
        return Changes(found.entries, _live(found.edits, horizon))

    def state_and_changes(
        self, key: str, /, *, after: int | None, edits_after: int | None
    ) -> tuple[dict[str, Any] | None, Changes]:
        horizon = self.horizon()
        state, found = self.history.state_and_changes(
            key, after=_moved(after, horizon), edits_after=_moved(edits_after, horizon)
        )
        return state, Changes(found.entries, _live(found.edits, horizon))

    def seqs_of(self, ids: Iterable[str], /) -> dict[str, int]:
        horizon = self.horizon()
        found = self.history.seqs_of(ids)
        return found if horizon is None else {i: s for i, s in found.items() if s > horizon}

    def start_of_last_exchanges(self, k: int, /) -> int | None:
        start = self.history.start_of_last_exchanges(k)
        horizon = self.horizon()
        # An exchange that opened before the horizon: what is left of the log is the window.
        return None if start is None or (horizon is not None and start <= horizon) else start

    # What expired is hidden from these too: written on the reads above, as any history's.
    count, first_entry = ChatHistory.count, ChatHistory.first_entry
    last_exchanges = ChatHistory.last_exchanges

    # -- writes, state and retention: the wrapped history's (HistoryView) ----

    def batch(self, *, write: bool) -> AbstractContextManager[None] | None:
        inner = self.history.batch(write=write)
        return None if inner is None else self._batched(inner)

    @contextmanager
    def _batched(self, inner: AbstractContextManager[None]) -> Iterator[None]:
        state = self._batch
        state.depth = getattr(state, "depth", 0) + 1
        try:
            with inner:
                yield
        finally:
            state.depth -= 1
            if not state.depth:
                state.__dict__.pop("horizon", None)

    def sweep_session(self, *, batch: int = 500, dry_run: bool = False) -> int:
        """Delete what the retention expires now in this session only; rows deleted.

        A memory's background job runs it (:meth:`sweep` covers a whole shared
        store); ``dry_run`` only counts.
        """
        through = self.horizon()
        return 0 if through is None else self.history.purge(through, batch=batch, dry_run=dry_run)

    def sweep(self, *, batch: int = 500, dry_run: bool = False) -> dict[str, int]:
        """Delete what the retention expires now: this session, or every session of a shared store.

        Returns:
            Rows deleted (or, with ``dry_run``, that would be) per session.
        """
        return self.history.sweep_store(self.retention, batch=batch, dry_run=dry_run)

    def __repr__(self) -> str:
        return f"RetainedHistory({self.history!r}, {self.retention!r})"


_UNKNOWN = object()


def _live(edits: list[Edit], horizon: int | None) -> list[Edit]:
    """The edits that change a message still shown (an expired target's edit changes nothing:
    left in, it would make a summary that folded the message start over)."""
    return edits if horizon is None else [e for e in edits if e.target > horizon]


def _moved(after: int | None, horizon: int | None) -> int | None:
    """A read's start moved up to the horizon."""
    return after if horizon is None or (after is not None and after > horizon) else horizon
