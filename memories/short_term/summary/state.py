"""A running summary's persisted state: pure data, every method returns a new state.

What a summary memory keeps in the history beside the log: the summary, the
fold point, the unfolded messages' token counts, and the failure backoff.
The fold plan (what to fold now) and the window (what loading shows) are
computed here, with no I/O, so they can be tested on their own.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage

from memories.kernel.background import JobStatus, MemoryStatus
from memories.stores.history.base import Changes, Entry

__all__ = ["SummaryState", "SummaryStatus"]

#: The longest backoff after failed folds, in fold opportunities (turns).
_MAX_BACKOFF_TURNS = 16


@dataclass(frozen=True)
class SummaryState:
    """A running summary and the part of the log it has not absorbed yet (pure data)."""

    summary: str = ""
    """The summary of every message up to and including ``folded``."""
    folded: int | None = None
    """The ``seq`` of the last message folded into the summary (None: none yet)."""
    last: int | None = None
    """The ``seq`` of the last message counted into ``seqs``."""
    seqs: tuple[int, ...] = ()
    """The unfolded messages' ``seq``, oldest first."""
    counts: tuple[int, ...] = ()
    """Token count of each unfolded message."""
    starts: tuple[bool, ...] = ()
    """Whether each unfolded message opens an exchange (a human message)."""
    counter: str | None = None
    """The token counter that made ``counts``; another counter recounts them."""
    failures: int = 0
    """Consecutive failed folds."""
    retry_in: int = 0
    """Fold opportunities to skip before the next attempt (backoff)."""
    last_error: str | None = None
    """Why the last fold failed, while ``failures`` > 0."""
    trigger: str | None = None
    """The ``trigger=`` pair that fired the last fold (``"messages 20"``), or None."""
    edits: int | None = None
    """The last edit record of the log taken into account (see :mod:`~memories.stores.history`)."""

    @property
    def total(self) -> int:
        """Tokens of the unfolded messages."""
        return sum(self.counts)

    def advance(
        self, entries: Sequence[Entry], counts: Sequence[int], starts: Sequence[bool]
    ) -> SummaryState:
        """Append newly counted messages to the unfolded part."""
        if not entries:
            return self
        return replace(
            self,
            last=entries[-1].seq,
            seqs=self.seqs + tuple(e.seq for e in entries),
            counts=self.counts + tuple(counts),
            starts=self.starts + tuple(starts),
        )

    def boundaries(self) -> list[int]:
        """Indexes where the unfolded part may be cut: exchange starts, and the end."""
        return [i for i in range(1, len(self.seqs)) if self.starts[i]] + [len(self.seqs)]

    def plan(self, *, high: int, low: int, chunk: int) -> int:
        """How many leading unfolded messages to fold now (0: none).

        Nothing while the unfolded tokens are at most ``high``. Otherwise the
        fewest whole exchanges that bring them to ``low`` or under, but no
        more than ``chunk`` tokens in one go (at least one exchange), and
        never the newest exchange when it fits in ``high`` by itself.
        """
        if self.total <= high or not self.seqs:
            return 0
        target = self._fold_target(low, chunk)
        # The newest exchange stays verbatim whenever it fits the limit by itself.
        newest = max((i for i, start in enumerate(self.starts) if start), default=0)
        if target > newest > 0 and sum(self.counts[newest:]) <= high:
            return newest
        return target

    def plan_exact(self, limit: int) -> int:
        """LangChain's prune: the fewest leading messages whose removal leaves ``limit`` or less."""
        suffix = self.total
        for count, tokens in enumerate(self.counts):
            if suffix <= limit:
                return count
            suffix -= tokens
        return len(self.counts)

    def _fold_target(self, low: int, chunk: int) -> int:
        """The first cut leaving ``low`` tokens or fewer, unless it folds over ``chunk`` tokens:
        then the last cut within ``chunk`` (the first cut when none is)."""
        total, prefix, position, within_chunk = self.total, 0, 0, 0
        for cut in self.boundaries():
            prefix += sum(self.counts[position:cut])
            position = cut
            if prefix > chunk:
                return within_chunk or cut
            within_chunk = cut
            if total - prefix <= low:
                return cut
        return len(self.seqs)

    def window(self, budget: int) -> int:
        """Index of the oldest unfolded message shown: the newest exchanges within ``budget``."""
        return 0 if self.total <= budget else self._fold_target(budget, chunk=self.total)

    def forgotten(self, horizon: int | None) -> SummaryState:
        """The state once a retention expired every message through ``horizon``.

        The summary stays; expired unfolded messages leave the counts unsummarised,
        and both cursors move up to the horizon, so none names a deleted message.
        """
        if horizon is None or (self.folded is not None and self.folded >= horizon):
            return self
        keep = next((i for i, seq in enumerate(self.seqs) if seq > horizon), len(self.seqs))
        return replace(
            self,
            folded=horizon if self.folded is None else max(self.folded, horizon),
            last=horizon if self.last is None else max(self.last, horizon),
            seqs=self.seqs[keep:],
            counts=self.counts[keep:],
            starts=self.starts[keep:],
        )

    def edited(self, changes: Changes, fresh: SummaryState) -> SummaryState:
        """The state after the log's edits since the last look (``fresh``: a new session's).

        An edit of a folded message makes the summary stale: it starts again
        from ``fresh`` and the whole (edited) log is folded anew. An edit of an
        unfolded message only makes its counts stale: they are counted again.
        """
        cursor = changes.edit_cursor(self.edits)
        if changes.touches(self.folded):
            return replace(fresh, edits=cursor)
        if changes.edits:
            return replace(self, edits=cursor, last=self.folded, seqs=(), counts=(), starts=())
        return self

    def counted(
        self, unfolded: Sequence[Entry], counter: str, count: Callable[[BaseMessage], int]
    ) -> SummaryState:
        """The unfolded messages not counted yet, counted (all of them for a new ``counter``)."""
        state = self
        if state.counter != counter:
            state = replace(
                state, counter=counter, last=state.folded, seqs=(), counts=(), starts=()
            )
        new = [e for e in unfolded if state.last is None or e.seq > state.last]
        counts = [count(e.message) for e in new]
        return state.advance(new, counts, [isinstance(e.message, HumanMessage) for e in new])

    def fold_input(
        self, unfolded: Sequence[Entry], cut: int, *, cap: int | None
    ) -> list[BaseMessage]:
        """The messages up to ``cut``, each clipped to ``cap`` tokens (None: whole).

        One pasted document larger than the model's context would otherwise
        fail every fold forever; the summary gets its beginning instead.
        """
        counts = dict(zip(self.seqs, self.counts, strict=True))
        messages = []
        for entry in unfolded:
            if entry.seq > cut:
                break
            count = counts.get(entry.seq, 0)
            if cap is not None and count > cap:
                messages.append(_clip(entry.message, cap / count))
            else:
                messages.append(entry.message)
        return messages

    def shown(self, unfolded: Sequence[Entry], start: int) -> list[BaseMessage]:
        """The unfolded messages from index ``start`` of the counted ones (what loading shows)."""
        if start >= len(self.seqs):
            return []
        first, last = self.seqs[start], self.last if self.last is not None else -1
        return [e.message for e in unfolded if first <= e.seq <= last]

    def to_fold(self, count: int, *, force: bool) -> tuple[SummaryState, int | None]:
        """The state to save before folding ``count`` messages, and the last ``seq`` to fold.

        None: no fold now (nothing to fold, or a backoff turn, which is counted).
        """
        if count == 0:
            return self, None
        if self.retry_in > 0 and not force:
            return self.waited(), None
        return self, self.seqs[count - 1]

    def folded_through(self, seq: int, summary: str) -> SummaryState:
        """The state after the messages up to ``seq`` were folded into ``summary``."""
        keep = sum(1 for s in self.seqs if s > seq)
        cut = len(self.seqs) - keep
        return replace(
            self,
            summary=summary,
            folded=seq,
            last=self.last if self.last is not None and self.last > seq else seq,
            seqs=self.seqs[cut:],
            counts=self.counts[cut:],
            starts=self.starts[cut:],
            failures=0,
            retry_in=0,
            last_error=None,
        )

    def failed(self, error: str) -> SummaryState:
        """The state after a failed fold: same summary, backoff doubled."""
        failures = self.failures + 1
        return replace(
            self,
            failures=failures,
            retry_in=min(2 ** (failures - 1), _MAX_BACKOFF_TURNS) - 1,
            last_error=error,
        )

    def waited(self) -> SummaryState:
        """The state after skipping one fold opportunity during backoff."""
        return replace(self, retry_in=max(0, self.retry_in - 1))

    def same_fold(self, other: SummaryState) -> bool:
        """Whether ``other`` has the same summary and fold point (nothing folded in between)."""
        return self.summary == other.summary and self.folded == other.folded

    def status(self, *, background: JobStatus | None) -> SummaryStatus:
        """The status record of a memory in this state."""
        return SummaryStatus(
            pending=len(self.seqs),
            failures=self.failures,
            last_error=self.last_error,
            background=background,
            summary=self.summary,
            folded=self.folded,
            unfolded_messages=len(self.seqs),
            unfolded_tokens=self.total,
            retry_in=self.retry_in,
            trigger=self.trigger,
        )

    def to_state(self) -> dict[str, Any]:
        """JSON form, as stored in the history."""
        return {
            "summary": self.summary,
            "folded": self.folded,
            "last": self.last,
            "seqs": list(self.seqs),
            "counts": list(self.counts),
            "starts": list(self.starts),
            "counter": self.counter,
            "failures": self.failures,
            "retry_in": self.retry_in,
            "last_error": self.last_error,
            "trigger": self.trigger,
            "edits": self.edits,
        }

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> SummaryState:
        """Inverse of :meth:`to_state`."""
        return cls(
            summary=str(state["summary"]),
            folded=state["folded"],
            last=state["last"],
            seqs=tuple(state["seqs"]),
            counts=tuple(state["counts"]),
            starts=tuple(state["starts"]),
            counter=state.get("counter"),
            failures=int(state.get("failures", 0)),
            retry_in=int(state.get("retry_in", 0)),
            last_error=state.get("last_error"),
            trigger=state.get("trigger"),
            edits=state.get("edits"),
        )


@dataclass(frozen=True)
class SummaryStatus(MemoryStatus):
    """A summary memory's status: ``pending`` unfolded messages, consecutive ``failures``."""

    summary: str = ""
    """The current summary."""
    folded: int | None = None
    """The ``seq`` of the last message in the summary."""
    unfolded_messages: int = 0
    """Messages after the fold point (shown verbatim, within the token limit)."""
    unfolded_tokens: int = 0
    """Their tokens."""
    retry_in: int = 0
    """Fold opportunities skipped before the next attempt."""
    trigger: str | None = None
    """The ``trigger=`` pair that fired the last fold, or None (the memory's own rule)."""


def _clip(message: BaseMessage, fraction: float) -> BaseMessage:
    """A copy of ``message`` with the first ``fraction`` of its text."""
    text = str(message.text)
    keep = max(1, int(len(text) * fraction))
    return message.model_copy(update={"content": f"{text[:keep]} [...]"})
