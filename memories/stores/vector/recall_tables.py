"""The recall index's SQL shape: its five tables, their statements, and packed postings.

Also a block's packing and the numpy sums that score a term's postings; the layout is
described in docs/architecture.md, "The recall index".
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from memories.errors import BackendError
from memories.stores.recall.lexical import at_least_nth
from memories.stores.sql import EXTRA_DDL, Prepared

#: Terms and speaker keys are cut to this many characters (their columns' width).
_LONGEST = 200
#: PostgreSQL deletes up to this many fresh postings one by one (on the primary key).
_ONE_BY_ONE = 64

metadata = sa.MetaData()

_spaces = sa.Table(
    "memories_recall_spaces",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("target", sa.String(1024), nullable=False),
    sa.Column("namespace", sa.Text, nullable=False),
    sa.Column("analysis", sa.String(64), nullable=False),
    sa.Column("documents", sa.Integer, nullable=False),
    sa.Column("total_length", sa.BigInteger, nullable=False),
    sa.Column("built_at", sa.Float, nullable=False),
    sa.UniqueConstraint("target", "namespace", "analysis", name="uq_memories_recall_spaces"),
    sqlite_autoincrement=True,
)
_documents = sa.Table(
    "memories_recall_documents",
    metadata,
    sa.Column("key", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("space", sa.Integer, nullable=False),
    sa.Column("doc_id", sa.String(64), nullable=False),
    sa.Column("session", sa.Text, nullable=True),
    sa.Column("turn", sa.Integer, nullable=True),
    sa.Column("length", sa.Integer, nullable=False),
    sa.Column("terms", sa.Text, nullable=False),
    sa.Column("speakers", sa.Text, nullable=True),
    sa.UniqueConstraint("space", "doc_id", name="uq_memories_recall_documents"),
    sa.Index("ix_memories_recall_documents_turn", "space", "session", "turn"),
    sqlite_autoincrement=True,
)
_postings = sa.Table(
    "memories_recall_postings",
    metadata,
    sa.Column("space", sa.Integer, primary_key=True),
    sa.Column("term", sa.String(256), primary_key=True),
    sa.Column("key", sa.Integer, primary_key=True),
    sa.Column("tf", sa.Integer, nullable=False),
    sa.Column("length", sa.Integer, nullable=False),  # its document's, for BM25's b
    sqlite_with_rowid=False,
)
#: Packed postings: a term's ``(key, tf, length)`` columns, ``count`` of each, in one value.
_blocks = sa.Table(
    "memories_recall_blocks",
    metadata,
    sa.Column("space", sa.Integer, primary_key=True),
    sa.Column("term", sa.String(256), primary_key=True),
    # The smallest key it was begun with: its name among its term's blocks.
    sa.Column("block", sa.Integer, primary_key=True),
    sa.Column("count", sa.Integer, nullable=False),
    sa.Column("low", sa.Integer, nullable=False),  # its smallest key
    sa.Column("high", sa.Integer, nullable=False),  # its largest key
    sa.Column("data", sa.LargeBinary, nullable=False),
)
_speakers = sa.Table(
    "memories_recall_speakers",
    metadata,
    sa.Column("space", sa.Integer, primary_key=True),
    sa.Column("speaker", sa.String(256), primary_key=True),
    sa.Column("turns", sa.Integer, nullable=False),
)
#: PostgreSQL keeps a block's value out of line uncompressed: pglz would cost every
#: search and every rewrite its CPU for a few KB saved. Altered once (the ALTER locks
#: the table, so a process opening the database later does not run it again).
metadata.info[EXTRA_DDL] = {
    "postgresql": [
        "DO $$ BEGIN IF EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = "
        "'memories_recall_blocks'::regclass AND attname = 'data' AND attstorage <> 'e') "
        "THEN ALTER TABLE memories_recall_blocks ALTER COLUMN data SET STORAGE EXTERNAL; "
        "END IF; END $$"
    ]
}

_PLACE = (_documents.c.doc_id, _documents.c.session, _documents.c.turn, _documents.c.speakers)
# Statements of every search, written once (a search runs each of them).
_STATS = Prepared(
    sa.select(_spaces.c.documents, _spaces.c.total_length).where(
        _spaces.c.id == sa.bindparam("space")
    )
)
#: A transaction-long PostgreSQL lock on one space's key, for its first build.
_BUILDING = Prepared(
    sa.select(sa.func.pg_advisory_xact_lock(sa.bindparam("key", type_=sa.BigInteger)))
)


def _lock_key(*parts: str) -> int:
    """A signed 64-bit number naming ``parts`` (PostgreSQL's advisory lock keys)."""
    digest = hashlib.sha256("\x1f".join(parts).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


#: Queries are cut to this many distinct terms; statements exist for each size.
_TERM_SIZES = (4, 16, 64)


def _size(connection: sa.Connection, sizes: Sequence[int], count: int) -> int:
    """The statement size for ``count`` values: the first of ``sizes`` holding them; 0
    (one array) on PostgreSQL, where a long ``IN`` list costs more to plan than to run."""
    return 0 if connection.dialect.name == "postgresql" else next(n for n in sizes if n >= count)


def _among(column: sa.ColumnElement[Any], size: int, name: str) -> sa.ColumnElement[bool]:
    """``column`` among the parameters ``name0``... of a size; size 0: the array ``name``."""
    if not size:
        return column == sa.any_(sa.bindparam(name, type_=postgresql.ARRAY(column.type)))
    return column.in_([sa.bindparam(f"{name}{i}") for i in range(size)])


def _values(values: Sequence[Any], size: int, name: str) -> dict[str, Any]:
    """:func:`_among`'s parameters: ``values`` (at most ``size``) padded with the last."""
    if not size:
        return {name: list(values)}
    return {f"{name}{i}": values[min(i, len(values) - 1)] for i in range(size)}


@functools.cache
def _postings_of(size: int) -> Prepared:
    """Every posting of ``size`` terms (:func:`_among`'s ``t``) in a space, both tiers.

    Rows ``(term, data, key, tf, length)``: a block has ``data``, a fresh posting a key.
    One statement, so one snapshot: a compaction committing meanwhile is seen whole or
    not at all. On PostgreSQL the generic plan of a prepared 64-term ``IN`` list
    scanned every block (200 ms at 100,000 turns, against 4 ms as an array).
    """
    space: Any = sa.bindparam("space")
    none = sa.cast(sa.null(), sa.Integer)
    packed = sa.select(_blocks.c.term, _blocks.c.data, none, none, none).where(
        _blocks.c.space == space, _among(_blocks.c.term, size, "t")
    )
    fresh = sa.select(
        _postings.c.term,
        sa.cast(sa.null(), sa.LargeBinary),
        _postings.c.key,
        _postings.c.tf,
        _postings.c.length,
    ).where(_postings.c.space == space, _among(_postings.c.term, size, "t"))
    return Prepared(sa.union_all(packed, fresh))


#: How many fresh postings a space holds, counted up to ``cap`` + 1.
_FRESH = Prepared(
    sa.select(sa.func.count()).select_from(
        sa.select(sa.literal(1))
        .where(_postings.c.space == sa.bindparam("space"))
        .limit(sa.bindparam("cap", type_=sa.Integer))
        .subquery()
    )
)
_FRESH_ROWS = Prepared(
    sa.select(_postings.c.term, _postings.c.key, _postings.c.tf, _postings.c.length).where(
        _postings.c.space == sa.bindparam("space")
    )
)
_BLOCKS = sa.select(_blocks.c.term, _blocks.c.block, _blocks.c.data).where(
    _blocks.c.space == sa.bindparam("space")
)
#: The blocks of some terms with room (``count`` under ``size``), read by ``_select_in``.
_OPEN_BLOCKS = _BLOCKS.where(_blocks.c.count < sa.bindparam("size", type_=sa.Integer))
_DROP_FRESH = sa.delete(_postings).where(_postings.c.space == sa.bindparam("s"))
#: PostgreSQL: the fresh postings of some documents of a space (their keys, one array).
_DROP_KEYS_PG = Prepared(
    _DROP_FRESH.where(
        _postings.c.key == sa.any_(sa.bindparam("keys", type_=postgresql.ARRAY(sa.Integer)))
    )
)
#: The blocks of some terms that may hold keys between ``lo`` and ``hi``, by ``_select_in``.
_BLOCKS_AROUND = _BLOCKS.where(
    _blocks.c.low <= sa.bindparam("hi", type_=sa.Integer),
    _blocks.c.high >= sa.bindparam("lo", type_=sa.Integer),
)
_BLOCK_KEY = (
    _blocks.c.space == sa.bindparam("s"),
    _blocks.c.term == sa.bindparam("t"),
    _blocks.c.block == sa.bindparam("b"),
)
_REWRITE = sa.update(_blocks).where(*_BLOCK_KEY).values(
    count=sa.bindparam("n"), low=sa.bindparam("lo"), high=sa.bindparam("hi"),
    data=sa.bindparam("d"),
)  # fmt: skip
_DROP_BLOCK = sa.delete(_blocks).where(*_BLOCK_KEY)
_DROP_POSTING = _DROP_FRESH.where(
    _postings.c.term == sa.bindparam("t"), _postings.c.key == sa.bindparam("k")
)
#: A packed posting's columns: key, tf, its document's length (little-endian int32).
_PACKED = np.dtype("<i4")
_LARGEST_PACKED = int(np.iinfo(_PACKED).max)


def _pack(keys: np.ndarray, tfs: np.ndarray, lengths: np.ndarray) -> bytes:
    """A block's value: its keys (ascending), then their tfs, then their lengths.

    Raises:
        BackendError: a value past int32 (a key after 2**31 - 1 documents ever
            indexed), which the cast would wrap silently; the write is rolled back.
    """
    largest = int(max(keys.max(initial=0), tfs.max(initial=0), lengths.max(initial=0)))
    if largest > _LARGEST_PACKED:
        raise BackendError(
            f"The recall index cannot pack the value {largest}: packed postings hold 32-bit "
            "numbers. Nothing was written; index this namespace in a new outbox database."
        )
    order = np.argsort(keys, kind="stable")
    return np.concatenate([keys[order], tfs[order], lengths[order]]).astype(_PACKED).tobytes()


def _unpack(data: bytes) -> np.ndarray:
    """A block's ``(3, count)`` array: keys, tfs, lengths."""
    return np.frombuffer(data, dtype=_PACKED).reshape(3, -1)


_IDS_OF_KEYS = sa.select(_documents.c.key, _documents.c.doc_id)
_PLACES_OF_IDS = sa.select(*_PLACE).where(_documents.c.space == sa.bindparam("space"))
_PLACES_IN_SESSION = _PLACES_OF_IDS.where(_documents.c.session == sa.bindparam("session"))


def _drop_fresh(connection: sa.Connection, space: int, postings: Sequence[tuple[str, int]]) -> None:
    """Delete these fresh postings (term, key) of a space: every posting of some documents.

    On PostgreSQL many go by their keys alone (a document's postings move together),
    in one statement reading the space's fresh rows once: pairs as arrays got a plan
    comparing every row with every pair (2.4 ms for one edited turn).
    """
    if not postings:
        return
    if connection.dialect.name == "postgresql" and len(postings) > _ONE_BY_ONE:
        _DROP_KEYS_PG.execute(connection, s=space, keys=sorted({key for _, key in postings}))
    else:
        connection.execute(_DROP_POSTING, [{"s": space, "t": t, "k": k} for t, k in postings])


@dataclass(frozen=True)
class _Postings:
    """The postings a search read, as columns: each one's term (its index), key, tf, length."""

    term: np.ndarray
    key: np.ndarray
    tf: np.ndarray
    length: np.ndarray

    @property
    def count(self) -> int:
        """How many postings."""
        return len(self.key)

    @classmethod
    def read(cls, rows: Iterable[Sequence[Any]], index: Mapping[str, int]) -> _Postings:
        """From :func:`_postings_of`'s rows: blocks unpacked, fresh postings appended."""
        packed: list[np.ndarray] = []
        terms: list[np.ndarray] = []
        fresh: list[tuple[int, int, int, int]] = []
        for term, data, key, tf, length in rows:
            if data is not None:
                columns = _unpack(data)
                packed.append(columns)
                terms.append(np.full(columns.shape[1], index[term], dtype=np.int64))
            else:
                fresh.append((index[term], key, tf, length))
        if fresh:
            loose = np.array(fresh, dtype=np.int64).T
            packed.append(loose[1:])
            terms.append(loose[0])
        if not packed:
            empty = np.zeros(0, dtype=np.int64)
            return cls(empty, empty, empty, empty)
        columns = np.concatenate(packed, axis=1)
        return cls(np.concatenate(terms), columns[0], columns[1], columns[2])

    def best(self, weights: np.ndarray, *, c: float, slope: float, n: int) -> dict[int, float]:
        """The ``n`` best keys by summed BM25 (then by key), with their positive scores.

        ``weights`` holds each term's repeats * idf * (k1 + 1); ``c`` is
        ``k1 * (1 - b)`` and ``slope`` ``k1 * b / average length``.
        """
        tf = self.tf.astype(np.float64)
        parts = weights[self.term] * tf / (tf + c + slope * self.length)
        low = int(self.key.min())
        span = int(self.key.max()) - low + 1
        if span <= 4 * self.count + 4096:  # a space's keys are near: sum by offset, no sort
            totals = np.bincount(self.key - low, weights=parts, minlength=span)
            keys = np.flatnonzero(totals > 0)
            keys, scores = keys + low, totals[keys]
        else:
            keys, inverse = np.unique(self.key, return_inverse=True)
            scores = np.bincount(inverse, weights=parts, minlength=len(keys))
            scored = scores > 0
            keys, scores = keys[scored], scores[scored]
        near = at_least_nth(scores, n)  # the ties too: cut by key below
        keys, scores = keys[near], scores[near]
        order = np.lexsort((keys, -scores))[:n]
        return {int(keys[i]): float(scores[i]) for i in order}


def _rewritten(columns: np.ndarray) -> dict[str, Any]:
    """A block's new ``count``, key range and value (``n``, ``lo``, ``hi``, ``d``)."""
    return {
        "n": int(columns.shape[1]),
        "lo": int(columns[0].min()),
        "hi": int(columns[0].max()),
        "d": _pack(columns[0], columns[1], columns[2]),
    }


_IN_SIZES = (8, 32, 128, 512)
_in_statements: dict[tuple[int, int, int], Prepared] = {}


def _select_in(
    connection: sa.Connection,
    select: sa.Select[Any],
    column: sa.ColumnElement[Any],
    values: Sequence[Any],
    **params: Any,
) -> list[Any]:
    """``select`` restricted to rows whose ``column`` is among ``values``, on the driver.

    Prepared once per :func:`_size` (8, 32, 128, 512 values), so a search never
    compiles SQL; PostgreSQL's one array (208 keys: 0.4 ms, as an ``IN`` list 1.7).
    """
    rows: list[Any] = []
    postgres = connection.dialect.name == "postgresql"
    largest = max(len(values), 1) if postgres else _IN_SIZES[-1]
    for start in range(0, len(values), largest):
        chunk = values[start : start + largest]
        size = _size(connection, _IN_SIZES, len(chunk))
        key = (id(select), id(column), size)
        prepared = _in_statements.get(key)
        if prepared is None:
            prepared = _in_statements[key] = Prepared(select.where(_among(column, size, "in")))
        rows += prepared.execute(connection, **params, **_values(chunk, size, "in")).fetchall()
    return rows
