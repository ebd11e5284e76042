"""Entity stores: a summary per entity name, every version kept.

LangChain's ``BaseEntityStore`` (``get`` / ``set`` / ``delete`` / ``exists`` /
``clear``) overwrites a summary with no trace; the stores here have its
interface and append instead (:class:`EntityStore`). :func:`as_entity_store`
drives any store with LangChain's interface (:class:`LangChainEntityStore`);
the Redis store is :mod:`~memories.stores.entities.redis_summaries`'s.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, NamedTuple

import sqlalchemy as sa

from memories.kernel.imports import from_config
from memories.kernel.paths import default_file
from memories.kernel.steps import blocking_twin
from memories.stores.entities.base import EntityLog, SQLEntityLog, coerced, session_log

__all__ = [
    "DEFAULT_ENTITY_SESSION",
    "ENTITY_STORE_TYPES",
    "EntityStore",
    "EntityVersion",
    "InMemoryEntityStore",
    "LangChainEntityStore",
    "SQLEntityStore",
    "SQLiteEntityStore",
    "as_entity_store",
    "create_entity_store",
]

#: LangChain's stores' default ``session_id``.
DEFAULT_ENTITY_SESSION = "default"


class EntityVersion(NamedTuple):
    """One version of an entity's summary."""

    entity: str
    """The entity's name, as the model wrote it."""
    value: str | None
    """The summary; None when this version deleted the entity."""
    created_at: float
    """When it was written (seconds since the epoch)."""


class EntityStore(EntityLog, ABC):
    """An entity store with LangChain's ``BaseEntityStore`` interface, keeping every version.

    A write is a new version, a deletion (or ``set`` of an empty value, as LangChain's
    SQLite and Redis stores do) a version with no value; ``clear`` deletes every
    entity and :meth:`purge` erases the versions too.

    Implementing a subclass
    -----------------------
    Implement the five abstract methods; LangChain's and the async twins are written here.
    """

    @abstractmethod
    def _latest(self, entity: str, /) -> EntityVersion | None:
        """The entity's newest version, or None if it was never written."""

    @abstractmethod
    def _append(self, versions: Sequence[tuple[str, str | None]], /) -> None:
        """Record ``(entity, value or None)`` versions, all or none."""

    @abstractmethod
    def history(self, entity: str, /) -> list[EntityVersion]:
        """Every version of ``entity``'s summary, oldest first (deletions included)."""

    @abstractmethod
    def entities(self) -> dict[str, str]:
        """Every entity that has a summary now: name -> summary."""

    @abstractmethod
    def purge(self) -> None:
        """Erase every version of every entity of this store (no trace kept)."""

    def held(self) -> dict[str, int]:
        """What :meth:`purge` erases: here the entities with a summary (a backend may say more)."""
        return {"entities": len(self.entities())}

    # -- LangChain's interface, written once ------------------------------------------

    def get(self, key: str, default: str | None = None) -> str | None:
        """The entity's summary, or ``default`` when it has none."""
        latest = self._latest(key)
        return default if latest is None or latest.value is None else latest.value

    def set(self, key: str, value: str | None) -> None:
        """Write a new version of the entity's summary (an empty value deletes it)."""
        self._append([(key, value or None)])

    def set_many(self, values: Mapping[str, str | None], /) -> None:
        """Write a new version of each entity's summary, all in one transaction (empty: delete)."""
        if values:
            self._append([(key, value or None) for key, value in values.items()])

    def delete(self, key: str) -> None:
        """Delete the entity (a version with no value; its history stays)."""
        if self.exists(key):
            self._append([(key, None)])

    def exists(self, key: str) -> bool:
        """Whether the entity has a summary now."""
        latest = self._latest(key)
        return latest is not None and latest.value is not None

    def clear(self) -> None:
        """Delete every entity (one version each with no value; the history stays)."""
        current = self.entities()
        if current:
            self._append([(entity, None) for entity in current])

    aget = blocking_twin(get)
    aset = blocking_twin(set)
    aset_many = blocking_twin(set_many)
    adelete = blocking_twin(delete)
    aexists = blocking_twin(exists)
    aclear = blocking_twin(clear)
    aentities = blocking_twin(entities)
    ahistory = blocking_twin(history)


