"""The sync and async paths of a fold hold the same lock: run together, they fold once.

The first wave's async fold did not take the lock the sync fold takes (nor did
``aclear``). Folds are now one loop of steps run by the kernel's runners, and
the runner holds the lock, so no path can drop it.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from memories import InMemoryHistory, SummaryBufferMemory
from memories.kernel.background import Debouncer
from memories.kernel.steps import arun
from memories.stores.history.base import Entry
from tests.helpers import joined
from tests.summary.fakes import ScriptedLLM


class WatchedHistory(InMemoryHistory):
    """An in-memory history whose calls are slow and that counts calls running at once."""

    def __init__(self) -> None:
        super().__init__(session_id="watched")
        self.watching = False
        self.active = 0
        self.overlaps = 0
        self.guard = threading.Lock()

    def _call(self, work: Any) -> Any:
        if not self.watching:
            return work()
        with self.guard:
            self.active += 1
            self.overlaps += self.active > 1
        try:
            time.sleep(0.005)
            return work()
        finally:
            with self.guard:
                self.active -= 1

    def load_state(self, key: str, /) -> dict[str, Any] | None:
        return self._call(lambda: super(WatchedHistory, self).load_state(key))

    def save_state(self, key: str, value: dict[str, Any], /) -> None:
        self._call(lambda: super(WatchedHistory, self).save_state(key, value))

    def entries(self, *, after: int | None = None, last: int | None = None) -> list[Entry]:
        return self._call(lambda: super(WatchedHistory, self).entries(after=after, last=last))


def over_the_limit(history: WatchedHistory, scheduler: Debouncer) -> SummaryBufferMemory:
    """A summary buffer whose turns are over its limit, nothing folded yet."""
    memory = SummaryBufferMemory(
        llm=ScriptedLLM(),
        chat_memory=history,
        max_token_limit=40,
        summarize="background",
        scheduler=scheduler,  # its quiet period never ends during the test
    )
    for i in range(8):
        memory.save_context({"input": f"question number {i} about tea"}, {"output": f"answer {i}"})
    return memory


def fold_both_ways(memory: SummaryBufferMemory) -> None:
    """``prune()`` on a thread and ``aprune()`` on an event loop, at the same time."""
    start = threading.Barrier(2)

    def sync_path() -> None:
        start.wait()
        memory.prune()

    async def async_path() -> None:
        await asyncio.to_thread(start.wait)
        await memory.aprune()

    thread = threading.Thread(target=sync_path)
    thread.start()
    asyncio.run(async_path())
    joined(thread)


def folded_once(scheduler: Debouncer) -> tuple[int | None, int]:
    """Where one fold alone leaves the same conversation: (fold point, unfolded messages)."""
    alone = over_the_limit(WatchedHistory(), scheduler)
    alone.prune()
    status = alone.status()
    return status.folded, status.unfolded_messages


def test_sync_and_async_folds_together_fold_once_under_one_lock() -> None:
    with Debouncer(delay=3600) as scheduler:
        history = WatchedHistory()
        memory = over_the_limit(history, scheduler)
        history.watching = True
        fold_both_ways(memory)
        history.watching = False
        status = memory.status()
        assert history.overlaps == 0
        assert (status.folded, status.unfolded_messages) == folded_once(scheduler)
        # A fold that lost the race was discarded, not stacked on the winner's.
        assert status.summary.startswith("summary ")
        assert status.failures == 0


def test_the_check_fails_when_the_async_path_drops_the_lock(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The overlap counter above can fail: with the async runner unlocked, calls interleave."""

    async def unlocked(self: SummaryBufferMemory) -> None:
        await arun(self._prune_steps())

    monkeypatch.setattr(SummaryBufferMemory, "aprune", unlocked)
    with Debouncer(delay=3600) as scheduler:
        history = WatchedHistory()
        memory = over_the_limit(history, scheduler)
        history.watching = True
        for _ in range(3):
            fold_both_ways(memory)
        assert history.overlaps > 0
