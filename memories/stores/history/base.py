"""The history contract: an append-only message log per session, plus memory state.

Implementing a subclass
-----------------------
Implement :meth:`ChatHistory.record`, :meth:`ChatHistory.records`,
:meth:`ChatHistory.entries`, :meth:`ChatHistory.clear`,
:meth:`ChatHistory.load_state` and :meth:`ChatHistory.save_state`; the rest
(LangChain's ``BaseChatMessageHistory``, edits by id with LangGraph's
``add_messages`` semantics, exchange lookup, the async twins) is written once
here. Override an async twin for a native async client, and
:meth:`ChatHistory.start_of_last_exchanges`, :meth:`ChatHistory.changes` or
:meth:`ChatHistory.seqs_of` where an index answers them.

Memories never delete history to trim it: each keeps its derived state (a
cursor, token counts, a summary) under its own key beside the log, and an edit
appends a record (:mod:`memories.stores.history.edits`), so a restarted process
sees the same memory and the log keeps what was said. :meth:`ChatHistory.clear`
is the one way to erase a session.
"""

from __future__ import annotations

import bisect
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable, Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from operator import attrgetter
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import BaseMessage, HumanMessage, RemoveMessage, ToolMessage

from memories.errors import InvalidInputError
from memories.kernel.checks import whole_number
from memories.kernel.retention import Retention
from memories.kernel.steps import Steps, blocking_twin, inline_twin, run, step, twins
from memories.stores.history.edits import current_ids, planned, repaired
from memories.stores.history.records import REMOVE_ALL_MESSAGES, Edit, Entry, Item, NewEdit

if TYPE_CHECKING:
    from memories.stores.sql import Database

__all__ = ["Changes", "ChatHistory", "Edit", "Entry", "HistoryView", "MessageRef", "SessionCount"]

DEFAULT_SESSION_ID = "default"

#: How a message is named in an edit: its ``id``, or its ``seq`` in the log
#: (messages saved by ``save_context`` have no id).
MessageRef = str | int
_Record = TypeVar("_Record", bound=Entry | Edit)


@dataclass(frozen=True, slots=True)
class Changes:
    """What a memory's derived state has not seen yet (:meth:`ChatHistory.changes`)."""

    entries: list[Entry]
    """The shown messages after the state's cursor, edits applied."""
    edits: list[Edit]
    """The edit records after the state's edit cursor, whatever they target."""

    def touches(self, through: int | None) -> bool:
        """Whether an edit changed a message at or before ``through`` (the state is stale)."""
        if through is None:
            return False
        return any(edit.target <= through for edit in self.edits)

    def edit_cursor(self, previous: int | None) -> int | None:
        """The edit cursor after these changes."""
        return max((e.seq for e in self.edits), default=previous)


@dataclass(frozen=True, slots=True)
class SessionCount:
    """A session of a shared store, as :meth:`ChatHistory.sessions` lists it."""

    session_id: str
    """The session."""
    messages: int
    """How many messages its log holds as written (edit records not counted)."""
    edits: int
    """How many edit records its log holds."""
    first_at: float
    """When its first record was written (Unix time)."""
    last_at: float
    """When its last record was written (Unix time)."""


