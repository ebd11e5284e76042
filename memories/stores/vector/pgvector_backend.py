"""PostgreSQL with pgvector: documents, embeddings and the recall index in one database.

A write embeds first, outside any transaction, then commits the documents, their
vectors and their recall index rows in one transaction (no outbox: nothing is ever
pending). A search takes the nearest neighbours in SQL and ranks them as Chroma's
backend does (:class:`~memories.stores.vector.recall_backend.RecallBackend`). What it
keeps: docs/memories/vector.md; its indexes: docs/architecture.md, "pgvector".
"""

from __future__ import annotations

import functools
import json
import logging
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Annotated, Any

import sqlalchemy as sa
from pydantic import BeforeValidator
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, OperationalError, SQLAlchemyError
from sqlalchemy.types import UserDefinedType

from memories.errors import BackendError, BackendUnavailableError, ConfigError, InvalidInputError
from memories.kernel.background import describe_error
from memories.kernel.steps import Steps, blocking_twin, step, twins
from memories.stores.compaction import Compaction, compactions
from memories.stores.expiry import ExpiryLedger
from memories.stores.recall.types import ScoredId, best_first
from memories.stores.sql import Database, get_engine, redacted
from memories.stores.vector import recall_tables
from memories.stores.vector.embedded import document_vectors
from memories.stores.vector.filters import NAMESPACE_KEY, check_filter
from memories.stores.vector.outbox import OutboxRow, numbered, unnumbered
from memories.stores.vector.recall_backend import RecallBackend
from memories.stores.vector.recall_index import (
    SESSION_KEY,
    IndexedDocument,
    RecallIndex,
)
from memories.stores.vector.records import SearchResult
from memories.stores.vector.writes import progress_bar

__all__ = ["TARGET", "PgVectorBackend", "PostgresURLField", "check_postgres_url"]

logger = logging.getLogger(__name__)

#: The recall index's name for the documents of this backend (one per database).
TARGET = "pgvector"
#: Documents embedded and written per transaction by a bulk add.
_BATCH = 256
#: pgvector's widest vector an HNSW index takes; wider ones are searched exactly.
_HNSW_MAX_DIMS = 2_000
#: pgvector's largest ``hnsw.ef_search``.
_EF_SEARCH_MAX = 1_000
#: The first pgvector version with iterative index scans (``hnsw.iterative_scan``).
_ITERATIVE_SCAN = (0, 8, 0)
#: The drivers this backend is written for (list parameters as arrays, ``%(name)s``).
_DRIVERS = ("psycopg",)

_DOCUMENTS = "memories_pgvector_documents"
#: An ``add`` of this many documents or more refreshes the planner's statistics after.
_ANALYZE_FROM = 1_000
_NAMESPACES = "memories_pgvector_namespaces"


class _Vector(UserDefinedType[Any]):
    """pgvector's ``vector`` of any width (values go in and out as text, ``[1,2,3]``)."""

    cache_ok = True

    def get_col_spec(self, **kw: Any) -> str:
        return "vector"


