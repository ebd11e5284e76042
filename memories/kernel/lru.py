"""A mapping bounded to its most recently used keys: the process's caches of built things."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, nullcontext
from typing import Any, Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class LRU(Generic[K, V]):
    """At most ``limit`` values (None: no bound); a put past it drops the least recently used.

    ``locked`` makes each call atomic, for a cache threads share with no lock
    of its own; a site that reads, decides and writes under one lock leaves it off.
    """

    def __init__(self, limit: int | None, *, locked: bool = False) -> None:
        self.limit = limit
        self._items: OrderedDict[K, V] = OrderedDict()
        self._lock: AbstractContextManager[Any] = threading.Lock() if locked else nullcontext()

    def get(self, key: K) -> V | None:
        """The value of ``key`` (None if there is none), used now."""
        with self._lock:
            if (found := self._items.get(key)) is not None:
                self._items.move_to_end(key)
            return found

    def put(self, key: K, value: V) -> list[V]:
        """Keep ``value`` under ``key``, used now; the values dropped to stay in the limit."""
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            excess = 0 if self.limit is None else len(self._items) - self.limit
            return [self._items.popitem(last=False)[1] for _ in range(excess)]

    def pop(self, key: K) -> V | None:
        with self._lock:
            return self._items.pop(key, None)

    def clear(self) -> list[V]:
        """Forget every key; the values that were kept."""
        with self._lock:
            values = list(self._items.values())
            self._items.clear()
            return values

    def __iter__(self) -> Iterator[K]:  # over the keys now, least recently used first
        with self._lock:
            return iter(list(self._items))

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def __len__(self) -> int:
        return len(self._items)


class Built(LRU[K, V]):
    """An :class:`LRU` of values built on first use; one dropped past the limit is closed.

    Two first uses of a key build one value; a build holds up only the uses of
    its own key, never a kept value or another key's build (a factory waiting on
    a server blocks nobody else). ``close`` (a memory's, writing its deferred
    work) runs after the build, outside any lock. A value ``keeps`` refuses is
    handed out and not kept.
    """

    def __init__(
        self,
        limit: int | None,
        *,
        close: Callable[[V], object],
        keeps: Callable[[V], bool] = lambda value: True,
    ) -> None:
        super().__init__(limit, locked=True)
        self._close, self._keeps = close, keeps
        self._guard = threading.Lock()
        self._building: dict[K, tuple[threading.Lock, int]] = {}

    def built(self, key: K, build: Callable[[], V]) -> V:
        """The value of ``key``, built now if it has none."""
        if (found := self.get(key)) is not None:
            return found
        with self._guard:
            building, users = self._building.get(key, (threading.Lock(), 0))
            self._building[key] = (building, users + 1)
        try:
            with building:
                if (found := self.get(key)) is not None:
                    return found
                value = build()
                dropped = self.put(key, value) if self._keeps(value) else []
        finally:
            with self._guard:
                building, users = self._building.pop(key)
                if users > 1:
                    self._building[key] = (building, users - 1)
        for old in dropped:
            self._close(old)
        return value

    def clear(self) -> list[V]:
        """Forget every key once the builds running now are done; the values kept (not closed)."""
        with self._guard:
            running = [building for building, _ in self._building.values()]
        for building in running:
            with building:
                pass
        return super().clear()