class InMemoryEntityStore(EntityStore):
    """Entities in this process's memory, every version kept (gone when the process ends)."""

    config_type: ClassVar[str] = "memory"

    def __init__(self) -> None:
        self._versions: dict[str, list[EntityVersion]] = {}

    def _latest(self, entity: str, /) -> EntityVersion | None:
        versions = self._versions.get(entity)
        return versions[-1] if versions else None

    def _append(self, versions: Sequence[tuple[str, str | None]], /) -> None:
        now = time.time()
        for entity, value in versions:
            self._versions.setdefault(entity, []).append(EntityVersion(entity, value, now))

    def history(self, entity: str, /) -> list[EntityVersion]:
        return list(self._versions.get(entity, ()))

    def entities(self) -> dict[str, str]:
        return {
            name: versions[-1].value
            for name, versions in self._versions.items()
            if versions[-1].value is not None
        }

    def purge(self) -> None:
        self._versions.clear()

    def to_config(self) -> dict[str, Any]:
        return {"type": self.config_type}

    def __repr__(self) -> str:
        return f"InMemoryEntityStore({len(self.entities())} entities)"


#: Every version of every entity summary: append-only, read newest first per entity.
entity_versions_table = session_log(
    "memories_entity_versions",
    "entity",
    sa.Column("value", sa.Text, nullable=True),
    index="ix_memories_entity_versions_key",
)


class SQLEntityStore(SQLEntityLog, EntityStore):
    """Entities in a SQL database (any SQLAlchemy URL: SQLite, PostgreSQL), every version kept.

    Args:
        url: the database; by default ``memories.db`` in the data directory.
        session_id: whose entities these are (LangChain's stores' argument).
    """

    config_type: ClassVar[str] = "sql"
    rows_held: ClassVar[str] = "entity versions"

    def __init__(self, url: str | None = None, *, session_id: str = DEFAULT_ENTITY_SESSION) -> None:
        super().__init__(url, session_id, entity_versions_table)

    def _versions(self, entity: str) -> Any:
        """A query of ``entity``'s versions, as :class:`EntityVersion` fields."""
        t = entity_versions_table
        query = sa.select(t.c.entity, t.c.value, t.c.created_at)
        return query.where(self._mine(), t.c.entity == entity)

    def _latest(self, entity: str, /) -> EntityVersion | None:
        query = self._versions(entity).order_by(entity_versions_table.c.id.desc()).limit(1)
        with self._db.transaction() as connection:
            row = connection.execute(query).first()
        return None if row is None else EntityVersion(*row)

    def _append(self, versions: Sequence[tuple[str, str | None]], /) -> None:
        self._insert([{"entity": e, "value": v} for e, v in versions])

    def history(self, entity: str, /) -> list[EntityVersion]:
        query = self._versions(entity).order_by(entity_versions_table.c.id)
        with self._db.transaction() as connection:
            return [EntityVersion(*row) for row in connection.execute(query)]

    def entities(self) -> dict[str, str]:
        table = entity_versions_table
        newest = (
            sa.select(sa.func.max(table.c.id))
            .where(self._mine())
            .group_by(table.c.entity)
            .scalar_subquery()
        )
        query = (
            sa.select(table.c.entity, table.c.value)
            .where(table.c.id.in_(newest), table.c.value.is_not(None))
            .order_by(table.c.id)
        )
        with self._db.transaction() as connection:
            return {entity: value for entity, value in connection.execute(query)}

    def purge(self) -> None:
        self._erase()


