"""A private space: a name for stores of one object and its twins, dropped with the last of them.

An in-memory store (Chroma's ``mode="memory"``) is the process's own; a
space keeps one memory object's apart from another's, as ``sqlite://``
gives each store object its own database. A memory's twins for other
namespaces (:func:`~memories.kernel.namespaces.in_namespace`) share its space,
and so do its copies (``copy.deepcopy``, and ``pickle`` within the process).
"""

from __future__ import annotations

import logging
import uuid
import weakref
from collections.abc import Callable
from typing import Any

__all__ = ["Space"]

logger = logging.getLogger(__name__)

#: The spaces alive in this process, by name (a pickled space comes back as the same).
_live: weakref.WeakValueDictionary[str, Space] = weakref.WeakValueDictionary()


class Space:
    """A unique ``name``; what :meth:`on_drop` is given runs once nothing holds the space."""

    def __init__(self, name: str | None = None) -> None:
        self.name = name or f"m{uuid.uuid4().hex}"
        self._drops: list[Callable[[], None]] = []
        weakref.finalize(self, _drop, self._drops)
        _live[self.name] = self

    def __deepcopy__(self, memo: dict[int, Any]) -> Space:
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        return _named, (self.name,)

    def on_drop(self, drop: Callable[[], None]) -> None:
        """Run ``drop`` when the space goes (it must hold no reference to the space)."""
        self._drops.append(drop)


def _drop(drops: list[Callable[[], None]]) -> None:
    for drop in drops:
        try:
            drop()
        except Exception as exc:  # at collection: nobody to raise to
            logger.debug("Could not drop a private space: %s", exc)


def _named(name: str) -> Space:
    """The live space of this name, or a new one (unpickled in another process)."""
    return _live.get(name) or Space(name)
