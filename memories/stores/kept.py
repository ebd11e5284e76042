"""One connection kept per thread on a SQLite file, instead of a pool checkout per transaction.

A checkout and return, twice a turn, cost more than SQLite's own work. At
most the pool's size of threads keep one (the others check out, so many
threads never exhaust the pool); it goes back when its thread ends, when a
transaction on it fails, or at exit; a forked child never touches its
parent's. Not used inside another transaction of the thread, nor while the
engine's statements are logged; only :func:`~memories.stores.sql.get_engine`'s
SQLite file engines keep one (a server's pool pings each checkout).
"""

from __future__ import annotations

import contextlib
import os
import threading
from typing import Any

from sqlalchemy import Connection, Engine

__all__ = ["give_back", "keep_connections", "kept"]

#: By engine; engines live as long as the process (``sql.get_engine`` keeps them), and a
#: keeper holds its engine, so a weak map here would only cost a weakref a lookup.
_keepers: dict[Engine, _Keeper] = {}
#: Connections a forked child inherited: referenced forever, so never closed there.
_inherited: list[Any] = []


class _Kept:
    """A thread's connection; its thread-local drops it when the thread ends, giving it back."""

    __slots__ = ("connection", "keeper", "pid")

    def __init__(self, keeper: _Keeper, connection: Connection) -> None:
        self.keeper, self.pid = keeper, os.getpid()
        self.connection: Connection | None = connection  # None once given back

    def give_back(self) -> None:
        """Return the connection to the pool (once; in a forked child, leave it be)."""
        connection, self.connection = self.connection, None
        if connection is None:
            return
        if self.pid != os.getpid():
            _inherited.append(connection)
            return
        with self.keeper.lock:
            self.keeper.room += 1
        with contextlib.suppress(Exception):  # at shutdown the pool may be gone already
            connection.close()

    __del__ = give_back


class _Keeper:
    """The connections of one engine that threads keep, at most the pool's size at a time."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.forget()

    def forget(self) -> None:
        """Start afresh: in this process no thread keeps a connection yet."""
        self.pid, self.lock, self.local = os.getpid(), threading.Lock(), threading.local()
        self.room: int = self.engine.pool.size()  # type: ignore[attr-defined]

    def take(self) -> _Kept | None:
        """This thread's free connection: its own, or a new one while there is room."""
        if self.pid != os.getpid():
            self.forget()  # a forked child: its parent's connections are not its own
        if self.engine._should_log_info():
            return None
        mine: _Kept | None = getattr(self.local, "kept", None)
        if mine is not None and mine.connection is not None:
            return None if mine.connection.in_transaction() else mine
        with self.lock:
            if self.room <= 0:
                return None
            self.room -= 1
        try:
            mine = self.local.kept = _Kept(self, self.engine.connect())
        except BaseException:
            with self.lock:
                self.room += 1
            raise
        return mine


def keep_connections(engine: Engine) -> None:
    """Let threads keep a connection of ``engine`` between transactions."""
    _keepers[engine] = _Keeper(engine)


def kept(engine: Engine) -> Connection | None:
    """This thread's kept connection of ``engine``, free to begin on; None: check one out."""
    keeper = _keepers.get(engine)
    mine = None if keeper is None else keeper.take()
    return None if mine is None else mine.connection


def give_back(engine: Engine) -> None:
    """Return this thread's kept connection of ``engine`` to the pool (it failed, or at exit)."""
    keeper = _keepers.get(engine)
    mine = None if keeper is None else getattr(keeper.local, "kept", None)
    if mine is not None:
        mine.give_back()