class SQLiteEntityStore(SQLEntityStore):
    """:class:`SQLEntityStore` on a SQLite file (LangChain's ``SQLiteEntityStore``'s arguments).

    Args:
        session_id: whose entities these are.
        db_file: the database file; by default ``memories.db`` in the data directory.
    """

    config_type: ClassVar[str] = "sqlite"

    def __init__(
        self, session_id: str = DEFAULT_ENTITY_SESSION, db_file: str | Path | None = None
    ) -> None:
        self.db_file = Path(default_file("memories.db") if db_file is None else db_file)
        super().__init__(f"sqlite:///{self.db_file.resolve()}", session_id=session_id)

    def to_config(self) -> dict[str, Any]:
        db_file = str(self.db_file)
        return {"type": self.config_type, "db_file": db_file, "session_id": self.session_id}


class LangChainEntityStore(EntityStore):
    """Any store with LangChain's ``BaseEntityStore`` interface, as the memory drives it.

    LangChain's stores keep one value per entity (:meth:`history` gives it) and
    cannot list their keys (:meth:`entities` is not available).
    """

    config_type: ClassVar[str] = "langchain"

    def __init__(self, store: Any) -> None:
        self.store = store

    def _latest(self, entity: str, /) -> EntityVersion | None:
        value = self.store.get(entity, None)
        return None if value is None else EntityVersion(entity, value, 0.0)

    def _append(self, versions: Sequence[tuple[str, str | None]], /) -> None:
        for entity, value in versions:
            self.store.set(entity, value)

    def get(self, key: str, default: str | None = None) -> str | None:
        return self.store.get(key, default)

    def set(self, key: str, value: str | None) -> None:
        # LangChain's own semantics, store by store (its in-memory store keeps "").
        self.store.set(key, value)

    def delete(self, key: str) -> None:
        self.store.delete(key)

    def exists(self, key: str) -> bool:
        return bool(self.store.exists(key))

    def clear(self) -> None:
        self.store.clear()

    def history(self, entity: str, /) -> list[EntityVersion]:
        latest = self._latest(entity)
        return [] if latest is None else [latest]

    def entities(self) -> dict[str, str]:
        inner = getattr(self.store, "store", None)
        if isinstance(inner, Mapping):  # LangChain's InMemoryEntityStore
            return {k: v for k, v in inner.items() if v is not None}
        raise NotImplementedError(
            f"{type(self.store).__name__} cannot list its entities (LangChain's entity store "
            "interface has no such method); use memories' SQLEntityStore to list them."
        )

    def purge(self) -> None:
        self.store.clear()

    def __repr__(self) -> str:
        return f"LangChainEntityStore({self.store!r:.80})"


#: An entity store config's ``type`` -> its class, or its ``(module, class)`` when the
#: module needs an optional dependency (imported when a config names it).
ENTITY_STORE_TYPES: dict[str, type[EntityStore] | tuple[str, str]] = {
    "memory": InMemoryEntityStore,
    "redis": ("memories.stores.entities.redis_summaries", "RedisEntityStore"),
    "sql": SQLEntityStore,
    "sqlite": SQLiteEntityStore,
}


def create_entity_store(config: Mapping[str, Any]) -> EntityStore:
    """An entity store from ``{"type": "memory" | "redis" | "sql" | "sqlite", ...}``.

    Raises:
        ConfigError: an unknown type or a bad option.
        MissingDependencyError: the type's optional dependency is not installed.
    """
    return from_config(config, ENTITY_STORE_TYPES, "entity store")


def as_entity_store(value: Any, /) -> EntityStore:
    """``value`` as an :class:`EntityStore`: ours as is, LangChain's wrapped, a config built.

    Raises:
        ConfigError: ``value`` is none of these.
    """
    store: EntityStore = coerced(
        value,
        EntityStore,
        create_entity_store,
        ("get", "set", "delete", "exists", "clear"),
        LangChainEntityStore,
        "entity_store must be an entity store (memories' InMemoryEntityStore, SQLEntityStore, "
        "SQLiteEntityStore, RedisEntityStore, or one of LangChain's with get/set/delete/exists/"
        "clear) or a config dict such as {'type': 'sqlite', 'db_file': 'entities.db'}",
    )
    return store
