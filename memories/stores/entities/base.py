"""What the entity stores share: a config form, and one session's log in a SQL database."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

import sqlalchemy as sa

from memories.errors import ConfigError
from memories.kernel.checks import non_empty_text
from memories.stores.history.sql import default_sqlite_url
from memories.stores.sql import Database, count_rows, log_table

__all__ = ["EntityLog", "SQLEntityLog", "coerced", "session_log"]


class EntityLog:
    """A store of what an entity memory keeps (summaries, triples), rebuilt from its config."""

    #: The config ``type`` of this store.
    config_type: ClassVar[str]

    @property
    def database(self) -> Database | None:
        """The SQL database the store is kept in (None: none), compacted after an erasure."""
        return None

    def to_config(self) -> dict[str, Any]:
        """The config this store is rebuilt from (by ``as_entity_store`` or ``as_entity_graph``)."""
        raise NotImplementedError(f"{type(self).__name__} has no config form")


def coerced(
    value: Any,
    ours: type,
    build: Callable[[Mapping[str, Any]], Any],
    methods: Sequence[str],
    wrap: Callable[[Any], Any],
    wanted: str,
) -> Any:
    """``value`` as a store: one of ``ours`` as is, a config built, another library's wrapped.

    Raises:
        ConfigError: ``value`` is none of these (the message: ``wanted`` and the value).
    """
    if isinstance(value, ours):
        return value
    if isinstance(value, Mapping):
        return build(value)
    if all(callable(getattr(value, name, None)) for name in methods):
        return wrap(value)
    raise ConfigError(f"{wanted}; got {value!r:.80}")


def session_log(name: str, key: str, *columns: Any, index: str) -> sa.Table:
    """A :func:`~memories.stores.sql.log_table` of its own, read per ``session_id`` and ``key``."""
    keys = {"session_id": sa.String(255), key: sa.String(512)}
    return log_table(name, sa.MetaData(), keys, *columns, index=index)


class SQLEntityLog(EntityLog):
    """One session's rows of an append-only log in a SQL database (any SQLAlchemy URL).

    Args:
        url: the database; by default ``memories.db`` in the data directory.
        session_id: whose rows these are.
        table: the log (:func:`session_log`).
    """

    #: What :meth:`held` calls the log's rows.
    rows_held: ClassVar[str]

    def __init__(self, url: str | None, session_id: str, table: sa.Table) -> None:
        self.url = url or default_sqlite_url()
        self.session_id = non_empty_text(session_id, "session_id")
        self._table = table
        self._db = Database(self.url, table.metadata)

    def _mine(self) -> Any:
        """The condition "a row of this session"."""
        return self._table.c.session_id == self.session_id

    def _insert(self, rows: Sequence[dict[str, Any]]) -> None:
        """Append ``rows`` (their columns after ``session_id``), all in one transaction."""
        now = time.time()
        rows = [{"session_id": self.session_id, **row, "created_at": now} for row in rows]
        with self._db.transaction(write=True) as connection:
            connection.execute(self._table.insert(), rows)

    def held(self) -> dict[str, int]:
        """Every row of the session's log, deletions included (a COUNT: the log is not read)."""
        with self._db.transaction() as connection:
            return {self.rows_held: count_rows(connection, self._table, self._mine())}

    def _erase(self) -> None:
        """Delete every row of this session."""
        with self._db.transaction(write=True) as connection:
            connection.execute(self._table.delete().where(self._mine()))

    @property
    def database(self) -> Database:
        return self._db

    def to_config(self) -> dict[str, Any]:
        return {"type": self.config_type, "url": self.url, "session_id": self.session_id}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._db!r}, session_id={self.session_id!r})"
