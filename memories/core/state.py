"""A memory's derived state as this process last saw it: decoded once, read in one statement.

:class:`SeenState` guesses the state's cursors from the state this process
saw last, so a SQL history reads the state and the log's changes in one
statement, reading again only when another process moved them; a history
that hands back the same dict for an unchanged state costs no decoding.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

from memories.kernel.steps import Steps, step
from memories.stores.history.base import Changes, ChatHistory

__all__ = ["Cursors", "SeenState"]

D = TypeVar("D")

#: Where a state's reads of the log start: ``(after, edits_after)``.
Cursors = tuple[int | None, int | None]


class SeenState(Generic[D]):
    """The last ``(state dict, decoded state)`` pair of one memory; replaced whole (thread-safe).

    Args:
        decode: turns a stored state dict into the memory's state object.
    """

    def __init__(self, decode: Callable[[dict[str, Any]], D]) -> None:
        self._decode = decode
        self._pair: tuple[dict[str, Any], D] | None = None

    def decoded(self, state: dict[str, Any]) -> D:
        """``state`` decoded, once per dict object."""
        pair = self._pair
        if pair is not None and pair[0] is state:
            return pair[1]
        value = self._decode(state)
        self._pair = (state, value)
        return value

    @property
    def last(self) -> D | None:
        """The state this process saved or read last (None: none yet)."""
        pair = self._pair
        return None if pair is None else pair[1]

    def saw(self, state: dict[str, Any], value: D) -> None:
        """Remember a state this process saved (``value`` is ``state`` decoded)."""
        self._pair = (state, value)

    def reading(
        self, history: ChatHistory, key: str, cursors: Callable[[D], Cursors]
    ) -> Steps[tuple[D | None, Changes | None]]:
        """The state under ``key`` and the log's changes after its ``cursors``; None, None: none.

        One read while the cursors seen last still hold; a second, with the state's
        own cursors, when nothing was seen yet or another process (or a rollback) moved them.
        """
        seen = self._pair
        if seen is None:
            raw, changes = (yield step(history.load_state, key)), None
        else:
            after, edits_after = guess = cursors(seen[1])
            raw, changes = yield step(
                history.state_and_changes, key, after=after, edits_after=edits_after
            )
            if raw is not None and raw is not seen[0] and cursors(self.decoded(raw)) != guess:
                changes = None  # the state moved: read after its own cursors
        if raw is None:
            return None, None
        value = self.decoded(raw)
        if changes is None:
            after, edits_after = cursors(value)
            changes = yield step(history.changes, after=after, edits_after=edits_after)
        return value, changes