_metadata = sa.MetaData()
sa.Table(
    _DOCUMENTS,
    _metadata,
    sa.Column("namespace", sa.Text, primary_key=True),
    sa.Column("doc_id", sa.String(64), primary_key=True),
    sa.Column("text", sa.Text, nullable=False),
    sa.Column("metadata", JSONB, nullable=False),
    sa.Column("dims", sa.Integer, nullable=False),
    sa.Column("embedding", _Vector(), nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
)
sa.Table(
    _NAMESPACES,
    _metadata,
    sa.Column("namespace", sa.Text, primary_key=True),
    sa.Column("dims", sa.Integer, nullable=False),
)


# -- configuration ------------------------------------------------------------------


def check_postgres_url(value: Any, /) -> Any:
    """``value`` if it is None or a PostgreSQL URL with the psycopg driver, else a ConfigError."""
    if value is None:
        return None
    hint = (
        "vectors must be a PostgreSQL SQLAlchemy URL with the pgvector extension, such as "
        "'postgresql+psycopg://user:password@host:5432/db'; leave it unset to keep documents "
        "in Chroma"
    )
    if not isinstance(value, str):
        raise ConfigError(f"{hint}; got {type(value).__name__}.")
    try:
        url = make_url(value)
    except ArgumentError as exc:
        raise ConfigError(f"{hint}; got {redacted(value)!r} ({exc}).") from exc
    if url.get_backend_name() != "postgresql":
        raise ConfigError(f"{hint}; got {redacted(value)!r}.")
    if url.get_driver_name() not in _DRIVERS:
        raise ConfigError(
            f"{hint}; got {redacted(value)!r}, whose driver {url.get_driver_name()!r} this "
            "backend does not use: write postgresql+psycopg:// (pip install 'psycopg[binary]')."
        )
    return value


#: A model field holding a pgvector database URL (or None), checked as :func:`check_postgres_url`.
PostgresURLField = Annotated[str | None, BeforeValidator(check_postgres_url)]


# -- one database -----------------------------------------------------------------


@dataclass
class _Store:
    """One database of this process: its tables, recall index and what it knows of pgvector."""

    url: str
    documents: Database
    recall: RecallIndex
    iterative_scan: bool
    indexed_widths: set[int] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def where(self) -> str:
        """The database, for messages (its password hidden)."""
        return redacted(self.url)

    @contextmanager
    def transaction(self, action: str) -> Iterator[sa.Connection]:
        """One transaction on the documents' database; errors name it and the action."""
        try:
            with self.documents.transaction() as connection:
                yield connection
        except BackendUnavailableError:
            raise
        except BackendError as exc:
            raise type(exc)(f"Cannot {action} in PostgreSQL {self.where!r}: {exc}") from exc

    def analyze(self) -> None:
        """Refresh the planner's statistics of the documents and the recall index (ANALYZE).

        Else the planner sorts a bulk-added namespace exactly instead of using HNSW until
        autovacuum's next pass (76 ms p50 searches instead of 14 after adding 10,000 turns).
        A failure is logged: the documents are stored.
        """
        tables = ", ".join([_DOCUMENTS, *(t.name for t in recall_tables.metadata.sorted_tables)])
        try:
            with self.transaction("refresh the planner's statistics") as connection:
                connection.exec_driver_sql(f"ANALYZE {tables}")
        except BackendError as exc:
            logger.warning("Could not refresh the statistics of %s: %s", self.where, exc)

    def index_width(self, dims: int) -> None:
        """Make the HNSW index of embeddings ``dims`` wide, once per process (if pgvector can)."""
        if dims in self.indexed_widths:
            return
        with self.lock:
            if dims in self.indexed_widths:
                return
            name = f"{_DOCUMENTS}_hnsw_{dims}"
            if dims <= _HNSW_MAX_DIMS:
                try:
                    with self.transaction("make the HNSW index") as connection:
                        exists = connection.exec_driver_sql(
                            "SELECT to_regclass(%(name)s)", {"name": name}
                        ).scalar()
                        if exists is None:
                            connection.exec_driver_sql(
                                f"CREATE INDEX IF NOT EXISTS {name} ON {_DOCUMENTS} USING hnsw "
                                f"((CAST(embedding AS vector({dims}))) vector_cosine_ops) "
                                f"WHERE dims = {dims}"
                            )
                except BackendUnavailableError:
                    raise
                except BackendError as exc:  # two processes at once: the other one made it
                    logger.warning(
                        "Could not make the index %s (%s); searches are exact.", name, exc
                    )
            else:
                logger.warning(
                    "Embeddings %d wide are over pgvector's HNSW limit (%d): the searches of "
                    "their namespaces in %s are exact (slower on large namespaces).",
                    dims, _HNSW_MAX_DIMS, self.where,
                )  # fmt: skip
            self.indexed_widths.add(dims)


_stores: dict[str, _Store] = {}
_stores_lock = threading.Lock()


def _store_for(url: str) -> _Store:
    """The process's handle on a database: the extension and tables made on first use."""
    with _stores_lock:
        found = _stores.get(url)
    if found is not None:
        return found
    documents = Database(url, _metadata)  # raises now for a server that cannot be reached
    version = _ensure_extension(documents, url)
    documents.engine  # noqa: B018  (the tables, now that the vector type exists)
    recall = RecallIndex(Database(url, recall_tables.metadata))
    recall.database.engine  # noqa: B018
    made = _Store(url, documents, recall, iterative_scan=version >= _ITERATIVE_SCAN)
    with _stores_lock:
        return _stores.setdefault(url, made)


def _ensure_extension(database: Database, url: str) -> tuple[int, ...]:
    """``CREATE EXTENSION IF NOT EXISTS vector``; return the installed pgvector version.

    Raises:
        BackendUnavailableError: the server cannot be reached.
        BackendError: pgvector is not installed on the server, or may not be created.
    """
    try:
        # The engine alone: the tables wait for the extension (their vector column needs it).
        with get_engine(database.url).begin() as connection:
            connection.exec_driver_sql("CREATE EXTENSION IF NOT EXISTS vector")
            version = connection.exec_driver_sql(
                "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
            ).scalar()
    except OperationalError as exc:
        raise BackendUnavailableError(
            f"Cannot reach the PostgreSQL database {redacted(url)!r}: {exc}"
        ) from exc
    except SQLAlchemyError as exc:
        cause = exc.orig if isinstance(exc, DBAPIError) else exc
        raise BackendError(
            f"The PostgreSQL database {redacted(url)!r} has no pgvector extension and this user "
            f"could not create it ({describe_error(cause)}). Install pgvector on the "
            "server (e.g. apt install postgresql-16-pgvector, or see "
            "https://github.com/pgvector/pgvector#installation), then run "
            "CREATE EXTENSION vector; in that database as a user allowed to."
        ) from exc
    return tuple(int(part) for part in str(version).split(".")[:3] if part.isdigit())


# -- metadata filters as JSONB conditions ----------------------------------------------


class _Params:
    """Numbered query parameters, for SQL built from a filter."""

    def __init__(self, **given: Any) -> None:
        self.values: dict[str, Any] = dict(given)

    def __call__(self, value: Any) -> str:
        name = f"p{len(self.values)}"
        self.values[name] = value
        return f"%({name})s"


_ORDERED = {"$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}


def _where_sql(where: Mapping[str, Any], params: _Params) -> str:
    """A checked Chroma ``where`` clause as a condition on the ``metadata`` column.

    Chroma's meaning throughout: ``$eq``/``$in`` match a value of the same kind
    (1 and 1.0 alike, never True), not an element of a list; ``$gt`` and the
    others compare numbers only; ``$contains`` is membership in a list;
    ``$ne``, ``$nin`` and ``$not_contains`` also match documents without the key.
    """
    parts = []
    for key, value in where.items():
        if key in ("$and", "$or"):
            parts.append(f" {key[1:].upper()} ".join(f"({_where_sql(c, params)})" for c in value))
            continue
        op, operand = next(iter(value.items())) if isinstance(value, Mapping) else ("$eq", value)
        parts.append(_comparison(key, op, operand, params))
    return " AND ".join(f"({part})" for part in parts)


def _comparison(key: str, op: str, operand: Any, params: _Params) -> str:
    field = f"(metadata -> {params(key)})"
    if op in ("$eq", "$ne"):
        condition = f"{field} = CAST({params(json.dumps(operand))} AS jsonb)"
        return condition if op == "$eq" else f"({condition}) IS NOT TRUE"
    if op in ("$in", "$nin"):
        if not isinstance(operand, list) or not operand:
            raise InvalidInputError(
                f"filter[{key!r}][{op!r}] must be a non-empty list of values; got {operand!r:.80}."
            )
        values = ", ".join(f"CAST({params(json.dumps(v))} AS jsonb)" for v in operand)
        condition = f"{field} IN ({values})"
        return condition if op == "$in" else f"({condition}) IS NOT TRUE"
    if op in _ORDERED:
        if isinstance(operand, bool) or not isinstance(operand, int | float):
            raise InvalidInputError(
                f"filter[{key!r}][{op!r}] compares numbers; got {operand!r:.80}."
            )
        return (
            f"jsonb_typeof{field} = 'number' AND "
            f"{field} {_ORDERED[op]} CAST({params(json.dumps(operand))} AS jsonb)"
        )
    # $contains / $not_contains: membership in a list value.
    condition = f"{field} @> jsonb_build_array(CAST({params(json.dumps(operand))} AS jsonb))"
    condition = f"jsonb_typeof{field} = 'array' AND {condition}"
    return condition if op == "$contains" else f"({condition}) IS NOT TRUE"


def _literal(vector: Sequence[float]) -> str:
    """A vector as pgvector reads it: ``[0.1,0.2]``."""
    return "[" + ",".join(repr(float(x)) for x in vector) + "]"


@functools.cache
def _nearest_sql(dims: int, filtered: str) -> str:
    """The ``n`` nearest documents of a namespace of embeddings ``dims`` wide (and ``filtered``)."""
    distance = f"CAST(embedding AS vector({dims})) <=> CAST(%(q)s AS vector({dims}))"
    return (
        f"SELECT doc_id, 1 - ({distance}) FROM {_DOCUMENTS} "
        f"WHERE namespace = %(ns)s AND dims = {dims}{filtered} "
        f"ORDER BY {distance} LIMIT %(n)s"
    )


_COLUMNS = "doc_id, text, metadata"


# -- the backend --------------------------------------------------------------------


@dataclass(eq=False)
class PgVectorBackend(RecallBackend):
    """One namespace of a PostgreSQL database with pgvector, searched by hybrid recall.

    Args:
        url: the database, a ``postgresql+psycopg://`` SQLAlchemy URL.
        namespace, session_id, embedder, recall, k: as :class:`RecallBackend` says.
    """

    url: str

    def __post_init__(self) -> None:
        check_postgres_url(self.url)
        self.location = f"PostgreSQL (pgvector) database {redacted(self.url)!r}"

    @cached_property
    def _store(self) -> _Store:
        return _store_for(self.url)

    _target = TARGET

    @property
    def _index(self) -> RecallIndex:
        return self._store.recall

    # -- writing ----------------------------------------------------------------------

    def _save_steps(self, row: OutboxRow) -> Steps[None]:
        """Embed the turn, then store it numbered in its session and indexed, in one transaction."""
        yield from self._saving([unnumbered(row)])

    save, asave = twins(_save_steps)

    def _add_steps(self, rows: Sequence[OutboxRow], *, progress: bool) -> Steps[None]:
        """Store many documents, a transaction per batch of 256 (each batch all or nothing)."""
        with progress_bar(len(rows) if progress else None) as advance:
            for start in range(0, len(rows), _BATCH):
                batch = rows[start : start + _BATCH]
                yield from self._saving(batch)
                advance(len(batch))
            if len(rows) >= _ANALYZE_FROM:
                yield step(self._store.analyze)

    add, aadd = twins(_add_steps)

    def _saving(self, rows: Sequence[OutboxRow]) -> Steps[None]:
        if not rows:
            return
        vectors = yield from document_vectors(self.embedder, [(r.text, r.metadata) for r in rows])
        yield step(self._write, rows, vectors)

    def _write(self, rows: Sequence[OutboxRow], vectors: Sequence[Sequence[float]]) -> None:
        """The documents, their numbers and their index rows, in one transaction."""
        dims = len(vectors[0])  # one width (document_vectors checked)
        store, space = self._store, self._space
        store.index_width(dims)
        with store.transaction("store documents") as connection:
            self._check_width(connection, dims, writing=True)
            rows = numbered(connection, store.recall, TARGET, self._key, rows)
            written = {
                doc_id
                for flag, chosen, embeddings in self._by_replace(rows, vectors)
                for doc_id in self._insert(connection, chosen, embeddings, dims, replace=flag)
            }
            documents = [
                IndexedDocument(r.doc_id, r.text, r.metadata) for r in rows if r.doc_id in written
            ]
            store.recall.add(connection, TARGET, space.namespace, documents)

    def _check_width(self, connection: sa.Connection, dims: int, *, writing: bool) -> None:
        """Refuse embeddings of another width than the namespace's (its first write sets it)."""
        if writing:
            statement = (
                f"INSERT INTO {_NAMESPACES} (namespace, dims) VALUES (%(ns)s, %(d)s) ON CONFLICT "
                f"(namespace) DO UPDATE SET dims = {_NAMESPACES}.dims RETURNING dims"
            )
        else:
            statement = f"SELECT dims FROM {_NAMESPACES} WHERE namespace = %(ns)s"
        found = connection.exec_driver_sql(statement, {"ns": self._key, "d": dims}).scalar()
        if found is not None and found != dims:
            instead = (
                "Use the embedder the namespace was written with, another namespace, or "
                "erase_namespace() to start it anew; nothing was stored."
                if writing
                else "Search with the embedder the namespace was written with."
            )
            raise BackendError(
                f"Namespace {self.namespace!r} in {self.location} holds embeddings {found} wide; "
                f"this embedder gives {dims}. {instead}"
            )

    def _insert(
        self,
        connection: sa.Connection,
        rows: Sequence[OutboxRow],
        vectors: Sequence[Sequence[float]],
        dims: int,
        *,
        replace: bool,
    ) -> list[str]:
        """Insert rows in one statement; return the ids written (existing ones kept or replaced)."""
        conflict = (
            "DO UPDATE SET text = EXCLUDED.text, metadata = EXCLUDED.metadata, "
            "dims = EXCLUDED.dims, embedding = EXCLUDED.embedding, created_at = EXCLUDED.created_at"
            if replace
            else "DO NOTHING"
        )
        statement = (
            f"INSERT INTO {_DOCUMENTS} (namespace, doc_id, text, metadata, dims, embedding, "
            "created_at) SELECT %(ns)s, u.d, u.t, CAST(u.m AS jsonb), %(dims)s, "
            "CAST(u.e AS vector), %(now)s "
            "FROM unnest(CAST(%(ids)s AS text[]), CAST(%(texts)s AS text[]), "
            "CAST(%(metas)s AS text[]), CAST(%(vectors)s AS text[])) AS u(d, t, m, e) "
            f"ON CONFLICT (namespace, doc_id) {conflict} RETURNING doc_id"
        )
        params = {
            "ns": self._key,
            "dims": dims,
            "now": time.time(),
            "ids": [row.doc_id for row in rows],
            "texts": [row.text for row in rows],
            "metas": [json.dumps(row.metadata, ensure_ascii=False) for row in rows],
            "vectors": [_literal(v) for v in vectors],
        }
        return list(connection.exec_driver_sql(statement, params).scalars())

    # -- deleting ---------------------------------------------------------------------

    def delete(self, ids: Sequence[str] | None, where: Mapping[str, Any] | None) -> None:
        """Delete by id and/or filter (AND), the documents and their index rows together."""
        if ids is not None and not ids:
            return
        if where is not None:
            check_filter(where)
        self._delete(ids=ids, where=where)

    def forget_session(self) -> None:
        """Delete the documents of this memory's session."""
        self._delete(where={SESSION_KEY: self.session_id})

    def delete_expired(
        self, namespace: tuple[str, ...], ids: Sequence[str], expiry: ExpiryLedger, *, now: float
    ) -> list[str]:
        """:meth:`VectorBackend.delete_expired`, the documents in the expiry rows' transaction
        when they share the database (one transaction: the rows go with their documents)."""
        shared = self._store.documents if expiry.url == self.url else None
        with expiry.sweeping(namespace, ids, expired_at=now, database=shared) as held:
            if held:
                self._delete(ids=held, discard=False)
        return held

    def erase_namespace(self) -> None:
        """Delete the namespace's documents, index and expiry rows (its width is free again)."""
        store = self._store
        here = self._expiry_here()
        discarding = None if here is None else here.discarding(self.namespace)
        with store.transaction("erase a namespace") as connection:
            for table in (_DOCUMENTS, _NAMESPACES):
                connection.exec_driver_sql(
                    f"DELETE FROM {table} WHERE namespace = %(ns)s", {"ns": self._key}
                )
            store.recall.clear(connection, TARGET, self._key)
            if discarding is not None:
                discarding(connection, None)
        if here is None:
            self._discard_expiry(self.namespace, None)

    def compactions(self) -> tuple[Compaction, ...]:
        """The documents' and the recall index's tables, and the expiry rows'."""
        store = self._store
        expiry = None if self.expiry is None else self.expiry.database
        return compactions(store.documents, store.recall.database, expiry)

    def held(self, *, session: bool) -> dict[str, int]:
        """The namespace's (or the session's) documents and their recall index rows."""
        mine = self.session_id if session else None
        where = None if mine is None else {SESSION_KEY: mine}
        [(found,)] = self._read("count(*)", "count documents", where=where)
        index = self._store.recall.held(TARGET, self._key, session=mine)
        return {"pgvector documents": int(found), "recall index rows": index}

    def _matching(
        self, *, ids: Sequence[str] | None = None, where: Mapping[str, Any] | None = None
    ) -> tuple[str, _Params]:
        """The condition on ``ids`` and ``where`` after ``namespace = %(ns)s``, with its values."""
        params = _Params(ns=self._key)
        condition = "" if ids is None else f" AND doc_id = ANY({params(list(ids))})"
        if where is not None:
            condition += f" AND ({_where_sql(where, params)})"
        return condition, params

    def _read(
        self,
        columns: str,
        action: str,
        *,
        ids: Sequence[str] | None = None,
        where: Mapping[str, Any] | None = None,
        order: str = "",
        **values: Any,
    ) -> Sequence[Any]:
        """``columns`` of the namespace's documents matching ``ids`` and ``where`` (AND), in
        ``order``; ``values`` are more parameters of ``columns``."""
        condition, params = self._matching(ids=ids, where=where)
        with self._store.transaction(action) as connection:
            return connection.exec_driver_sql(
                f"SELECT {columns} FROM {_DOCUMENTS} WHERE namespace = %(ns)s{condition}{order}",
                params.values | values,
            ).all()

    def _delete(
        self,
        *,
        ids: Sequence[str] | None = None,
        where: Mapping[str, Any] | None = None,
        discard: bool = True,
    ) -> None:
        """Delete the namespace's documents matching ``ids`` and ``where``, their index rows and
        (with ``discard``) their expiry rows: in one transaction when those are in this database."""
        condition, params = self._matching(ids=ids, where=where)
        store = self._store
        here = self._expiry_here() if discard else None
        discarding = None if here is None else here.discarding(self.namespace)
        with store.transaction("delete documents") as connection:
            gone = list(
                connection.exec_driver_sql(
                    f"DELETE FROM {_DOCUMENTS} WHERE namespace = %(ns)s{condition} "
                    "RETURNING doc_id",
                    params.values,
                ).scalars()
            )
            store.recall.remove(connection, TARGET, self._key, gone)
            if discarding is not None and gone:
                discarding(connection, gone)
        if discard and discarding is None:
            self._discard_expiry(self.namespace, gone)

    def _expiry_here(self) -> ExpiryLedger | None:
        """The expiry rows when they are in this database (a deletion's transaction takes them)."""
        return self.expiry if self.expiry is not None and self.expiry.url == self.url else None

    # -- reading ----------------------------------------------------------------------

    def find(self, where: Mapping[str, Any]) -> list[SearchResult]:
        """The documents whose metadata matches ``where``, oldest first."""
        check_filter(where)
        return self._select(where)

    def documents(self) -> list[SearchResult]:
        """Every document of the namespace, oldest first."""
        return self._select(None)

    def namespaces(self) -> dict[str, int | None]:
        """The database's namespaces that hold documents, with their counts (the recall index's)."""
        found = self._store.recall.namespaces(TARGET)
        return {namespace: n for namespace, n in sorted(found.items()) if n}

    def count(self) -> int:
        """How many documents the namespace holds."""
        [(found,)] = self._read("count(*)", "count documents")
        return int(found)

    def vectors(self, ids: Sequence[str]) -> dict[str, list[float]]:
        """The stored embeddings of these documents."""
        if not ids:
            return {}
        found = self._read("doc_id, CAST(embedding AS text)", "read embeddings", ids=ids)
        return {doc_id: json.loads(text) for doc_id, text in found}

    def check_filter(self, where: Mapping[str, Any]) -> None:
        """Chroma's ``where`` syntax (evaluated on the JSONB metadata); never the namespace key."""
        check_filter(where)
        _where_sql(where, _Params())

    def _select(self, where: Mapping[str, Any] | None) -> list[SearchResult]:
        order = " ORDER BY created_at, doc_id"
        found = self._read(_COLUMNS, "read documents", where=where, order=order)
        return [self._result(doc_id, text, metadata) for doc_id, text, metadata in found]

    def _result(self, doc_id: str, text: str, metadata: dict[str, Any]) -> SearchResult:
        return SearchResult(text, {**metadata, NAMESPACE_KEY: self._key}, 0.0, doc_id)

    def _results(
        self, ranked: Sequence[ScoredId], *, embeddings_for: set[str]
    ) -> tuple[list[SearchResult], dict[str, list[float]]]:
        ids = [s.id for s in ranked]
        if not ids:
            return [], {}
        columns = _COLUMNS
        if embeddings_for:
            columns += ", CASE WHEN doc_id = ANY(%(e)s) THEN CAST(embedding AS text) END"
        found = self._read(columns, "read documents", ids=ids, e=sorted(embeddings_for))
        read = {row[0]: self._result(row[0], row[1], row[2]) for row in found}
        vectors = {row[0]: json.loads(row[3]) for row in found if len(row) > 3 and row[3]}
        # deleted meanwhile: left out
        return [replace(read[s.id], score=s.score) for s in ranked if s.id in read], vectors

    # -- search -----------------------------------------------------------------------

    def _nearest(
        self, vector: Sequence[float], n: int, where: Mapping[str, Any] | None
    ) -> list[ScoredId]:
        store = self._store
        params = _Params(ns=self._key, q=_literal(vector), n=n)
        filtered = "" if where is None else f" AND ({_where_sql(where, params)})"
        settings = "SELECT set_config('hnsw.ef_search', %(ef)s, true)"
        if store.iterative_scan:
            settings += ", set_config('hnsw.iterative_scan', 'relaxed_order', true)"
        with store.transaction("search") as connection:
            connection.exec_driver_sql(settings, {"ef": str(min(max(n, 40), _EF_SEARCH_MAX))})
            self._check_width(connection, len(vector), writing=False)
            found = connection.exec_driver_sql(
                _nearest_sql(len(vector), filtered), params.values
            ).all()
        # A relaxed iterative scan may give neighbours slightly out of order.
        return best_first({doc_id: float(score) for doc_id, score in found})

    def _passing(self, ids: list[str], where: Mapping[str, Any]) -> list[str]:
        found = self._read("doc_id", "filter documents", ids=ids, where=where)
        return [doc_id for (doc_id,) in found]

    _awrite = blocking_twin(_write)