class ChatHistory(BaseChatMessageHistory, ABC):
    """An append-only log of one session's messages, with per-memory state beside it.

    Also a LangChain ``BaseChatMessageHistory`` (``RunnableWithMessageHistory``, classic memories).
    """

    session_id: str
    lists_sessions: ClassVar[bool] = False
    """Whether :meth:`sessions` lists the other sessions of the same store."""
    keeps_times: ClassVar[bool] = False
    """Whether the log knows when each record was written (a ``keep_days`` retention needs it)."""
    clock: Callable[[], float] = time.time
    """The time records are stamped with (Unix seconds); a test injects its own."""

    # -- the six methods a backend implements ---------------------------------

    @abstractmethod
    def record(self, items: Sequence[Item], /) -> list[int]:
        """Append messages and edit records atomically (all or none), in order.

        Returns:
            The ``seq`` each item was written at.
        """

    @abstractmethod
    def records(self, *, after: int | None = None) -> list[Entry | Edit]:
        """The log as written (the audit trail): every message as first stored and every edit."""

    @abstractmethod
    def entries(self, *, after: int | None = None, last: int | None = None) -> list[Entry]:
        """The messages shown now (edits applied), in log order.

        Args:
            after: only entries whose ``seq`` is greater than this.
            last: only the last ``last`` of those (``0`` gives none).
        """

    @abstractmethod
    def clear(self) -> None:
        """Erase the session: every message and every memory's state."""

    def held(self) -> dict[str, int]:
        """What :meth:`clear` erases, by kind (here its records; a backend may say more)."""
        return {"chat log rows": len(self.records())}

    @abstractmethod
    def load_state(self, key: str, /) -> dict[str, Any] | None:
        """The state a memory saved under ``key``, or None."""

    @abstractmethod
    def save_state(self, key: str, value: dict[str, Any], /) -> None:
        """Replace the state saved under ``key`` (a JSON-serialisable dict).

        Callers never mutate a state they loaded, so a backend may keep it by reference.
        """

    def log_key(self) -> Hashable:
        """What names this session's log: histories with equal keys read and write one log.

        By default the object itself; a database backend names its database and session.
        """
        return ("object", id(self), self.session_id)

    def state_keys(self, prefix: str = "", /) -> list[str]:
        """The keys of this session's saved states that start with ``prefix``, sorted.

        A memory looks here once for a state under an older form of its key
        (:mod:`memories.core.state_keys`); a backend that cannot list raises
        :class:`NotImplementedError`, and the memory uses its current key.
        """
        raise NotImplementedError(f"{type(self).__name__} cannot list its saved states")

    # -- derived ----------------------------------------------------------------

    def append(self, messages: Sequence[BaseMessage], /) -> list[int]:
        """Append messages atomically (all or none) and return their sequence numbers.

        Raises:
            InvalidInputError: a ``RemoveMessage`` is among them (give it to :meth:`write`).
        """
        if any(isinstance(m, RemoveMessage) for m in messages):
            raise InvalidInputError(
                "append() stores messages as they are; a RemoveMessage is an edit: "
                "pass the list to write() (or a memory's save_messages) instead."
            )
        return self.record(messages)

    def edits(self, *, after: int | None = None) -> list[Edit]:
        """The edit records after ``after``, in log order."""
        return [r for r in self.records(after=after) if isinstance(r, Edit)]

    def changes(self, *, after: int | None, edits_after: int | None) -> Changes:
        """The shown messages after ``after`` and the edit records after ``edits_after``.

        A memory keeps both cursors: new messages extend its state, an edit of a
        message it folded in makes it rebuild.
        """
        return Changes(self.entries(after=after), self.edits(after=edits_after))

    def state_and_changes(
        self, key: str, /, *, after: int | None, edits_after: int | None
    ) -> tuple[dict[str, Any] | None, Changes]:
        """:meth:`load_state` and :meth:`changes` together (one read on a database).

        The cursors are of the state the memory saw last; if the state read back
        has others (another process moved it), the memory reads the changes again.
        """
        return self.load_state(key), self.changes(after=after, edits_after=edits_after)

    def seqs_of(self, ids: Iterable[str], /) -> dict[str, int]:
        """The ``seq`` of each shown message whose id is in ``ids`` (missing ids are left out)."""
        return current_ids(self.entries(), ids)

    def batch(self, *, write: bool) -> AbstractContextManager[None] | None:
        """Make this thread's work on the history until the block ends one unit (None: no gain).

        A database backend runs it as one transaction (:meth:`memories.stores.sql.Database.batch`);
        ``write`` says the block starts by writing.
        """
        return None

    @property
    def database(self) -> Database | None:
        """The SQL database of the log (None: none; a budget's spending is then in-process)."""
        return None

    def count(self) -> int:
        """How many messages the session shows now (edits applied)."""
        return len(self.entries())

    def sessions(
        self, *, contains: str = "", limit: int = 50, offset: int = 0
    ) -> tuple[list[SessionCount], int]:
        """The sessions whose id contains ``contains``, last active first: a page and the total.

        Declared by :attr:`lists_sessions` (a store of one session cannot list others).
        """
        raise NotImplementedError(
            f"{type(self).__name__} keeps one session and cannot list the others."
        )

    def to_config(self) -> dict[str, Any]:
        """A config that :func:`memories.create_history` turns back into an equal history."""
        raise NotImplementedError(f"{type(self).__name__} cannot be described by a config.")

    # -- retention (see memories.kernel.retention) ------------------------------

    def horizon(self) -> int | None:
        """The ``seq`` through which this view hides the log (None: nothing; a
        :class:`~memories.stores.history.retained.RetainedHistory` hides what expired)."""
        return None

    # a subclass whose horizon reads the store overrides it (RetainedHistory: on a thread)
    ahorizon = inline_twin(horizon)

    def expired_through(self, retention: Retention, /, *, now: float) -> int | None:
        """The last ``seq`` that ``retention`` expires at ``now``: every record up to it goes.

        Raises:
            NotImplementedError: a ``keep_days`` retention on a log that keeps no
                write times (:attr:`keeps_times` is False).
        """
        if retention.keep_days is not None:
            raise self._no_write_times()
        return nth_last(self.records(), retention)

    def _no_write_times(self) -> NotImplementedError:
        return NotImplementedError(
            f"{type(self).__name__} does not know when messages were written, so it cannot "
            "keep them for a number of days: use keep_messages, or a memories history "
            "(InMemoryHistory, SQLiteHistory, SQLHistory)."
        )

    def purge(self, through: int, /, *, batch: int = 500, dry_run: bool = False) -> int:
        """Delete every record up to ``through`` and the edits that target them; how many went.

        At most ``batch`` rows per transaction: no lock held long, and a crash leaves
        a shorter purge to run again. Memory state stays; ``dry_run`` only counts.
        """
        raise NotImplementedError(f"{type(self).__name__} cannot delete part of its log.")

    def sweep_store(
        self, retention: Retention, /, *, batch: int = 500, dry_run: bool = False
    ) -> dict[str, int]:
        """Purge what ``retention`` expires now in every session of this store: rows per session.

        A shared database (:attr:`lists_sessions`) sweeps all of its sessions: one
        config's retention covers every session it is opened on.
        """
        through = self.expired_through(retention, now=self.clock())
        if through is None:
            return {}
        return {self.session_id: self.purge(through, batch=batch, dry_run=dry_run)}

    def first_entry(self) -> Entry | None:
        """The oldest entry of the log, or None when it is empty."""
        log = self.entries()
        return log[0] if log else None

    def start_of_last_exchanges(self, k: int, /) -> int | None:
        """The ``seq`` of the human message that opens the ``k``-th last exchange.

        An exchange is a human message and what follows up to the next one. None
        when the log holds fewer than ``k`` (the window is the whole log). Reads
        the tail in growing chunks, so a long log is not read whole.
        """
        whole_number(k, "k", least=1, error=InvalidInputError)
        tail = run(self._reading_tail(max(8, 4 * k), lambda tail: len(_humans(tail)) >= k))
        humans = _humans(tail)
        return humans[-k] if len(humans) >= k else None

    def last_exchanges(self, k: int, /) -> list[Entry]:
        """The shown messages of the last ``k`` exchanges (the whole log when it holds fewer)."""
        start = self.start_of_last_exchanges(k)
        return self.entries(after=None if start is None else start - 1)

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        """Every message of the session (LangChain's interface; reads the whole log)."""
        return [entry.message for entry in self.entries()]

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """LangChain's interface: append messages."""
        self.append(messages)

    # -- edits by id: steps written once, run sync or async (or in a memory's loop) --

    def _reading_tail(
        self, chunk: int, enough: Callable[[list[Entry]], bool]
    ) -> Steps[list[Entry]]:
        """The shown log's tail, read in growing chunks until ``enough`` of it (or all of it)."""
        while True:
            tail = yield step(self.entries, last=chunk)
            if len(tail) < chunk or enough(tail):
                return tail
            chunk *= 4

    def _resolving(self, refs: Sequence[MessageRef]) -> Steps[list[int]]:
        """The ``seq`` of each message named, or an error naming the ones not shown."""
        if isinstance(refs, str | int) or not refs:
            raise InvalidInputError(
                f"Give a non-empty list of message ids (or log seqs), got {refs!r:.80}."
            )
        bad = [r for r in refs if isinstance(r, bool) or not isinstance(r, str | int)]
        if bad:
            raise InvalidInputError(
                f"A message is named by its id (str) or its seq (int), not {bad[0]!r:.80}."
            )
        found: dict[MessageRef, int] = dict(
            (yield step(self.seqs_of, {r for r in refs if isinstance(r, str)}))
        )
        seqs = sorted({r for r in refs if isinstance(r, int)})
        if seqs:
            shown = yield step(self.entries, after=seqs[0] - 1)
            found.update((e.seq, e.seq) for e in shown if e.seq in seqs)
        missing = [r for r in refs if r not in found]
        if missing:
            raise InvalidInputError(
                f"No message of session {self.session_id!r} has the id or seq "
                f"{', '.join(repr(m) for m in missing[:5])} (never saved, or removed already); "
                "nothing was changed."
            )
        return [found[r] for r in refs]

    def _recording(self, items: list[Item]) -> Steps[list[int]]:
        """Write ``items`` with the edits that keep tool calls and results together."""
        targets = [i.target for i in items if isinstance(i, NewEdit)]
        if targets:
            # A tool call comes before its results: read back to the exchange that
            # holds the oldest target.
            oldest = min(targets)
            tail = yield from self._reading_tail(
                32, lambda tail: any(seq < oldest for seq in _humans(tail))
            )
            items = repaired(items, tail)
        return (yield step(self.record, items))

    def _write_steps(self, messages: Sequence[BaseMessage], /) -> Steps[list[int]]:
        """Write messages with LangGraph's ``add_messages`` semantics, atomically.

        A message whose id is shown replaces it in place; ``RemoveMessage(id=...)``
        removes one, ``RemoveMessage(id=REMOVE_ALL_MESSAGES)`` every one before it;
        others are appended. Tool calls and their results stay together
        (:func:`memories.stores.history.edits.repaired`).

        Returns:
            The ``seq`` of every record written (messages and edits).

        Raises:
            InvalidInputError: a ``RemoveMessage`` names an unknown id (nothing is written).
        """
        ids = {m.id for m in messages if m.id is not None}
        if not ids:
            return (yield step(self.record, messages))
        known = yield step(self.seqs_of, ids - {REMOVE_ALL_MESSAGES})
        last = None
        if REMOVE_ALL_MESSAGES in ids:
            newest = yield step(self.entries, last=1)
            last = newest[-1].seq if newest else None
        items = planned(messages, known, last=last, session=self.session_id)
        return (yield from self._recording(items))

    write, awrite = twins(_write_steps)
    writing = _write_steps  # the steps, for a memory's own loop

    def _delete_steps(self, refs: Sequence[MessageRef], /) -> Steps[list[int]]:
        """Remove messages named by id or seq, and the tool results or calls they would orphan.

        Raises:
            InvalidInputError: a name matches no shown message (nothing is written).
        """
        targets = yield from self._resolving(refs)
        return (yield from self._recording([NewEdit(seq) for seq in sorted(set(targets))]))

    delete, adelete = twins(_delete_steps)
    deleting = _delete_steps  # the steps, for a memory's own loop

    def _replace_steps(self, ref: MessageRef, message: BaseMessage, /) -> Steps[list[int]]:
        """Show ``message`` in place of the message named by id or seq (it keeps the old id).

        Raises:
            InvalidInputError: the name matches no shown message, or ``message``
                is not a message (nothing is written).
        """
        if not isinstance(message, BaseMessage) or isinstance(message, RemoveMessage):
            raise InvalidInputError(
                f"The new message must be a LangChain message (not RemoveMessage); got "
                f"{message!r:.80}. Use delete_messages to remove one."
            )
        [target] = yield from self._resolving([ref])
        if message.id is None:
            # The replacement keeps the id it replaces (named by it, or read by seq).
            old_id = (
                ref
                if isinstance(ref, str)
                else (yield step(self.entries, after=target - 1))[0].message.id
            )
            if old_id is not None:
                message = message.model_copy(update={"id": old_id})
        return (yield from self._recording([NewEdit(target, message)]))

    replace, areplace = twins(_replace_steps)
    replacing = _replace_steps  # the steps, for a memory's own loop

    def _keep_last_steps(self, keep: int, /) -> Steps[list[int]]:
        """Remove every message but the last ``keep`` (more when the oldest kept is a tool result).

        Raises:
            InvalidInputError: ``keep`` is not a count >= 0.
        """
        whole_number(keep, "keep_last's count", hint="messages", error=InvalidInputError)
        tail = yield from self._reading_tail(keep + 8, lambda tail: _kept_from(tail, keep) > 0)
        start = _kept_from(tail, keep)
        if start <= 0:
            return []
        return (yield step(self.record, [NewEdit(tail[start - 1].seq, through=True)]))

    keep_last, akeep_last = twins(_keep_last_steps)
    cutting = _keep_last_steps  # the steps, for a memory's own loop

    # -- async twins: a thread by default; a native async backend overrides -----

    aappend = blocking_twin(append)
    arecord = blocking_twin(record)
    arecords = blocking_twin(records)
    aedits = blocking_twin(edits)
    achanges = blocking_twin(changes)
    astate_and_changes = blocking_twin(state_and_changes)
    aseqs_of = blocking_twin(seqs_of)
    aentries = blocking_twin(entries)
    aload_state = blocking_twin(load_state)
    asave_state = blocking_twin(save_state)
    afirst_entry = blocking_twin(first_entry)
    astart_of_last_exchanges = blocking_twin(start_of_last_exchanges)
    alast_exchanges = blocking_twin(last_exchanges)

    async def aget_messages(self) -> list[BaseMessage]:
        """LangChain's async interface: every message of the session."""
        return [entry.message for entry in await self.aentries()]

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        """LangChain's async interface: append messages."""
        await self.aappend(messages)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(session_id={self.session_id!r})"


