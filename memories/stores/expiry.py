"""When stored items expire: one SQL table beside any store, for item time to live.

:class:`ExpiryLedger` keeps each ``(namespace, key)``'s time to live and when it
expires, in :data:`ITEMS` or :data:`DOCUMENTS` (each kind its own table, so a sweep
deletes only its own kind); an item without a row never expires. A store on the
same database writes the rows in its own transactions (:meth:`ExpiryLedger.stamping`);
any other writes the row before its item and deletes it after, so a crash leaves
at most a row without its item (harmless). Times are the caller's clock's seconds.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import groupby
from typing import Final, Literal

import sqlalchemy as sa

from memories.kernel.namespaces import Namespace
from memories.kernel.steps import blocking_twin
from memories.stores.sql import Database, chunks, count_rows, starts_with

__all__ = ["DOCUMENTS", "ITEMS", "OWN", "Expiring", "ExpiryLedger", "Rule", "Stamp"]

#: A write's rule for an item that exists: it keeps its own, its time restarted from the
#: write (an item without a row keeps none: it never expires). A memory's default ttl is
#: for new items only; an edit never gives a permanent item a time to live.
OWN: Final = "own"
#: What a write does to an item's time to live: minutes from now, None (it never
#: expires: its row goes) or :data:`OWN`.
Rule = float | None | Literal["own"]

#: The ledger's writes for a store's own transaction, run on its connection.
Stamp = Callable[[sa.Connection], None]

#: The table of items (vector documents, collection memories, a LangGraph store's items).
ITEMS = "memories_item_expiry"
#: The table of profile store documents (a profile, an agent's instructions): a table
#: of its own, so that no sweep deletes what another kind of store holds.
DOCUMENTS = "memories_document_expiry"


def _make_table(name: str) -> sa.Table:
    return sa.Table(
        name,
        sa.MetaData(),
        sa.Column("namespace", sa.Text, primary_key=True),
        sa.Column("key", sa.String(255), primary_key=True),
        sa.Column("ttl_minutes", sa.Float, nullable=False),
        sa.Column("expires_at", sa.Float, nullable=False),
        sa.Index(f"ix_{name}_expires_at", "expires_at"),
    )


_tables = {name: _make_table(name) for name in (ITEMS, DOCUMENTS)}


@dataclass(frozen=True, slots=True)
class Expiring:
    """An item with a time to live."""

    namespace: Namespace
    """Its namespace."""
    key: str
    """Its key in the namespace."""
    expires_at: float
    """When it expires (Unix seconds)."""


def _label(namespace: Namespace) -> str:
    # JSON keeps any label intact (periods, slashes) and reads back as the same tuple.
    return json.dumps(list(namespace), ensure_ascii=False)


class ExpiryLedger:
    """The time to live of items of one store, in a SQL database.

    Args:
        url: a SQLAlchemy URL (the table is made on first use).
        table: :data:`ITEMS` or :data:`DOCUMENTS`.
        like: the store's database, when its transactions write these rows
            (an in-memory SQLite URL is then that store's own database).
    """

    def __init__(self, url: str, *, table: str = ITEMS, like: Database | None = None) -> None:
        if table not in _tables:
            raise ValueError(f"table must be one of {sorted(_tables)}, got {table!r}.")
        self.url = url
        self._table = _tables[table]
        self._db = Database(url, self._table.metadata, like=like)

    @property
    def database(self) -> Database:
        """The database the rows are kept in."""
        return self._db

    def __repr__(self) -> str:
        return f"ExpiryLedger({self._db!r})"

    def set(self, namespace: Namespace, key: str, ttl_minutes: Rule, *, now: float) -> None:
        """Give an item ``ttl_minutes`` to live from ``now``; None: it never expires;
        :data:`OWN`: its own time to live, restarted."""
        self.set_many(namespace, {key: ttl_minutes}, now=now)

    def set_many(self, namespace: Namespace, ttls: Mapping[str, Rule], *, now: float) -> None:
        """:meth:`set` for several items of a namespace, in one transaction."""
        if ttls:
            write = self.stamping(namespace, ttls, now=now)
            with self._db.transaction(write=True) as connection:
                write(connection)

    def stamping(self, namespace: Namespace, ttls: Mapping[str, Rule], *, now: float) -> Stamp:
        """:meth:`set_many` to run in another store's transaction on this database (its ``also``).

        The table is made now, before that transaction holds the database.
        """
        self._db.engine  # noqa: B018  (the table, made outside the store's transaction)
        t = self._table
        label = _label(namespace)
        own = [key for key, ttl in ttls.items() if ttl == OWN]
        given = {key: ttl for key, ttl in ttls.items() if ttl != OWN}
        rows = [
            {
                "namespace": label,
                "key": key,
                "ttl_minutes": float(ttl),
                "expires_at": now + ttl * 60,
            }
            for key, ttl in given.items()
            if isinstance(ttl, int | float)
        ]

        def write(connection: sa.Connection) -> None:
            # Keys go by the statement's share (PostgreSQL takes 65,535 parameters at most).
            for chunk in chunks(list(given)):
                connection.execute(sa.delete(t).where(t.c.namespace == label, t.c.key.in_(chunk)))
            if rows:
                connection.execute(sa.insert(t), rows)
            for chunk in chunks(own):  # no row read, no row for a permanent item
                restarted = sa.update(t).where(t.c.namespace == label, t.c.key.in_(chunk))
                connection.execute(restarted.values(expires_at=now + t.c.ttl_minutes * 60))

        return write

    def expired(
        self,
        *,
        now: float,
        limit: int | None = None,
        offset: int = 0,
        namespace: Namespace | None = None,
        key: str | None = None,
        keys: Sequence[str] | None = None,
        under: Namespace | None = None,
    ) -> list[Expiring]:
        """The items expired at ``now`` and not swept yet, soonest expired first.

        Only those of ``namespace``, of ``key``, among ``keys`` (few) and ``under`` a
        namespace prefix (itself included) when given; a page of ``limit`` from ``offset``.
        """
        t = self._table
        query = sa.select(t.c.namespace, t.c.key, t.c.expires_at).where(
            *self._expired_where(now, namespace, key, keys, under)
        )
        query = query.order_by(t.c.expires_at, t.c.namespace, t.c.key).limit(limit).offset(offset)
        with self._db.transaction() as connection:
            rows = connection.execute(query).all()
        return [Expiring(tuple(json.loads(row[0])), row[1], float(row[2])) for row in rows]

    def expired_counts(
        self,
        *,
        now: float,
        namespace: Namespace | None = None,
        key: str | None = None,
        keys: Sequence[str] | None = None,
        under: Namespace | None = None,
    ) -> dict[Namespace, int]:
        """How many items of each namespace :meth:`expired` would read (one aggregate query)."""
        t = self._table
        query = (
            sa.select(t.c.namespace, sa.func.count())
            .where(*self._expired_where(now, namespace, key, keys, under))
            .group_by(t.c.namespace)
        )
        with self._db.transaction() as connection:
            return {tuple(json.loads(ns)): int(n) for ns, n in connection.execute(query)}

    def _expired_where(
        self,
        now: float,
        namespace: Namespace | None,
        key: str | None,
        keys: Sequence[str] | None = None,
        under: Namespace | None = None,
    ) -> list[sa.ColumnElement[bool]]:
        t = self._table
        where = [t.c.expires_at <= now]
        if namespace is not None:
            where.append(t.c.namespace == _label(namespace))
        if key is not None:
            where.append(t.c.key == key)
        if keys is not None:
            where.append(t.c.key.in_(list(keys)))
        if under:  # the prefix's label, or it without its "]" and then a further label
            label = _label(under)
            deeper = starts_with(t.c.namespace, label[:-1] + ", ")
            where.append(sa.or_(t.c.namespace == label, deeper))
        return where

    def unexpired(
        self,
        namespace: Namespace,
        key: sa.ColumnElement[str],
        *,
        now: float,
        prefix: str = "",
        mark: str = "",
    ) -> sa.ColumnElement[bool]:
        """A condition for a query on another table of this database: ``key`` is not expired.

        ``key`` is that table's column, ``prefix`` + the key this ledger has after
        ``mark``: a NOT EXISTS on the primary key, one indexed lookup a row.
        """
        self._db.engine  # noqa: B018  (the table, made before the query's transaction)
        t = self._table
        own = key if not prefix else sa.func.substr(key, len(prefix) + 1)
        own = sa.literal(mark).concat(own) if mark else own
        expired = [t.c.namespace == _label(namespace), t.c.key == own, t.c.expires_at <= now]
        return ~sa.exists().where(*expired)

    def expires_at(self, namespace: Namespace, key: str) -> float | None:
        """When an item expires (None: never)."""
        return (self.rule_of(namespace, key) or (None, None))[1]

    def rule_of(self, namespace: Namespace, key: str) -> tuple[float, float] | None:
        """An item's time to live in minutes and when it expires (None: it never expires)."""
        t, where = self._table, (self._table.c.namespace == _label(namespace))
        with self._db.transaction() as connection:
            found = connection.execute(
                sa.select(t.c.ttl_minutes, t.c.expires_at).where(where, t.c.key == key)
            ).first()
        return None if found is None else (float(found[0]), float(found[1]))

    def restore(self, namespace: Namespace, key: str, rule: tuple[float, float] | None) -> None:
        """Give an item back the rule :meth:`rule_of` read (None: no row, it never expires)."""
        ttl, at = rule or (None, 0.0)  # at - ttl: when its time to live was set
        self.set(namespace, key, ttl, now=at - (ttl or 0) * 60)

    def expired_on_read(self, namespace: Namespace, key: str, *, now: float, refresh: bool) -> bool:
        """Whether an item read at ``now`` has expired; a live one's time starts again if
        ``refresh`` (an item without a row never expires)."""
        expires = self.expires_at(namespace, key)
        if refresh and expires is not None and expires > now:
            self.refresh([(namespace, key)], now=now)
        return expires is not None and expires <= now

    def renaming(self, namespace: Namespace, renames: Mapping[str, str]) -> Stamp:
        """The rows of ``namespace``'s items keyed anew (``{old: new}``), for a caller's
        transaction (a store moving its items, :meth:`stamping`'s way; the table made first)."""
        t = self._table

        def rename(connection: sa.Connection) -> None:
            for old, new in renames.items():
                where = (t.c.namespace == _label(namespace), t.c.key == old)
                connection.execute(sa.update(t).where(*where).values(key=new))

        return rename

    def refresh(self, items: Iterable[tuple[Namespace, str]], *, now: float) -> None:
        """Start the time to live of each item again from ``now``; expired ones stay expired."""
        t = self._table
        items = list(items)
        if not items:
            return
        with self._db.transaction(write=True) as connection:
            for namespace, key in items:
                connection.execute(
                    sa.update(t)
                    .where(t.c.namespace == _label(namespace), t.c.key == key, t.c.expires_at > now)
                    .values(expires_at=now + t.c.ttl_minutes * 60)
                )

    def forget(self, namespace: Namespace, key: str, *, expired_at: float | None = None) -> bool:
        """Remove an item's row (only while it is expired at ``expired_at``, when given).

        Returns:
            Whether a row was removed (a refresh since the sweep read it keeps it).
        """
        forgetting = self.forgetting(namespace, key, expired_at=expired_at)
        with self._db.transaction(write=True) as connection:
            return forgetting(connection)

    def forgetting(
        self, namespace: Namespace, key: str, *, expired_at: float | None = None
    ) -> Callable[[sa.Connection], bool]:
        """:meth:`forget` to run in another store's transaction on this database.

        A sweep deletes an item only when this removed its (still expired) row in the
        same transaction, so a write since the sweep read the row keeps the item.
        """
        self._db.engine  # noqa: B018  (the table, made outside the store's transaction)
        t = self._table
        where = [t.c.namespace == _label(namespace), t.c.key == key]
        if expired_at is not None:
            where.append(t.c.expires_at <= expired_at)

        def forget(connection: sa.Connection) -> bool:
            return bool(connection.execute(sa.delete(t).where(*where)).rowcount)

        return forget

    def discard(self, namespace: Namespace, keys: Sequence[str] | None = None) -> None:
        """Remove the rows of ``keys`` (None: every row of the namespace), expired or not."""
        discarding = self.discarding(namespace)
        with self._db.transaction(write=True) as connection:
            discarding(connection, keys)

    def discarding(
        self, namespace: Namespace
    ) -> Callable[[sa.Connection, Sequence[str] | None], None]:
        """:meth:`discard` to run in another store's transaction on this database."""
        self._db.engine  # noqa: B018  (the table, made outside the store's transaction)
        t = self._table
        label = _label(namespace)

        def discard(connection: sa.Connection, keys: Sequence[str] | None) -> None:
            if keys is None:
                connection.execute(sa.delete(t).where(t.c.namespace == label))
                return
            for chunk in chunks(list(dict.fromkeys(keys))):
                connection.execute(sa.delete(t).where(t.c.namespace == label, t.c.key.in_(chunk)))

        return discard

    @contextmanager
    def sweeping(
        self,
        namespace: Namespace,
        keys: Sequence[str],
        *,
        expired_at: float,
        database: Database | None = None,
    ) -> Iterator[list[str]]:
        """Hold the rows of ``keys`` still expired at ``expired_at``; forget them at the end.

        For a store whose deletes cannot join this transaction (a vector store): the
        block deletes the items given to it while their rows are held (SQLite's write
        lock, PostgreSQL's row locks). A write of one writes its row first, so it waits
        and then writes its item again; a row written since the sweep read it is not
        held, its item kept. An error in the block keeps every row for the next sweep.
        ``database``: the store's own, when this table is in it (its writes join).
        """
        self._db.engine  # noqa: B018  (the table, made before the transaction holds the database)
        db = self._db if database is None else database
        t = self._table
        label = _label(namespace)
        expired = [t.c.namespace == label, t.c.key.in_(list(keys)), t.c.expires_at <= expired_at]
        with db.batch(write=True), db.transaction(write=True) as connection:
            query = sa.select(t.c.key).where(*expired).with_for_update()
            held = list(connection.execute(query).scalars())
            yield held
            if held:
                connection.execute(sa.delete(t).where(t.c.namespace == label, t.c.key.in_(held)))

    def count(self) -> int:
        """How many items have a time to live."""
        with self._db.transaction() as connection:
            return count_rows(connection, self._table)

    def sweep(
        self,
        expire: Callable[[Namespace, list[Expiring], float], None],
        *,
        now: float,
        batch: int = 500,
        dry_run: bool = False,
        namespace: Namespace | None = None,
    ) -> dict[str, int]:
        """Hand the items expired at ``now`` (of ``namespace`` when given) to ``expire``; how many.

        ``expire(namespace, items, now)`` deletes them from their store, then forgets
        their rows (:meth:`forget` with ``expired_at=now``): a crash leaves the rest to
        the next sweep. ``dry_run`` only counts. Counts by namespace, labels joined by ``/``.
        """
        removed: dict[str, int] = {}
        while True:
            chunk = self.expired(now=now, limit=None if dry_run else batch, namespace=namespace)
            for where, group in groupby(chunk, key=lambda e: e.namespace):
                expired = list(group)
                label = "/".join(where)
                removed[label] = removed.get(label, 0) + len(expired)
                if not dry_run:
                    expire(where, expired, now)
            if dry_run or len(chunk) < batch:
                return removed

    # The twins of what memories' loops call (kernel.steps runs them by name).
    aset_many = blocking_twin(set_many)
    arestore = blocking_twin(restore)
    astamping = blocking_twin(stamping)
    arefresh = blocking_twin(refresh)
