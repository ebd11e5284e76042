"""The SQL shape of the versioned documents: three tables, who owns each row, shared conditions.

Profiles, instructions, a collection's ledger and an entity graph share the
tables, each row naming its ``owner`` (the kind of store that wrote it): a store
reads, writes and deletes only its own rows, and refuses to create a key another
kind holds (:func:`refuse_others`). Rows an older version wrote without an owner
are claimed on opening by their key (:data:`CLAIMS`); any left are read by every
kind and taken by the first that writes them.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

from sqlalchemy import (
    JSON,
    Column,
    Connection,
    Float,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    and_,
    cast,
    func,
    insert,
    inspect,
    literal,
    literal_column,
    or_,
    select,
    text,
    type_coerce,
    update,
)

from memories.errors import InvalidInputError
from memories.kernel.namespaces import Namespace, namespace_text
from memories.stores.documents.records import KeyPage
from memories.stores.sql import EXTRA_DDL, UPGRADES, chunks, log_table, starts_with

__all__ = [
    "CLAIMS",
    "HELD",
    "OWNER",
    "changes_table",
    "claim_legacy",
    "keyed",
    "matching",
    "metadata",
    "owned",
    "pending_table",
    "refuse_others",
    "sqlite_page",
    "store_table",
    "under",
]

#: The owner of a bare profile store's rows (``ProfileStore(url)``, the LangGraph adapter).
OWNER = "profile"

#: The three tables' metadata (:class:`~memories.stores.sql.Database` makes them).
metadata = MetaData()

store_table = Table(
    "memories_store",
    metadata,
    Column("namespace", String(512), primary_key=True),
    Column("key", String(255), primary_key=True),
    Column("value", Text, nullable=True),
    Column("version", Integer, nullable=False),
    Column("created_at", Float, nullable=False),
    Column("updated_at", Float, nullable=False),
    Column("owner", String(32), nullable=True),
)


def _key_log(name: str, *columns: Column[Any]) -> Table:
    """A log_table per document (its namespace and key), each row with its owner."""
    keys = {"namespace": String(512), "key": String(255)}
    owner = Column("owner", String(32), nullable=True)
    return log_table(name, metadata, keys, *columns, owner, index=f"ix_{name}_key")


changes_table = _key_log(
    "memories_profile_changes",
    Column("version", Integer, nullable=True),
    Column("kind", String(16), nullable=False),
    Column("document", Text, nullable=True),
    Column("patch", Text, nullable=True),
    Column("turns", Text, nullable=True),
    Column("error", Text, nullable=True),
    Column("raw", Text, nullable=True),
)
pending_table = _key_log("memories_profile_pending", Column("messages", Text, nullable=False))


#: The documents held now, by namespace, key and owner: a count or a page of a
#: namespace's memories reads this index alone, never the documents (SQLite: 224 ms ->
#: 20 ms for a count at 100,000 memories). It replaces the index without the owner that
#: an older version made. PostgreSQL reads the table (an index built on opening would
#: lock writers out of a big table meanwhile).
metadata.info[EXTRA_DDL] = {
    "sqlite": [
        "CREATE INDEX IF NOT EXISTS ix_memories_store_owned "
        "ON memories_store (namespace, key, owner) WHERE value IS NOT NULL",
        "DROP INDEX IF EXISTS ix_memories_store_held",
    ]
}


#: The tables that hold a namespace's data, by what a row of each is.
HELD = {
    "current documents": store_table,
    "ledger versions": changes_table,
    "queued turns": pending_table,
}


def under(prefix: Namespace) -> Any:
    """The condition "the namespace is ``prefix`` or below it", by whole labels and their case."""
    if not prefix:
        return store_table.c.namespace.is_not(None)
    joined, namespace = namespace_text(prefix), store_table.c.namespace
    return or_(namespace == joined, starts_with(namespace, f"{joined}."))


def matching(op: KeyPage, *, sqlite: bool) -> Any:
    """The condition "the key after ``op.prefix``, or the document's ``op.field``, contains
    ``op.contains``", case-insensitively.

    The JSON alone would also match field names, other fields and JSON's escapes:
    it is searched first for the text as JSON writes it (cheap, true of every
    match), and only the documents found there have their field read out.
    """
    t = store_table
    written = json.dumps(op.contains, ensure_ascii=False)[1:-1]
    # SQLite's LIKE already ignores the case of ASCII letters; lower() per row costs.
    like = "contains" if sqlite else "icontains"
    # SQLite reads JSON from text as it is (a CAST would make it a number); PostgreSQL casts.
    field = (type_coerce if sqlite else cast)(t.c.value, JSON)[op.field].as_string()
    rest = func.substr(t.c.key, len(op.prefix) + 1)
    return or_(
        getattr(rest, like)(op.contains, autoescape=True),
        and_(
            getattr(t.c.value, like)(written, autoescape=True),
            getattr(field, like)(op.contains, autoescape=True),
        ),
    )


def sqlite_page(where: Sequence[Any], matching: Any, limit: int, offset: int) -> Any:
    """The page of documents meeting ``where`` and ``matching``, by key, each with the total."""
    t = store_table
    rowid: Any = literal_column("memories_store.rowid")
    matches = select(rowid.label("row"), t.c.key).where(*where, matching).cte("matches")
    chosen = select(matches.c.row).order_by(matches.c.key).limit(limit).offset(offset)
    total = select(func.count()).select_from(matches).scalar_subquery()
    return select(t, total.label("total")).where(rowid.in_(chosen)).order_by(t.c.key)


def keyed(table: Table, namespace: Namespace, prefix: str) -> tuple[Any, Any]:
    """The conditions "exactly this namespace, a key starting with ``prefix``"."""
    return (
        table.c.namespace == namespace_text(namespace),
        starts_with(table.c.key, prefix),
    )


#: Who owns a row an older version wrote without an owner, by its key: a collection's
#: memories and an entity graph's entities and relations by their prefixes, each kind's
#: document by its default key. Rows none of these names stay unowned.
CLAIMS: tuple[tuple[str, Any], ...] = (
    ("collection", lambda key: or_(key.startswith("memory:"), key == "collection")),
    (
        "entity_graph",
        lambda key: or_(
            key.startswith("entity:"), key.startswith("relation:"), key == "entity_graph"
        ),
    ),
    ("instructions", lambda key: key == "instructions"),
    ("profile", lambda key: key == "profile"),
)


def _own_rows(connection: Connection) -> None:
    """Give the tables an older version made their ``owner`` column and claim their rows."""
    for table in HELD.values():
        if "owner" in {c["name"] for c in inspect(connection).get_columns(table.name)}:
            continue
        connection.execute(text(f"ALTER TABLE {table.name} ADD COLUMN owner VARCHAR(32)"))
        for owner, claims in CLAIMS:
            connection.execute(
                update(table)
                .where(table.c.owner.is_(None), claims(table.c.key))
                .values(owner=owner)
            )


#: The namespaces whose collection rows an older version wrote, when it kept every
#: collection's memories under ``memory:<id>`` whatever its key: a collection with a key
#: of its own claims them (:func:`claim_legacy`). Made, and filled, when this version
#: first opens a database (its own metadata: ``create_all`` must not make it first).
legacy_table = Table(
    "memories_collection_legacy",
    MetaData(),
    Column("namespace", String(512), primary_key=True),
    Column("opened_at", Float, nullable=False),
)


def _note_legacy(connection: Connection) -> None:
    """Note the namespaces holding collection rows written before collections had keys."""
    if inspect(connection).has_table(legacy_table.name):
        return
    legacy_table.create(connection)
    t = store_table
    query = select(t.c.namespace).where(t.c.key.startswith("memory:"), owned(t, "collection"))
    found = [
        {"namespace": ns, "opened_at": time.time()}
        for (ns,) in connection.execute(query.distinct())
    ]
    if found:
        connection.execute(insert(legacy_table), found)


metadata.info[UPGRADES] = [_own_rows, _note_legacy]


def claim_legacy(connection: Connection, ns: str, prefix: str) -> list[str]:
    """Move ``ns``'s collection rows an older version wrote to ``prefix``; their ids.

    Only while no collection wrote there since this version opened the database and
    the claimer has no rows of its own yet.
    """
    note = connection.execute(select(legacy_table).where(legacy_table.c.namespace == ns)).first()
    if note is None:
        return []
    connection.execute(legacy_table.delete().where(legacy_table.c.namespace == ns))
    t = store_table
    mine = (t.c.namespace == ns, owned(t, "collection"))
    rows = connection.execute(
        select(t.c.key, t.c.updated_at).where(*mine, t.c.key.startswith("memory:"))
    ).all()
    if connection.execute(
        select(t.c.key).where(*mine, starts_with(t.c.key, prefix)).limit(1)
    ).first():
        return []
    if not rows or max(updated for _, updated in rows) > note.opened_at:
        return []
    for table in (store_table, changes_table):
        connection.execute(
            update(table)
            .where(
                table.c.namespace == ns,
                owned(table, "collection"),
                table.c.key.startswith("memory:"),
            )
            .values(
                key=literal(prefix, String).concat(func.substr(table.c.key, 8)), owner="collection"
            )
        )
    return [key.removeprefix("memory:") for key, _ in rows]


def owned(table: Table, owner: str) -> Any:
    """The condition "this row is ``owner``'s" (or unowned: written before owners were kept)."""
    return or_(table.c.owner == owner, table.c.owner.is_(None))


def refuse_others(connection: Connection, ns: str, keys: Sequence[str], owner: str) -> None:
    """Raise if another kind holds one of ``keys`` in ``ns``: ``owner`` may not create it.

    Raises:
        InvalidInputError: naming the key, its owner and what to do.
    """
    t = store_table
    for chunk in chunks(keys):
        taken = connection.execute(
            select(t.c.key, t.c.owner).where(
                t.c.namespace == ns,
                t.c.key.in_(list(chunk)),
                t.c.owner.is_not(None),
                t.c.owner != owner,
            )
        ).first()
        if taken is not None:
            raise InvalidInputError(
                f"The key {taken.key!r} in namespace {ns!r} holds a {taken.owner} memory's "
                f"data; a {owner} store cannot write it. Use another key."
            )
