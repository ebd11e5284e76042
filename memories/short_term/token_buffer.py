"""The most recent messages within a token budget: LangChain's ``ConversationTokenBufferMemory``.

Each message is counted once, when first seen, and the counts are kept beside
the log (:class:`TokenWindow`); the window moves a cursor and deletes nothing
(docs/memories/buffers.md compares it with LangChain's).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any, ClassVar, Literal

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage, ToolMessage
from pydantic import Field, PrivateAttr

from memories.core.base import ChatMemory
from memories.core.parts import CountsTokens
from memories.core.state import SeenState
from memories.kernel.steps import Steps, step
from memories.stores.history.base import Entry

__all__ = ["ConversationTokenBufferMemory", "TokenBufferMemory", "TokenWindow"]

StartOn = Literal["human", "any"]
EndOn = Literal["human", "ai", "tool"]

_FIRST_TAIL_CHUNK = 64
# How far back "truncate" looks for the newest human message.
_TRUNCATE_LOOKBACK = 32

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class TokenWindow:
    """Which part of the log a token buffer shows, with each message's token count.

    Pure data: advancing it reads nothing and writes nothing.
    """

    last: int | None = None
    """The last log ``seq`` folded in; newer entries are still to be counted."""
    system: tuple[int, int] | None = None
    """The pinned leading system message as ``(seq, tokens)``, when kept."""
    seqs: tuple[int, ...] = ()
    """The shown messages' ``seq``, oldest first."""
    counts: tuple[int, ...] = ()
    """Token count of each shown message."""
    starts: tuple[bool, ...] = ()
    """Whether the window may start at each shown message."""
    total: int = field(default=0)
    """Sum of ``counts``."""
    edits: int | None = None
    """The last edit record of the log taken into account (see :mod:`~memories.stores.history`)."""

    def advance(
        self, entries: Sequence[Entry], counts: Sequence[int], starts: Sequence[bool], budget: int
    ) -> TokenWindow:
        """Fold in new entries (with their counts), then drop the oldest until it fits.

        The result starts at the earliest allowed message whose suffix fits in
        ``budget``; it never starts on a message where ``starts`` is False.
        """
        seqs = self.seqs + tuple(e.seq for e in entries)
        all_counts = self.counts + tuple(counts)
        all_starts = self.starts + tuple(starts)
        total = self.total + sum(counts)
        cut = 0
        while cut < len(seqs) and (total > budget or not all_starts[cut]):
            total -= all_counts[cut]
            cut += 1
        return TokenWindow(  # not dataclasses.replace: this runs every turn, and costs half
            last=entries[-1].seq if entries else self.last,
            system=self.system,
            seqs=seqs[cut:],
            counts=all_counts[cut:],
            starts=all_starts[cut:],
            total=total,
            edits=self.edits,
        )

    @property
    def first(self) -> int | None:
        """The ``seq`` of the oldest shown message (not counting a pinned system message)."""
        return self.seqs[0] if self.seqs else None

    def expired(self, horizon: int | None) -> bool:
        """Whether it names a message a retention expired (every seq through ``horizon``)."""
        if horizon is None:
            return False
        named = (self.first, self.system[0] if self.system else None, self.last)
        return any(seq is not None and seq <= horizon for seq in named)

    def to_state(self) -> dict[str, Any]:
        """JSON form, as stored in the history."""
        return {
            "last": self.last,
            "system": list(self.system) if self.system else None,
            "seqs": list(self.seqs),
            "counts": list(self.counts),
            "starts": list(self.starts),
            "total": self.total,
            "edits": self.edits,
        }

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> TokenWindow:
        """Inverse of :meth:`to_state`."""
        system = state.get("system")
        return cls(
            last=state["last"],
            system=(int(system[0]), int(system[1])) if system else None,
            seqs=tuple(state["seqs"]),
            counts=tuple(state["counts"]),
            starts=tuple(state["starts"]),
            total=int(state["total"]),
            edits=state.get("edits"),
        )


