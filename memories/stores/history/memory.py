"""In-process history: the default, like LangChain's ``InMemoryChatMessageHistory``."""

from __future__ import annotations

import bisect
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from memories.errors import InvalidInputError
from memories.kernel.checks import whole_number
from memories.kernel.retention import Retention
from memories.kernel.steps import inline_twin
from memories.stores.history.base import (
    DEFAULT_SESSION_ID,
    ChatHistory,
    Entry,
    later,
    nth_last,
    select_entries,
)
from memories.stores.history.edits import fold
from memories.stores.history.records import Edit, Item, NewEdit

__all__ = ["InMemoryHistory"]


class InMemoryHistory(ChatHistory):
    """A session's log in a Python list; gone when the process ends.

    Thread-safe. It keeps the message objects it is given, as LangChain's
    ``InMemoryChatMessageHistory`` does (memories copy a caller's messages; a copy
    on every read would cost more than the turn), and the shown log beside the
    written one (an edit folded in once, when written).
    """

    keeps_times = True

    def __init__(
        self, *, session_id: str = DEFAULT_SESSION_ID, clock: Callable[[], float] = time.time
    ) -> None:
        self.session_id = session_id
        self.clock = clock
        self._next_seq = 1  # never reset: a seq is not reused within a session
        self._lock = threading.Lock()
        self._empty()

    def _empty(self) -> None:
        """No records and no state, as built (:meth:`clear` under the lock)."""
        self._records: list[Entry | Edit] = []  # the log as written
        self._times: list[float] = []  # when each record was written
        self._log: list[Entry] = []  # the messages shown: edits applied
        self._edits: list[Edit] = []
        self._state: dict[str, dict[str, Any]] = {}
        self._humans: list[int] = []  # seqs of shown human messages: exchange starts, for windows
        self._ids: dict[str, int] = {}  # message id -> seq of the shown message

    def __getstate__(self) -> dict[str, Any]:
        # A lock is this process's; a copy or an unpickled history gets its own.
        return {k: v for k, v in self.__dict__.items() if k != "_lock"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def record(self, items: Sequence[Item], /) -> list[int]:
        with self._lock:
            seqs = list(range(self._next_seq, self._next_seq + len(items)))
            self._times.extend([self.clock()] * len(items))
            edits = []
            for seq, item in zip(seqs, items, strict=True):
                if isinstance(item, NewEdit):
                    edits.append(Edit.written(item, seq))
                    self._records.append(edits[-1])
                    continue
                entry = Entry(seq, item)
                self._records.append(entry)
                self._log.append(entry)
                if item.type == "human":
                    self._humans.append(seq)
                if item.id is not None:
                    self._ids[item.id] = seq
            self._next_seq += len(items)
            if edits:
                self._edits.extend(edits)
                self._log = fold(self._log, edits)
                self._derive()
        return seqs

    def _derive(self) -> None:
        """Recompute the indexes of the shown log (after an edit or a purge); under the lock."""
        self._humans = [e.seq for e in self._log if e.message.type == "human"]
        self._ids = {e.message.id: e.seq for e in self._log if e.message.id is not None}

    def expired_through(self, retention: Retention, /, *, now: float) -> int | None:
        with self._lock:
            cutoff = retention.cutoff(now)
            old = None
            if cutoff is not None:
                written = bisect.bisect_left(self._times, cutoff)  # written before the cutoff
                old = self._records[written - 1].seq if written else None
            through = nth_last(self._records, retention)
        return later(old, through)

    def purge(self, through: int, /, *, batch: int = 500, dry_run: bool = False) -> int:
        # One list in one process: a batch is moot, the whole purge is one step under the lock.
        with self._lock:
            gone = [_expired(r, through) for r in self._records]
            if dry_run:
                return sum(gone)
            self._records = [r for r, g in zip(self._records, gone, strict=True) if not g]
            self._times = [t for t, g in zip(self._times, gone, strict=True) if not g]
            self._edits = [e for e in self._edits if not _expired(e, through)]
            self._log = [e for e in self._log if e.seq > through]
            self._derive()
            return sum(gone)

    def records(self, *, after: int | None = None) -> list[Entry | Edit]:
        with self._lock:
            return select_entries(self._records, after, None)

    def entries(self, *, after: int | None = None, last: int | None = None) -> list[Entry]:
        with self._lock:
            return select_entries(self._log, after, last)

    def edits(self, *, after: int | None = None) -> list[Edit]:
        with self._lock:
            return [e for e in self._edits if after is None or e.seq > after]

    def seqs_of(self, ids: Iterable[str], /) -> dict[str, int]:
        with self._lock:
            return {i: self._ids[i] for i in ids if i in self._ids}

    def clear(self) -> None:
        with self._lock:
            self._empty()

    def load_state(self, key: str, /) -> dict[str, Any] | None:
        # By reference: states are immutable (ChatHistory.save_state), and a copy
        # every turn would cost more than the rest of a token buffer's work.
        with self._lock:
            return self._state.get(key)

    def save_state(self, key: str, value: dict[str, Any], /) -> None:
        with self._lock:
            self._state[key] = value

    def state_keys(self, prefix: str = "", /) -> list[str]:
        with self._lock:
            return sorted(k for k in self._state if k.startswith(prefix))

    def start_of_last_exchanges(self, k: int, /) -> int | None:
        whole_number(k, "k", least=1, error=InvalidInputError)
        with self._lock:
            return self._humans[-k] if len(self._humans) >= k else None

    def first_entry(self) -> Entry | None:
        with self._lock:
            return self._log[0] if self._log else None

    async def aclear(self) -> None:  # LangChain's base class declares it: written out
        self.clear()

    def to_config(self) -> dict[str, Any]:
        return {"type": "memory", "session_id": self.session_id}


# Nothing here blocks, so the async twins run inline instead of in a thread
# (each calls this class's method of the name).
for _name in (
    *("record", "append", "changes", "seqs_of", "state_and_changes", "entries", "load_state"),
    *("save_state", "first_entry", "start_of_last_exchanges", "last_exchanges"),
):
    setattr(InMemoryHistory, f"a{_name}", inline_twin(getattr(ChatHistory, _name)))


def _expired(record: Entry | Edit, through: int) -> bool:
    """Whether a purge through ``through`` deletes ``record`` (an edit goes with its target)."""
    return record.seq <= through or (isinstance(record, Edit) and record.target <= through)