class HistoryView(ChatHistory):
    """Another history seen through this object: every call it does not override goes there."""

    def __init__(self, history: ChatHistory) -> None:
        self.history = history
        self.session_id = history.session_id
        # What the history can do, the view can: list sessions, keep write times.
        self.lists_sessions = history.lists_sessions  # type: ignore[misc]
        self.keeps_times = history.keeps_times  # type: ignore[misc]

    # The six a backend implements, written out for the type checker; the rest: below.
    def record(self, items: Sequence[Item], /) -> list[int]:
        return self.history.record(items)

    def records(self, *, after: int | None = None) -> list[Entry | Edit]:
        return self.history.records(after=after)

    def entries(self, *, after: int | None = None, last: int | None = None) -> list[Entry]:
        return self.history.entries(after=after, last=last)

    def clear(self) -> None:
        self.history.clear()

    def load_state(self, key: str, /) -> dict[str, Any] | None:
        return self.history.load_state(key)

    def save_state(self, key: str, value: dict[str, Any], /) -> None:
        self.history.save_state(key, value)

    @property
    def database(self) -> Database | None:
        """The history's database."""
        return self.history.database

    @property
    def clock(self) -> Any:  # type: ignore[override]
        """The history's clock."""
        return self.history.clock

    def __repr__(self) -> str:
        return repr(self.history)