class TokenBufferMemory(CountsTokens, ChatMemory):
    """Shows the most recent messages whose tokens fit in ``max_token_limit``.

    The window follows ``trim_messages(strategy="last")``, so a chat API never
    gets an orphan reply or a tool result without its call (docs/memories/buffers.md).

    Args:
        max_token_limit: the token budget of what the memory shows.
        token_counter: as :class:`~memories.core.parts.CountsTokens`.
        llm: LangChain's argument: without ``token_counter``, tokens are counted by
            the model's own counter when it works here
            (:func:`~memories.kernel.tokens.counter_for`), else by tiktoken.
        start_on: ``"human"`` or ``"any"`` (any message but a tool result).
        end_on: drop trailing messages until the last one has this type.
        include_system: keep a leading system message of the log, counted against the limit.
        oversize: when the newest exchange alone is over the limit, ``"empty"``
            shows nothing (as LangChain's class; warned once per session),
            ``"truncate"`` the newest human message cut to fit, marked ``[...]``.
    """

    config_type: ClassVar[str] = "token_buffer"
    _makes_calls: ClassVar[bool] = False
    #: A save folds its own rows into the window unread (False: a subclass whose ``_update``
    #: does more than the window runs it on every save).
    _folds_saves: ClassVar[bool] = True

    max_token_limit: int = Field(default=2000, gt=0)

    _warned: set[str] = PrivateAttr(default_factory=set)
    llm: Any = None
    start_on: StartOn = "human"
    end_on: EndOn | None = None
    include_system: bool = False
    oversize: Literal["empty", "truncate"] = "empty"

    def model_post_init(self, context: Any, /) -> None:
        self._counter  # noqa: B018  (resolve now: a bad counter fails at construction)

    def _counting_model(self) -> Any:
        return self.llm

    @cached_property
    def _seen(self) -> SeenState[TokenWindow]:
        """The window this process saw last: a turn's load reuses the one its save made."""
        return SeenState(TokenWindow.from_state)

    def _state_parameters(self) -> dict[str, Any]:
        return {
            "limit": self.max_token_limit,
            "counter": self._counter_id,
            "start_on": self.start_on,
            "include_system": self.include_system,
        }

    # -- pure steps ------------------------------------------------------------

    def _may_start(self, message: BaseMessage) -> bool:
        if self.start_on == "human":
            return isinstance(message, HumanMessage)
        return not isinstance(message, ToolMessage)

    def _pinned(self, first: Entry | None) -> tuple[int, int] | None:
        if self.include_system and first is not None and isinstance(first.message, SystemMessage):
            return (first.seq, self._counter([first.message]))
        return None

    def _advance(
        self, window: TokenWindow, entries: Sequence[Entry], known: dict[int, int] | None = None
    ) -> TokenWindow:
        """Fold entries into the window; ``known`` holds counts already made, by seq."""
        if window.system is not None:
            entries = [e for e in entries if e.seq != window.system[0]]
        known = {} if known is None else known
        counts = [known[e.seq] if e.seq in known else self._counter([e.message]) for e in entries]
        known.update((e.seq, n) for e, n in zip(entries, counts, strict=True))
        budget = self.max_token_limit - (window.system[1] if window.system else 0)
        return window.advance(
            entries, counts, [self._may_start(e.message) for e in entries], budget
        )

    def _shown(
        self, window: TokenWindow, system: Entry | None, entries: list[Entry]
    ) -> list[BaseMessage]:
        messages = [e.message for e in entries if window.last is not None and e.seq <= window.last]
        if self.end_on is not None:
            while messages and messages[-1].type != self.end_on:
                messages.pop()
        if system is not None and window.system is not None:
            messages.insert(0, system.message)
        return messages

    def _warn_empty(self) -> None:
        """Say once per session that the newest exchange alone is over the limit."""
        session = self.chat_memory.session_id
        if session in self._warned:
            return
        self._warned.add(session)
        logger.warning(
            "%s (session %r): the newest exchange alone is over "
            "max_token_limit=%d tokens, so the memory shows nothing (as LangChain's does). "
            "Raise max_token_limit, pass oversize='truncate' to show the newest human "
            "message cut to fit, or use a summary-buffer memory to keep its gist.",
            type(self).__name__,
            session,
            self.max_token_limit,
        )

    # -- I/O: steps written once, run sync or async by the kernel --------------

    def _refreshing(
        self, *, showing: bool = False
    ) -> Steps[tuple[TokenWindow, list[Entry] | None]]:
        """Bring the window up to date with the log and persist it.

        With ``showing``, the one read of the log starts at the window's first
        message so it also gives the entries to show (None after a rebuild): a load
        is then one statement on SQL.
        """
        history = self.chat_memory
        horizon = yield from self._horizon()
        window, changes = yield from self._seen.reading(
            history,
            self.state_key,
            lambda w: (w.first - 1 if showing and w.first is not None else w.last, w.edits),
        )
        if window is None:
            # The edit cursor is read first: an edit made during the rebuild is seen next time.
            edits = yield step(history.edits)
            window = yield from self._rebuilding()
            window = replace(window, edits=max((e.seq for e in edits), default=None))
            shown = None
        else:
            assert changes is not None  # read with every state found
            shown = changes.entries
            new = [e for e in shown if window.last is None or e.seq > window.last]
            expired = window.expired(horizon)
            # A save folds in its own rows without reading the log: rows another writer
            # slipped under its cursor (or a rollback took) show here, read from its first.
            last = window.last or 0
            moved = showing and window.seqs != tuple(e.seq for e in shown if e.seq <= last)
            if not new and not changes.edits and not expired and not moved:
                return window, shown
            # An edit changed what was counted, or a retention expired it: count afresh.
            if expired or moved or changes.touches(window.last):
                window, shown = (yield from self._rebuilding()), None
            else:
                window = self._advance(window, new)
            if changes.edits:
                window = replace(window, edits=changes.edit_cursor(window.edits))
        state = window.to_state()
        yield step(history.save_state, self.state_key, state)
        self._seen.saw(state, window)
        return window, shown

    def _rebuilding(self) -> Steps[TokenWindow]:
        """A fresh window read from the tail of the log, in growing chunks."""
        start = TokenWindow(system=self._pinned((yield step(self.chat_memory.first_entry))))
        chunk, known = _FIRST_TAIL_CHUNK, dict[int, int]()
        while True:
            tail = yield step(self.chat_memory.entries, last=chunk)
            if not tail:
                return start
            window = self._advance(start, tail, known)
            # Long enough when it is the whole log, or over budget (the window starts inside).
            budget = self.max_token_limit - (start.system[1] if start.system else 0)
            if len(tail) < chunk or sum(known[e.seq] for e in tail if e.seq in known) > budget:
                return window
            chunk *= 4

    def _selection(self) -> Steps[list[BaseMessage]]:
        window, read = yield from self._refreshing(showing=True)
        system = (yield step(self.chat_memory.first_entry)) if window.system else None
        first = window.first
        if first is None:
            entries = []
        elif read is not None and read and read[0].seq <= first:
            entries = [e for e in read if e.seq >= first]
        else:
            entries = yield step(self.chat_memory.entries, after=first - 1)
        if not window.seqs and window.last is not None:
            tail = yield step(self.chat_memory.entries, last=_TRUNCATE_LOOKBACK)
            if self.oversize == "truncate":
                return self._truncated_newest(window, system, tail)
            # Empty because the newest exchange is over the limit, not because no
            # message may open a window (an edit left only an AI message, say).
            if any(self._may_start(e.message) for e in tail):
                self._warn_empty()
        return self._shown(window, system, entries)

    def _truncated_newest(
        self, window: TokenWindow, system: Entry | None, tail: list[Entry]
    ) -> list[BaseMessage]:
        """The newest human message, its beginning cut to the budget (after a pinned system)."""
        pinned = [system.message] if system is not None and window.system is not None else []
        human = next(
            (e.message for e in reversed(tail) if isinstance(e.message, HumanMessage)), None
        )
        if human is None:
            return pinned
        budget = self.max_token_limit - (window.system[1] if window.system else 0)
        text = str(human.text)
        keep = len(text)
        while keep > 0:
            cut = human.model_copy(update={"content": f"{text[:keep]} [...]"})
            count = self._counter([cut])
            if count <= budget:
                return [*pinned, cut]
            keep = min(keep - 1, int(keep * budget / count))
        return pinned

    def _update(self) -> Steps[None]:
        yield from self._refreshing()

    def _saving(self, messages: list[BaseMessage], *, appended: bool = False) -> Steps[None]:
        """Append, then fold the new rows into this process's window unread (a load checks it)."""
        window = self._seen.last
        folds = self._folds_saves and not appended and self.retention is None
        if not folds or window is None or window.last is None:
            return (yield from super()._saving(messages, appended=appended))
        seqs = yield step(self.chat_memory.append, messages)
        window = self._advance(window, [Entry(s, m) for s, m in zip(seqs, messages, strict=True)])
        state = window.to_state()
        yield step(self.chat_memory.save_state, self.state_key, state)
        self._seen.saw(state, window)


class ConversationTokenBufferMemory(TokenBufferMemory):
    """LangChain's ``ConversationTokenBufferMemory``: ``start_on="any"``, trimming as LangChain.

    Its window may open on any message but a tool result (an AI message too, as in
    LangChain); the short name starts on a human message, which every chat API accepts.
    """

    config_type: ClassVar[str] = "conversation_token_buffer"

    start_on: StartOn = "any"
