"""``ProfileStore``: the versioned documents in any SQL database (SQLite by default)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.messages import BaseMessage
from sqlalchemy import Connection, delete, func, insert, literal_column, select, union, update
from sqlalchemy.exc import IntegrityError

from memories.errors import ConfigError
from memories.kernel.messages import dump_message, load_message
from memories.kernel.namespaces import Namespace, as_namespace, namespace_text
from memories.stores.documents import records
from memories.stores.documents.base import (
    BaseProfileStore,
)
from memories.stores.documents.records import (
    Also,
    Change,
    KeyCount,
    PendingTurn,
    ProfileChange,
    ProfileItem,
    default_url,
)
from memories.stores.documents.tables import (
    HELD,
    OWNER,
    changes_table,
    keyed,
    legacy_table,
    matching,
    metadata,
    owned,
    pending_table,
    refuse_others,
    sqlite_page,
    store_table,
    under,
)
from memories.stores.documents.ttl import DocumentTTL
from memories.stores.expiry import ExpiryLedger
from memories.stores.sql import Database, chunks, count_rows, redacted, starts_with


class _Conflict(Exception):
    """The profile moved past the expected version; the transaction rolls back."""


class ProfileStore(BaseProfileStore):
    """Profiles in a SQL database: a SQLite file by default, or any SQLAlchemy URL.

    Args:
        url: a SQLAlchemy URL; default: ``memories.db``, shared with the SQLite histories.
        ttl: how long the documents written through this object live (its
            ledger on ``url``); None: until deleted.
        owner: whose rows these are (the kind of memory: ``"profile"``,
            ``"instructions"``...): the store reads, writes and deletes no other's.
    """

    def __init__(
        self, url: str | None = None, *, ttl: DocumentTTL | None = None, owner: str = OWNER
    ) -> None:
        url = default_url() if url is None else url
        if not isinstance(url, str) or not url:
            raise ConfigError(f"url must be a SQLAlchemy database URL string; got {url!r:.80}")
        if ttl is not None and ttl.ledger.url != url:
            raise ConfigError(f"A document's time to live is kept on its store's database {url!r}.")
        if not isinstance(owner, str) or not 0 < len(owner) <= 32:
            raise ConfigError(f"owner must be a name of 1 to 32 characters; got {owner!r:.80}")
        self.url = url
        self.ttl = ttl
        self.owner = owner
        self._db = Database(url, metadata, like=None if ttl is None else ttl.ledger.database)

    @property
    def database(self) -> Database:
        """The database the documents are kept in."""
        return self._db

    def _joined(self, ledger: ExpiryLedger) -> Database | None:
        return self._db if ledger.database.shares(self._db) else None

    def _also(
        self, namespace: Namespace, commits: Sequence[tuple[str, int]], also: Also | None
    ) -> Also | None:
        """A commit's other writes (made before its transaction): ``also``, and the expiry rows.

        A document written again after it expired starts anew: the ``ttl`` is for
        new ones, and its expired versions go. ``commits``: (key, expected version).
        """
        if self.ttl is None:
            return also
        keys = [key for key, _ in commits]
        expired = self.ttl.expired(namespace, keys)
        stamp = self.ttl.stamping(namespace, keys, {*expired, *(k for k, v in commits if not v)})
        ns = namespace_text(namespace)

        def both(connection: Connection) -> None:
            stamp(connection)
            if expired:
                self._drop_versions(connection, ns, expired)
            if also is not None:
                also(connection)

        return both

    def _drop_versions(self, connection: Connection, ns: str, keys: Sequence[str]) -> None:
        """Remove the history of these keys before their current version (just written)."""
        t, current = changes_table, store_table
        version = (
            select(current.c.version)
            .where(current.c.namespace == ns, current.c.key == t.c.key)
            .scalar_subquery()
        )
        connection.execute(
            delete(t).where(
                t.c.namespace == ns,
                t.c.key.in_(list(keys)),
                t.c.version < version,
                owned(t, self.owner),
            )
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}({redacted(self.url)!r})"

    def batch(self, ops: Sequence[records.Op], /) -> list[Any]:
        """Perform ``ops`` in order, each in its own transaction."""
        results = []
        for op in ops:
            handler = _HANDLERS.get(type(op))
            if handler is None:
                raise TypeError(f"{type(self).__name__} cannot perform {op!r:.80}")
            results.append(handler(self, op))
        return results

    def _load(self, op: records.Load) -> ProfileItem | None:
        t = store_table
        query = select(t).where(*self._at(t, namespace_text(op.namespace), op.key))
        with self._db.transaction() as connection:
            row = connection.execute(query).first()
        item = _item(row) if row is not None else None
        return item if self.ttl is None else self.ttl.shown(item)

    def _commit(self, op: records.Commit) -> ProfileItem | None:
        ns, key, change = namespace_text(op.namespace), op.key, op.change
        also = self._also(op.namespace, [(key, op.expected_version)], op.also)
        try:
            with self._db.transaction() as connection:
                self._write_change(connection, ns, key, change, op.expected_version, time.time())
                self._drop(connection, ns, key, [turn.id for turn in change.turns])
                if also is not None:
                    also(connection)
        except _Conflict:
            return None
        return self._load(records.Load(op.namespace, key))

    def _commit_many(self, op: records.CommitMany) -> list[ProfileItem | None] | None:
        ns, now = namespace_text(op.namespace), time.time()
        also = self._also(op.namespace, [(key, v) for key, _, v in op.commits], op.also)
        try:
            with self._db.transaction() as connection:
                # The turns are this writer's claim, taken first (the delete locks them): if
                # another writer folded them in already, this change would repeat it.
                ids = sorted(set(op.drop_ids))
                if self._drop(connection, ns, op.drop_key, ids) != len(ids):
                    raise _Conflict
                fresh = [(key, change) for key, change, expected in op.commits if expected == 0]
                self._insert_fresh(connection, ns, fresh, now)
                for key, change, expected in op.commits:
                    if expected:
                        self._write_change(connection, ns, key, change, expected, now)
                if also is not None:
                    also(connection)
        except _Conflict:
            return None
        return self._load_many(op.namespace, [key for key, _, _ in op.commits])

    def _insert_fresh(
        self, connection: Connection, ns: str, fresh: Sequence[tuple[str, Change]], now: float
    ) -> None:
        """New keys and their first changes, two statements for all of them (a bulk put)."""
        if not fresh:
            return
        texts = [_dump(c.document) if c.document is not None else None for _, c in fresh]
        refuse_others(connection, ns, [key for key, _ in fresh], self.owner)
        try:
            connection.execute(
                insert(store_table),
                [
                    {
                        "namespace": ns,
                        "key": key,
                        "value": text,
                        "version": 1,
                        "created_at": now,
                        "updated_at": now,
                        "owner": self.owner,
                    }
                    for (key, _), text in zip(fresh, texts, strict=True)
                ],
            )
        except IntegrityError as exc:
            raise _Conflict from exc  # another writer created one of them first
        connection.execute(
            insert(changes_table),
            [
                self._change_row(ns, key, 1, change, text, now)
                for (key, change), text in zip(fresh, texts, strict=True)
            ],
        )

    def _load_many(self, namespace: Namespace, keys: Sequence[str]) -> list[ProfileItem | None]:
        """The rows of these keys, in order (None where absent), read in a few queries."""
        t, ns = store_table, namespace_text(namespace)
        found: dict[str, ProfileItem] = {}
        with self._db.transaction() as connection:
            for chunk in chunks(keys):
                query = select(t).where(
                    t.c.namespace == ns, t.c.key.in_(list(chunk)), owned(t, self.owner)
                )
                found.update((row.key, _item(row)) for row in connection.execute(query))
        return [found.get(key) for key in keys]

    def _write_change(
        self, connection: Connection, ns: str, key: str, change: Change, expected: int, now: float
    ) -> None:
        """Compare-and-set one key and record the change (raises _Conflict if it moved on)."""
        if expected == 0:
            self._insert_fresh(connection, ns, [(key, change)], now)
            return
        text = _dump(change.document) if change.document is not None else None
        t = store_table  # an unowned row (an older version's) is claimed here
        moved = connection.execute(
            update(t)
            .where(*self._at(t, ns, key), t.c.version == expected)
            .values(value=text, version=expected + 1, updated_at=now, owner=self.owner)
        ).rowcount
        if moved != 1:
            raise _Conflict
        row = self._change_row(ns, key, expected + 1, change, text, now)
        connection.execute(insert(changes_table).values(**row))

    def _change_row(
        self, ns: str, key: str, version: int, change: Change, text: str | None, now: float
    ) -> dict[str, Any]:
        """The row recording ``change`` of ``key`` as its ``version`` (``text``: its document)."""
        return {
            "namespace": ns,
            "key": key,
            "version": version,
            "kind": change.kind,
            "document": text,
            "patch": _dump(list(change.patch)),
            "turns": _dump_turns(change.turns),
            "created_at": now,
            "owner": self.owner,
        }

    def _keys(self, op: records.Keys) -> list[ProfileItem]:
        t = store_table
        query = select(t).where(*self._keyed(t, op.namespace, op.prefix), t.c.value.is_not(None))
        query = query.order_by(t.c.key)
        with self._db.transaction() as connection:
            return [_item(row) for row in connection.execute(query)]

    def _key_namespaces(self, op: records.KeyNamespaces) -> tuple[list[KeyCount], int]:
        # Each part DISTINCT on its own: SQLite reads (namespace, key) from the
        # tables' indexes in namespace order, and the union meets few rows.
        named = union(
            *(
                select(t.c.namespace)
                .distinct()
                .where(
                    starts_with(t.c.key, op.prefix),
                    t.c.namespace.contains(op.contains, autoescape=True),
                    owned(t, self.owner),
                )
                for t in (store_table, changes_table, pending_table)
            )
        ).subquery()
        with self._db.transaction() as connection:
            if op.limit == 0:  # the total alone (the overview's count)
                total = connection.execute(select(func.count()).select_from(named)).scalar_one()
                return [], int(total)
            # The union once (it scans every key under the prefix: 100,000 at a time), the
            # page cut here, then the page's counts by a range of the namespace index.
            every = list(
                connection.execute(select(named.c.namespace).order_by(named.c.namespace)).scalars()
            )
            names = every[op.offset : op.offset + op.limit]
            counted: dict[str, int] = {}
            if names:
                t = store_table
                counts = (
                    select(t.c.namespace, func.count().label("documents"))
                    .where(
                        t.c.namespace.between(names[0], names[-1]),
                        starts_with(t.c.key, op.prefix),
                        t.c.value.is_not(None),
                        owned(t, self.owner),
                    )
                    .group_by(t.c.namespace)
                )
                counted = {row[0]: int(row[1]) for row in connection.execute(counts)}
        found = [KeyCount(tuple(name.split(".")), counted.get(name, 0)) for name in names]
        return found, len(every)

    def _key_page(self, op: records.KeyPage) -> tuple[list[ProfileItem], int]:
        t, ns = store_table, namespace_text(op.namespace)
        mine = [starts_with(t.c.key, op.prefix), owned(t, self.owner)]
        if op.keep is not None:
            mine.append(op.keep(t.c.key))
        where = [t.c.namespace == ns, t.c.value.is_not(None), *mine]
        # By key: the primary key's order, read from its index without a sort
        # (a sort on updated_at read every row's document: 0.7 s at 100,000).
        query = select(t).where(*where).order_by(t.c.key)
        counting = select(func.count()).where(*where)
        with self._db.transaction() as connection:
            if op.contains and op.limit:
                matched = matching(op, sqlite=connection.dialect.name == "sqlite")
                if connection.dialect.name == "sqlite" and self._mostly(connection, op):
                    # The namespace is much of the table: reading the table in its own
                    # order (20 ms at 100,000 documents) beats a lookup per index entry
                    # (120 ms). Conditions written through || '' keep the indexes out.
                    where = [
                        t.c.namespace.concat("") == ns,
                        t.c.value.concat("").is_not(None),
                        *mine,
                    ]
                # The total comes with the page, not from a second scan: a window over the
                # matches, or on SQLite a count of their keys, whose sort then carries keys,
                # not documents (a text in all 100,000: 135 to 80 ms).
                if connection.dialect.name == "sqlite":
                    query = sqlite_page(where, matched, op.limit, op.offset)
                else:
                    query = select(t).where(*where, matched).order_by(t.c.key)
                    query = query.add_columns(func.count().over().label("total"))
                    query = query.limit(op.limit).offset(op.offset)
                rows = connection.execute(query).all()
                if rows:
                    return [_item(row) for row in rows], int(rows[0].total)
                if op.offset == 0:
                    return [], 0
                counting = select(func.count()).where(*where, matched)
                return [], int(connection.execute(counting).scalar_one())
            if op.contains:
                counting = counting.where(matching(op, sqlite=connection.dialect.name == "sqlite"))
            total = connection.execute(counting).scalar_one()
            rows = connection.execute(query.limit(op.limit).offset(op.offset)).all()
        return [_item(row) for row in rows], int(total)

    @staticmethod
    def _mostly(connection: Connection, op: records.KeyPage) -> bool:
        """Whether ``op``'s namespace holds an eighth of the table or more (SQLite)."""
        t = store_table
        held = select(func.count()).where(*keyed(t, op.namespace, op.prefix))
        rows = connection.execute(held).scalar_one()  # from the key index alone
        # max(rowid) is one descent of the table, and at least the number of its rows.
        last: Any = select(func.max(literal_column("rowid"))).select_from(t)
        return int(rows) * 8 >= int(connection.execute(last).scalar_one() or 0)

    def _key_changes(self, op: records.KeyChanges) -> list[tuple[str, ProfileChange]]:
        t = changes_table
        query = select(t).where(*self._keyed(t, op.namespace, op.prefix), t.c.version.is_not(None))
        query = query.order_by(t.c.id)
        with self._db.transaction() as connection:
            return [(row.key, _change(row)) for row in connection.execute(query)]

    def _record_failure(self, op: records.RecordFailure) -> None:
        row = {
            "namespace": namespace_text(op.namespace),
            "key": op.key,
            "version": None,
            "kind": "failed",
            "turns": _dump_turns(op.turns),
            "error": op.error,
            "raw": _dump(list(op.raw)),
            "created_at": time.time(),
            "owner": self.owner,
        }
        with self._db.transaction() as connection:
            connection.execute(insert(changes_table).values(**row))

    def _changes(self, op: records.Changes) -> list[ProfileChange]:
        t = changes_table
        query = select(t).where(*self._at(t, namespace_text(op.namespace), op.key))
        if op.version is not None:  # to restore: an expired document's versions wait for the sweep
            if self.ttl is not None and self.ttl.expired(op.namespace, [op.key]):
                return []
            query = query.where(t.c.version == op.version)
        if op.failed is not None:
            query = query.where(t.c.version.is_(None) if op.failed else t.c.version.is_not(None))
        newest = op.last is not None  # the last ones: read newest first, then put in order
        query = query.order_by(t.c.id.desc() if newest else t.c.id).limit(op.last)
        with self._db.transaction() as connection:
            rows = connection.execute(query).all()
        return [_change(row) for row in (rows[::-1] if newest else rows)]

    def _add_pending(self, op: records.AddPending) -> int:
        row = {
            "namespace": namespace_text(op.namespace),
            "key": op.key,
            "messages": _dump([json.loads(dump_message(m)) for m in op.messages]),
            "created_at": time.time(),
            "owner": self.owner,
        }
        with self._db.transaction() as connection:
            inserted = connection.execute(insert(pending_table).values(**row)).inserted_primary_key
        assert inserted is not None  # an INSERT into a table with a primary key has one
        return int(inserted[0])

    def _pending(self, op: records.Pending) -> list[PendingTurn]:
        t = pending_table
        query = select(t).where(*self._at(t, namespace_text(op.namespace), op.key))
        query = query.order_by(t.c.id).limit(op.limit)
        with self._db.transaction() as connection:
            rows = connection.execute(query).all()
        return [
            PendingTurn(
                int(row.id),
                tuple(load_message(json.dumps(m)) for m in json.loads(row.messages)),
                float(row.created_at),
            )
            for row in rows
        ]

    def _count_pending(self, op: records.CountPending) -> int:
        t = pending_table
        with self._db.transaction() as connection:
            return count_rows(connection, t, *self._at(t, namespace_text(op.namespace), op.key))

    def _drop_pending(self, op: records.DropPending) -> None:
        with self._db.transaction() as connection:
            self._drop(connection, namespace_text(op.namespace), op.key, op.ids)

    def _delete(self, op: records.Delete) -> None:
        ns = namespace_text(op.namespace)
        with self._db.transaction() as connection:
            if op.only_if is not None and not op.only_if(connection):
                return
            for t in (store_table, changes_table, pending_table):
                connection.execute(delete(t).where(*self._at(t, ns, op.key)))

    def held(self, namespace: Namespace, /) -> dict[str, int]:
        """What the store holds under ``namespace`` exactly (every key), by kind."""
        ns = namespace_text(as_namespace(namespace))
        with self._db.transaction() as connection:
            return {
                kind: count_rows(connection, t, t.c.namespace == ns) for kind, t in HELD.items()
            }

    def erase_namespace(self, namespace: Namespace, /) -> None:
        """Delete every key of ``namespace`` exactly, every version and queued turn, for good.

        Unlike a memory's ``clear()`` (a change a rollback undoes), nothing stays; a
        namespace under it (``users.maya.work`` for ``users.maya``) is another's.
        """
        ns = namespace_text(as_namespace(namespace))
        with self._db.transaction(write=True) as connection:
            for table in (*HELD.values(), legacy_table):  # the note names the namespace too
                connection.execute(delete(table).where(table.c.namespace == ns))

    def _search(self, op: records.Search) -> list[ProfileItem]:
        t = store_table
        query = (
            select(t)
            .where(t.c.value.is_not(None), under(op.namespace_prefix), owned(t, self.owner))
            .order_by(t.c.namespace, t.c.key)
            .limit(op.limit)
            .offset(op.offset)
        )
        with self._db.transaction() as connection:
            return [_item(row) for row in connection.execute(query)]

    def _list_namespaces(self, op: records.ListNamespaces) -> list[Namespace]:
        t = store_table
        query = select(t.c.namespace).distinct().where(t.c.value.is_not(None), owned(t, self.owner))
        if op.prefix:
            query = query.where(under(op.prefix))
        with self._db.transaction() as connection:
            found = {tuple(ns.split(".")) for ns in connection.execute(query).scalars()}
        if op.max_depth is not None:
            found = {ns[: op.max_depth] for ns in found}
        return sorted(found)[op.offset : op.offset + op.limit]

    def _keyed(self, table: Any, namespace: Namespace, prefix: str) -> tuple[Any, ...]:
        """The conditions "this store's row of exactly this namespace, its key after ``prefix``"."""
        return (*keyed(table, namespace, prefix), owned(table, self.owner))

    def _at(self, table: Any, ns: str, key: str) -> tuple[Any, ...]:
        """The conditions "this store's row of ``key`` in the namespace ``ns``"."""
        return (table.c.namespace == ns, table.c.key == key, owned(table, self.owner))

    def _drop(self, connection: Connection, ns: str, key: str, ids: Sequence[int]) -> int:
        """Remove exactly these queued turns; how many were there."""
        # Exactly these ids, never "up to": on a server database a turn with a
        # smaller id can commit after a larger one and must not be dropped unseen.
        if not ids:
            return 0
        t = pending_table
        return connection.execute(
            delete(t).where(*self._at(t, ns, key), t.c.id.in_(list(ids)))
        ).rowcount


_HANDLERS: dict[type, Callable[[ProfileStore, Any], Any]] = {
    records.Load: ProfileStore._load,
    records.Commit: ProfileStore._commit,
    records.CommitMany: ProfileStore._commit_many,
    records.Keys: ProfileStore._keys,
    records.KeyChanges: ProfileStore._key_changes,
    records.KeyNamespaces: ProfileStore._key_namespaces,
    records.KeyPage: ProfileStore._key_page,
    records.RecordFailure: ProfileStore._record_failure,
    records.Changes: ProfileStore._changes,
    records.AddPending: ProfileStore._add_pending,
    records.Pending: ProfileStore._pending,
    records.CountPending: ProfileStore._count_pending,
    records.DropPending: ProfileStore._drop_pending,
    records.Delete: ProfileStore._delete,
    records.Search: ProfileStore._search,
    records.ListNamespaces: ProfileStore._list_namespaces,
}


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