def _passed_on(name: str) -> Callable[..., Any]:
    def call(self: HistoryView, /, *args: Any, **kwargs: Any) -> Any:
        return getattr(self.history, name)(*args, **kwargs)

    call.__name__ = call.__qualname__ = name
    call.__doc__ = f"The history's :meth:`ChatHistory.{name}`."
    return call


for _name in (
    *("edits", "changes", "state_and_changes", "seqs_of", "log_key", "state_keys", "count"),
    *("sessions", "first_entry", "start_of_last_exchanges", "last_exchanges", "horizon"),
    *("ahorizon", "expired_through", "purge", "sweep_store", "to_config"),
):
    setattr(HistoryView, _name, _passed_on(_name))


def later(a: int | None, b: int | None) -> int | None:
    """The later of two horizons (None: no horizon)."""
    return b if a is None else a if b is None else max(a, b)


def nth_last(records: Sequence[Entry | Edit], retention: Retention) -> int | None:
    """The ``seq`` before the newest ``keep_messages`` messages of ``records`` (in log order).

    Walks back from the newest, so a turn reads ``keep_messages`` records, not the log.
    """
    keep, seen = retention.keep_messages, 0
    for record in reversed(records) if keep is not None else ():
        if isinstance(record, Entry):
            if seen == keep:
                return record.seq
            seen += 1
    return None


def _humans(tail: Sequence[Entry]) -> list[int]:
    """The ``seq`` of each human message: where exchanges start."""
    return [e.seq for e in tail if isinstance(e.message, HumanMessage)]


def _kept_from(tail: Sequence[Entry], keep: int) -> int:
    """Where keeping the last ``keep`` of ``tail`` starts, moved back past tool results
    (never one kept without the AI message that called it)."""
    start = len(tail) - keep
    while 0 < start < len(tail) and isinstance(tail[start].message, ToolMessage):
        start -= 1
    return start


def select_entries(log: Sequence[_Record], after: int | None, last: int | None) -> list[_Record]:
    """Apply :meth:`ChatHistory.entries`' filters to log records held in order in memory."""
    if last is not None:
        whole_number(last, "last", error=InvalidInputError)
    # seqs are increasing: binary search for the first entry past `after`.
    start = 0 if after is None else bisect.bisect_right(log, after, key=attrgetter("seq"))
    if last is not None:
        start = max(start, len(log) - last)
    return list(log[start:])
