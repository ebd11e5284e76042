"""What the entity stores share: a config form, and one session's log in a SQL database."""

from __future__ import annotations

from typing import Any, ClassVar

import sqlalchemy as sa

from memories.errors import ConfigError
from memories.kernel.paths import default_file
from memories.stores.sql import Database

__all__ = ["EntityLog", "SQLEntityLog"]


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


class SQLEntityLog(EntityLog):
    """One session's rows of an append-only log in a SQL database (any SQLAlchemy URL).

    Args:
        url: the database; by default ``memories.db`` in the data directory.
        session_id: whose rows these are.
        metadata: the log's tables.
    """

    def __init__(self, url: str | None, session_id: str, metadata: sa.MetaData) -> None:
        if not isinstance(session_id, str) or not session_id:
            raise ConfigError(f"session_id must be a non-empty string, got {session_id!r}")
        self.url = url or f"sqlite:///{default_file('memories.db')}"
        self.session_id = session_id
        self._db = Database(self.url, metadata)

    @property
    def database(self) -> Database:
        return self._db

    def to_config(self) -> dict[str, Any]:
        return {"type": self.config_type, "url": self.url, "session_id": self.session_id}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._db!r}, session_id={self.session_id!r})"
