"""Where profiles live: a namespaced key-value table in any SQL database, SQLite by default.

Three tables, beside the histories' tables and on the same engine
(:func:`memories.sql.get_engine`)::

    memories_store(namespace, key, value, version, created_at, updated_at)
        the current document of each profile; value is NULL once cleared
    memories_profile_changes(id, namespace, key, version, kind, document, patch,
                             turns, error, raw, created_at)
        every accepted change (with the whole document after it, the patch and
        the turns that caused it) and every failed update (with the error and
        the model's replies): the history, append-only
    memories_profile_pending(id, namespace, key, messages, created_at)
        turns saved but not folded into the profile yet

A namespace is a tuple of strings, stored joined by ``"."`` (so, as in
LangGraph's store, a label may not contain a period). The public methods
mirror LangGraph's ``BaseStore`` (``get``, ``put``, ``delete``, ``search``,
``list_namespaces``), so an adapter to it is a thin wrapper.

Writes are compare-and-set on ``version``: :meth:`ProfileStore.commit` writes
only if the profile is still at the version the change was computed from, and
in the same transaction records the change and drops the pending turns it
folded in. Two processes updating one profile never lose each other's work.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, NoReturn

import jsonpatch
from langchain_core.messages import BaseMessage
from sqlalchemy import (
    Column,
    Connection,
    Float,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    and_,
    delete,
    func,
    insert,
    or_,
    select,
    update,
)
from sqlalchemy.exc import IntegrityError

from memories.errors import BackendError, ConfigError
from memories.history.sql import DEFAULT_SQLITE_PATH
from memories.kernel.steps import blocking_twin
from memories.messages import dump_message, load_message
from memories.namespaces import Namespace, namespace_text
from memories.sql import ensure_tables, get_engine, make_sqlite_folder, redacted, transaction

__all__ = [
    "DEFAULT_URL",
    "Namespace",
    "PendingTurn",
    "ProfileChange",
    "ProfileItem",
    "ProfileStore",
]

DEFAULT_URL = f"sqlite:///{DEFAULT_SQLITE_PATH}"


_metadata = MetaData()

store_table = Table(
    "memories_store",
    _metadata,
    Column("namespace", String(512), primary_key=True),
    Column("key", String(255), primary_key=True),
    Column("value", Text, nullable=True),
    Column("version", Integer, nullable=False),
    Column("created_at", Float, nullable=False),
    Column("updated_at", Float, nullable=False),
)

changes_table = Table(
    "memories_profile_changes",
    _metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("namespace", String(512), nullable=False),
    Column("key", String(255), nullable=False),
    Column("version", Integer, nullable=True),
    Column("kind", String(16), nullable=False),
    Column("document", Text, nullable=True),
    Column("patch", Text, nullable=True),
    Column("turns", Text, nullable=True),
    Column("error", Text, nullable=True),
    Column("raw", Text, nullable=True),
    Column("created_at", Float, nullable=False),
    Index("ix_memories_profile_changes_key", "namespace", "key", "id"),
    sqlite_autoincrement=True,
)

pending_table = Table(
    "memories_profile_pending",
    _metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("namespace", String(512), nullable=False),
    Column("key", String(255), nullable=False),
    Column("messages", Text, nullable=False),
    Column("created_at", Float, nullable=False),
    Index("ix_memories_profile_pending_key", "namespace", "key", "id"),
    sqlite_autoincrement=True,
)


@dataclass(frozen=True)
class ProfileItem:
    """A stored document and where it lives."""

    namespace: Namespace
    """The namespace it belongs to, such as ``("user-42",)``."""
    key: str
    """Its name within the namespace (the profile's name)."""
    value: dict[str, Any] | None
    """The document; None only from :meth:`ProfileStore.load` for a cleared profile."""
    version: int
    """How many accepted changes it has had (clears included); the last change's version."""
    created_at: float
    """When it was first written (Unix time)."""
    updated_at: float
    """When it was last written (Unix time)."""


@dataclass(frozen=True)
class PendingTurn:
    """A conversation turn saved but not yet folded into the profile."""

    id: int
    """Position in the pending queue; grows, never reused."""
    messages: tuple[BaseMessage, ...]
    """The turn's messages (the human input and the AI output)."""
    created_at: float
    """When it was saved (Unix time)."""


@dataclass(frozen=True)
class ProfileChange:
    """One entry of a profile's history: an accepted change or a failed update."""

    id: int
    """Position in the change log."""
    version: int | None
    """The version this change created; None for a failed update."""
    kind: str
    """``update`` (from the model), ``put``, ``patch``, ``rollback``, ``clear`` or ``failed``."""
    created_at: float
    """When it happened (Unix time)."""
    document: dict[str, Any] | None
    """The whole document after the change (None after a clear or a failure)."""
    patch: tuple[dict[str, Any], ...]
    """The RFC 6902 operations that turned the previous document into this one."""
    turns: tuple[tuple[BaseMessage, ...], ...]
    """The conversation turns that caused it (for a failure: the turns it could not fold in)."""
    error: str | None = None
    """Why an update failed."""
    raw: tuple[str, ...] = ()
    """A failed update's model replies, as text, in order."""

    @property
    def ok(self) -> bool:
        """Whether this is an accepted change."""
        return self.version is not None


class _Conflict(Exception):
    """The profile moved past the expected version; the transaction rolls back."""


class ProfileStore:
    """Profiles in a SQL database: a SQLite file by default, or any SQLAlchemy URL.

    Args:
        url: a SQLAlchemy URL, such as ``"sqlite:///memories.db"`` (the
            default, shared with the SQLite histories) or
            ``"postgresql+psycopg://user:pw@host/db"``.
    """

    def __init__(self, url: str = DEFAULT_URL) -> None:
        if not isinstance(url, str) or not url:
            raise ConfigError(f"url must be a SQLAlchemy database URL string; got {url!r:.80}")
        self.url = url
        make_sqlite_folder(url)
        self._engine = get_engine(url)
        ensure_tables(self._engine, url, _metadata)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({redacted(self.url)!r})"

    def __getstate__(self) -> dict[str, Any]:
        # The engine (a connection pool) is this process's; a copy reconnects by URL.
        return {k: v for k, v in self.__dict__.items() if k != "_engine"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._engine = get_engine(self.url)

    def _transaction(self) -> AbstractContextManager[Connection]:
        return transaction(self._engine, self.url)

    # -- LangGraph-shaped access ------------------------------------------------

    def get(self, namespace: Namespace, key: str, /) -> ProfileItem | None:
        """The document stored under ``namespace`` / ``key``, or None (never stored, or cleared)."""
        item = self.load(namespace, key)
        return item if item is not None and item.value is not None else None

    def put(self, namespace: Namespace, key: str, value: dict[str, Any], /) -> ProfileItem:
        """Store ``value`` whatever the current version, and record it as a ``put`` change."""
        ns = namespace_text(namespace)
        text = _dump(value)
        now = time.time()
        where = and_(store_table.c.namespace == ns, store_table.c.key == key)
        for _ in range(2):
            try:
                with self._transaction() as connection:
                    # A write first takes the lock, so the read below cannot go stale.
                    touched = connection.execute(
                        update(store_table).where(where).values(updated_at=now)
                    ).rowcount
                    old: dict[str, Any] | None = None
                    if touched:
                        row = connection.execute(
                            select(store_table.c.value, store_table.c.version).where(where)
                        ).one()
                        old = json.loads(row.value) if row.value is not None else None
                        version = int(row.version) + 1
                        connection.execute(
                            update(store_table)
                            .where(where)
                            .values(value=text, version=version, updated_at=now)
                        )
                    else:
                        version = 1
                        self._insert(connection, ns, key, text, now)
                    patch = jsonpatch.make_patch(old or {}, value).patch
                    self._log(connection, ns, key, version, "put", value, patch, (), now)
            except _Conflict:
                continue  # another writer created it first; now it exists
            return self.load(namespace, key) or _lost(self.url, namespace, key)
        raise BackendError(f"Could not write {namespace!r}/{key!r} in {redacted(self.url)!r}.")

    def delete(self, namespace: Namespace, key: str, /) -> None:
        """Erase a profile completely: its document, its history and its pending turns."""
        ns = namespace_text(namespace)
        with self._transaction() as connection:
            for table in (store_table, changes_table, pending_table):
                connection.execute(delete(table).where(table.c.namespace == ns, table.c.key == key))

    def search(
        self, namespace_prefix: Namespace, /, *, limit: int = 10, offset: int = 0
    ) -> list[ProfileItem]:
        """The documents in ``namespace_prefix`` and the namespaces below it, sorted."""
        query = (
            select(store_table)
            .where(store_table.c.value.is_not(None), _under(namespace_prefix))
            .order_by(store_table.c.namespace, store_table.c.key)
            .limit(limit)
            .offset(offset)
        )
        with self._transaction() as connection:
            rows = connection.execute(query).all()
        return [_item(row) for row in rows]

    def list_namespaces(
        self,
        *,
        prefix: Namespace | None = None,
        max_depth: int | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[Namespace]:
        """The namespaces that hold documents, sorted, optionally cut to ``max_depth`` labels."""
        query = select(store_table.c.namespace).distinct().where(store_table.c.value.is_not(None))
        if prefix:
            query = query.where(_under(prefix))
        with self._transaction() as connection:
            found = {tuple(ns.split(".")) for ns in connection.execute(query).scalars()}
        if max_depth is not None:
            found = {ns[:max_depth] for ns in found}
        return sorted(found)[offset : offset + limit]

    # -- the profile machinery --------------------------------------------------

    def load(self, namespace: Namespace, key: str, /) -> ProfileItem | None:
        """The stored row, cleared profiles included (with ``value`` None)."""
        query = select(store_table).where(
            store_table.c.namespace == namespace_text(namespace), store_table.c.key == key
        )
        with self._transaction() as connection:
            row = connection.execute(query).first()
        return _item(row) if row is not None else None

    def commit(
        self,
        namespace: Namespace,
        key: str,
        document: dict[str, Any] | None,
        /,
        *,
        expected_version: int,
        kind: str,
        patch: Sequence[dict[str, Any]],
        turns: Sequence[PendingTurn] = (),
    ) -> ProfileItem | None:
        """Write a change if the profile is still at ``expected_version``; None if it moved on.

        In the same transaction, records the change in the history and drops
        ``turns`` from the pending queue.

        Args:
            document: the new document, or None to clear the profile.
            expected_version: the version the change was computed from (0: none stored).
            kind: the change's kind in the history.
            patch: the operations from the old document to the new one.
            turns: the pending turns that caused the change (folded in, so dropped).
        """
        ns = namespace_text(namespace)
        text = _dump(document) if document is not None else None
        now = time.time()
        version = expected_version + 1
        try:
            with self._transaction() as connection:
                if expected_version == 0:
                    self._insert(connection, ns, key, text, now)
                else:
                    moved = connection.execute(
                        update(store_table)
                        .where(
                            store_table.c.namespace == ns,
                            store_table.c.key == key,
                            store_table.c.version == expected_version,
                        )
                        .values(value=text, version=version, updated_at=now)
                    ).rowcount
                    if moved != 1:
                        raise _Conflict
                self._log(connection, ns, key, version, kind, document, patch, turns, now)
                self._drop_pending(connection, ns, key, [turn.id for turn in turns])
        except _Conflict:
            return None
        return self.load(namespace, key) or _lost(self.url, namespace, key)

    def record_failure(
        self,
        namespace: Namespace,
        key: str,
        /,
        *,
        error: str,
        raw: Sequence[str] = (),
        turns: Sequence[PendingTurn] = (),
    ) -> None:
        """Add a failed update to the history, with its error, replies and turns."""
        ns = namespace_text(namespace)
        row = {
            "namespace": ns,
            "key": key,
            "version": None,
            "kind": "failed",
            "turns": _dump_turns(turns),
            "error": error,
            "raw": _dump(list(raw)),
            "created_at": time.time(),
        }
        with self._transaction() as connection:
            connection.execute(insert(changes_table).values(**row))

    def changes(
        self,
        namespace: Namespace,
        key: str,
        /,
        *,
        version: int | None = None,
        failed: bool | None = None,
        last: int | None = None,
    ) -> list[ProfileChange]:
        """A profile's history, oldest first.

        Args:
            version: only the change that created this version.
            failed: only failed updates (True) or only accepted changes (False).
            last: only the last ``last`` of those.
        """
        t = changes_table
        query = select(t).where(t.c.namespace == namespace_text(namespace), t.c.key == key)
        if version is not None:
            query = query.where(t.c.version == version)
        if failed is not None:
            query = query.where(t.c.version.is_(None) if failed else t.c.version.is_not(None))
        if last is not None:
            query = query.order_by(t.c.id.desc()).limit(last)
        else:
            query = query.order_by(t.c.id)
        with self._transaction() as connection:
            rows = list(connection.execute(query).all())
        if last is not None:
            rows.reverse()
        return [_change(row) for row in rows]

    def add_pending(
        self, namespace: Namespace, key: str, messages: Sequence[BaseMessage], /
    ) -> int:
        """Queue a turn to fold in later; returns its id."""
        row = {
            "namespace": namespace_text(namespace),
            "key": key,
            "messages": _dump([json.loads(dump_message(m)) for m in messages]),
            "created_at": time.time(),
        }
        with self._transaction() as connection:
            inserted = connection.execute(insert(pending_table).values(**row)).inserted_primary_key
        assert inserted is not None  # an INSERT into a table with a primary key has one
        return int(inserted[0])

    def pending(
        self, namespace: Namespace, key: str, /, *, limit: int | None = None
    ) -> list[PendingTurn]:
        """The queued turns, oldest first (at most ``limit``)."""
        t = pending_table
        query = (
            select(t)
            .where(t.c.namespace == namespace_text(namespace), t.c.key == key)
            .order_by(t.c.id)
            .limit(limit)
        )
        with self._transaction() as connection:
            rows = connection.execute(query).all()
        return [
            PendingTurn(
                int(row.id),
                tuple(load_message(json.dumps(m)) for m in json.loads(row.messages)),
                float(row.created_at),
            )
            for row in rows
        ]

    def count_pending(self, namespace: Namespace, key: str, /) -> int:
        """How many turns are queued."""
        t = pending_table
        query = select(func.count()).where(
            t.c.namespace == namespace_text(namespace), t.c.key == key
        )
        with self._transaction() as connection:
            return int(connection.execute(query).scalar_one())

    def drop_pending(self, namespace: Namespace, key: str, ids: Sequence[int], /) -> None:
        """Remove these queued turns (the model saw them and changed nothing)."""
        with self._transaction() as connection:
            self._drop_pending(connection, namespace_text(namespace), key, ids)

    # -- async twins ------------------------------------------------------------

    # Async twins: the same calls on a worker thread (a native async store overrides them).
    aget = blocking_twin(get)
    aput = blocking_twin(put)
    adelete = blocking_twin(delete)
    asearch = blocking_twin(search)
    alist_namespaces = blocking_twin(list_namespaces)
    aload = blocking_twin(load)
    acommit = blocking_twin(commit)
    arecord_failure = blocking_twin(record_failure)
    achanges = blocking_twin(changes)
    aadd_pending = blocking_twin(add_pending)
    apending = blocking_twin(pending)
    acount_pending = blocking_twin(count_pending)
    adrop_pending = blocking_twin(drop_pending)

    # -- statements -------------------------------------------------------------

    @staticmethod
    def _insert(connection: Connection, ns: str, key: str, text: str | None, now: float) -> None:
        row = {
            "namespace": ns,
            "key": key,
            "value": text,
            "version": 1,
            "created_at": now,
            "updated_at": now,
        }
        try:
            connection.execute(insert(store_table).values(**row))
        except IntegrityError as exc:
            # Another writer created the row first; the whole transaction rolls back.
            raise _Conflict from exc

    @staticmethod
    def _log(
        connection: Connection,
        ns: str,
        key: str,
        version: int,
        kind: str,
        document: dict[str, Any] | None,
        patch: Sequence[dict[str, Any]],
        turns: Sequence[PendingTurn],
        now: float,
    ) -> None:
        row = {
            "namespace": ns,
            "key": key,
            "version": version,
            "kind": kind,
            "document": _dump(document) if document is not None else None,
            "patch": _dump(list(patch)),
            "turns": _dump_turns(turns),
            "created_at": now,
        }
        connection.execute(insert(changes_table).values(**row))

    @staticmethod
    def _drop_pending(connection: Connection, ns: str, key: str, ids: Sequence[int]) -> None:
        # Exactly these ids, never "up to": on a server database a turn with a
        # smaller id can commit after a larger one and must not be dropped unseen.
        if ids:
            t = pending_table
            connection.execute(
                delete(t).where(t.c.namespace == ns, t.c.key == key, t.c.id.in_(list(ids)))
            )


def _under(prefix: Namespace) -> Any:
    if not prefix:
        return store_table.c.namespace.is_not(None)
    joined = namespace_text(prefix)
    escaped = joined.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return or_(
        store_table.c.namespace == joined,
        store_table.c.namespace.like(f"{escaped}.%", escape="\\"),
    )


def _item(row: Any) -> ProfileItem:
    return ProfileItem(
        namespace=tuple(row.namespace.split(".")),
        key=row.key,
        value=json.loads(row.value) if row.value is not None else None,
        version=int(row.version),
        created_at=float(row.created_at),
        updated_at=float(row.updated_at),
    )


def _change(row: Any) -> ProfileChange:
    return ProfileChange(
        id=int(row.id),
        version=int(row.version) if row.version is not None else None,
        kind=row.kind,
        created_at=float(row.created_at),
        document=json.loads(row.document) if row.document is not None else None,
        patch=tuple(json.loads(row.patch)) if row.patch else (),
        turns=_load_turns(row.turns),
        error=row.error,
        raw=tuple(json.loads(row.raw)) if row.raw else (),
    )


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _dump_turns(turns: Sequence[PendingTurn]) -> str:
    return _dump([[json.loads(dump_message(m)) for m in turn.messages] for turn in turns])


def _load_turns(text: str | None) -> tuple[tuple[BaseMessage, ...], ...]:
    if not text:
        return ()
    return tuple(tuple(load_message(json.dumps(m)) for m in turn) for turn in json.loads(text))


def _lost(url: str, namespace: Namespace, key: str) -> NoReturn:
    raise BackendError(
        f"The profile {namespace!r}/{key!r} vanished from {redacted(url)!r} right after it was "
        "written (deleted by another process)."
    )
