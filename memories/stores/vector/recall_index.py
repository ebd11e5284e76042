"""The recall index in SQL: every document's lexical terms, turn position and speakers.

Hybrid recall's BM25 postings, neighbour positions and speaker keys, in five
``memories_recall_*`` tables (:mod:`~memories.stores.vector.recall_tables`) in the
outbox's database, written in the transaction of the document's outbox row: every
process reads the same index, none rebuilds it, and a crash leaves a document queued
and indexed or neither. Its layout and costs: docs/architecture.md, "The recall index".
"""

from __future__ import annotations

import logging
import math
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any

import numpy as np
import sqlalchemy as sa

from memories.errors import BackendError
from memories.kernel.lru import LRU
from memories.stores.recall import (
    RecallConfig,
    ScoredId,
    TurnPosition,
    named_speakers,
    rank_candidates,
    speaker_key,
)
from memories.stores.recall.ranking import rank_parts
from memories.stores.recall.types import RankParts, best_first
from memories.stores.sql import Database, add_counts, count_rows
from memories.stores.vector.recall_tables import (
    _BLOCKS_AROUND,
    _BUILDING,
    _DROP_BLOCK,
    _FRESH,
    _FRESH_ROWS,
    _IDS_OF_KEYS,
    _LONGEST,
    _OPEN_BLOCKS,
    _PLACES_IN_SESSION,
    _PLACES_OF_IDS,
    _REWRITE,
    _STATS,
    _TERM_SIZES,
    _blocks,
    _documents,
    _drop_fresh,
    _lock_key,
    _Postings,
    _postings,
    _postings_of,
    _rewritten,
    _select_in,
    _size,
    _spaces,
    _speakers,
    _unpack,
    _values,
)

__all__ = [
    "SESSION_KEY",
    "SPEAKERS_KEY",
    "TIMESTAMP_KEY",
    "TURN_KEY",
    "IndexedDocument",
    "RecallIndex",
    "Space",
    "analysis_key",
    "bookkeeping",
    "document_date",
]

logger = logging.getLogger(__name__)

SESSION_KEY = "session"
TURN_KEY = "turn"
TIMESTAMP_KEY = "timestamp"
SPEAKERS_KEY = "speakers"

#: How many spaces a process remembers the ids of (a few hundred bytes each).
_KNOWN_SPACES = 10_000
_BUILD_BATCH = 1_000
#: Between a document's terms, and its speakers, in their columns.
_SEPARATOR = "\n"
#: A write packs its space's fresh postings once they are more than this many.
_PACK_AFTER = 4096
#: The most postings a block holds.
_BLOCK_SIZE = 1024
#: A compaction moving this many postings or more is logged (an older index, a build).
_LOGGED_PACK = 50_000


def analysis_key(config: RecallConfig, /) -> str:
    """What decides a document's terms: stopwords, stemming and dates (BM25's k1 and b do not)."""
    return f"{config.stopwords}/{'stem' if config.stem else 'nostem'}/" + (
        "dates" if config.lexical_dates else "nodates"
    )


def _analysis_config(key: str) -> RecallConfig:
    stopwords, stem, dates = key.split("/")
    return RecallConfig(stopwords=stopwords, stem=stem == "stem", lexical_dates=dates == "dates")  # type: ignore[arg-type]


def bookkeeping(session_id: str, /, *, turn: bool) -> dict[str, Any]:
    """What a recall backend keeps on a new document: session and time (and a turn's speakers).

    Read by neighbour smoothing, calibrated scores (the date) and speaker keys.
    """
    stamp: dict[str, Any] = {SESSION_KEY: session_id, TIMESTAMP_KEY: time.time()}
    return {**stamp, SPEAKERS_KEY: ["human", "ai"]} if turn else stamp


def document_date(metadata: Mapping[str, Any], /) -> date | None:
    """The day a document was said on (UTC), from its ``timestamp`` metadata, if it has one."""
    stamp = metadata.get(TIMESTAMP_KEY)
    if not isinstance(stamp, int | float) or isinstance(stamp, bool):
        return None
    try:
        return datetime.fromtimestamp(stamp, tz=UTC).date()
    except (OverflowError, OSError, ValueError):
        return None


def _turn_speakers(metadata: Mapping[str, Any]) -> list[str]:
    given = metadata.get(SPEAKERS_KEY)
    names = [given] if isinstance(given, str) else given if isinstance(given, list) else []
    return sorted({speaker_key(n) for n in names if isinstance(n, str) and n.strip()})


@dataclass(frozen=True)
class IndexedDocument:
    """A document as the index sees it: its id, text and metadata (session, turn, ...)."""

    doc_id: str
    text: str
    metadata: Mapping[str, Any]

    @property
    def position(self) -> tuple[str, int] | None:
        """Its session and turn, when its metadata has both."""
        session, turn = self.metadata.get(SESSION_KEY), self.metadata.get(TURN_KEY)
        if session is None or not isinstance(turn, int) or isinstance(turn, bool):
            return None
        return str(session), turn


@dataclass(frozen=True)
class Space:
    """One namespace of one store under one lexical analysis: the rows a search reads."""

    id: int
    target: str
    namespace: str
    analysis: str


@dataclass(frozen=True)
class _Row:
    """A document analysed for one space."""

    doc_id: str
    session: str | None
    turn: int | None
    terms: Counter[str]
    speakers: list[str]


#: What waits in an outbox for a namespace's new space: (connection, target, namespace, index).
Queued = Callable[[sa.Connection, str, str, "RecallIndex"], list[IndexedDocument]]


class RecallIndex:
    """The recall index of the stores whose outbox is in one SQL database.

    Writes take the caller's connection, to commit with the outbox's rows.

    Args:
        database: the database (the outbox's).
        queued: what waits in the outbox of a namespace whose space is being
            built, numbered (the outbox's ``number_queued``; none by default).
        pack_after: a space's fresh postings are packed into blocks by the
            write that finds more than this many.
        block_size: the most postings a block holds.
    """

    def __init__(
        self,
        database: Database,
        *,
        queued: Queued | None = None,
        pack_after: int = _PACK_AFTER,
        block_size: int = _BLOCK_SIZE,
    ) -> None:
        if pack_after < 0 or block_size < 1:
            raise ValueError(
                f"pack_after={pack_after!r} and block_size={block_size!r}: use pack_after >= 0 "
                "and block_size >= 1."
            )
        self.database = database
        self.queued = queued
        self.pack_after = pack_after
        self.block_size = block_size
        self._known: LRU[tuple[str, str, str], Space] = LRU(_KNOWN_SPACES, locked=True)

    # -- spaces -----------------------------------------------------------------------

    def space(
        self,
        target: str,
        namespace: str,
        config: RecallConfig,
        *,
        stored: Callable[[], Iterable[IndexedDocument]],
    ) -> Space:
        """The space of a namespace under ``config``'s analysis, indexed first if it is new.

        A new space is filled from ``stored`` and the outbox's rows in one write
        transaction (a process asking meanwhile waits, then finds it built); one
        an older version wrote in rows only is packed on this first use.
        """
        key = (target, namespace, analysis_key(config))
        found = self._known.get(key)
        if found is not None:
            return found
        found = self._find(*key)
        if found is None:
            found = self._build(*key, stored)
        else:
            self._pack_found(found)
        self._known.put(key, found)
        return found

    def _find(self, target: str, namespace: str, analysis: str) -> Space | None:
        query = sa.select(_spaces.c.id).where(
            _spaces.c.target == target,
            _spaces.c.namespace == namespace,
            _spaces.c.analysis == analysis,
        )
        with self.database.transaction() as connection:
            found = connection.execute(query).scalar()
        return None if found is None else Space(found, target, namespace, analysis)

    def _build(
        self,
        target: str,
        namespace: str,
        analysis: str,
        stored: Callable[[], Iterable[IndexedDocument]],
    ) -> Space:
        with self.database.batch(write=True), self.database.transaction(write=True) as connection:
            if connection.dialect.name == "postgresql":
                # SQLite's write lock is taken by the batch; PostgreSQL takes none before
                # the insert, so two builders would both insert: they take turns here.
                _BUILDING.execute(connection, key=_lock_key(target, namespace, analysis))
            found = self._find(target, namespace, analysis)
            if found is not None:  # another process built it while this one waited
                return found
            started = time.monotonic()
            space_id = connection.execute(
                sa.insert(_spaces).returning(_spaces.c.id).values(
                    target=target, namespace=namespace, analysis=analysis,
                    documents=0, total_length=0, built_at=time.time(),
                )
            ).scalar_one()  # fmt: skip
            space = Space(int(space_id), target, namespace, analysis)
            config = _analysis_config(analysis)
            rows = [_analyse(d, config) for d in stored()]
            # More postings than a write would leave fresh go straight into blocks:
            # nobody sees the space before this commits, so nothing is compacted.
            many = sum(len(row.terms) for row in rows) > self.pack_after
            packed: dict[str, list[tuple[int, int, int]]] | None = {} if many else None
            for start in range(0, len(rows), _BUILD_BATCH):
                self._insert(connection, space.id, rows[start : start + _BUILD_BATCH], into=packed)
            if packed:
                self._append(connection, space.id, packed)
            # Then what waits in the outbox (newer than the store's copy of an id),
            # numbered after the stored turns where it waits for a number.
            queued = [] if self.queued is None else self.queued(connection, target, namespace, self)
            self.add(connection, target, namespace, queued)
            if rows or queued:
                logger.info(
                    "Indexed the %d documents of namespace %r for recall in %.1f s (once).",
                    len(rows) + len(queued), namespace, time.monotonic() - started,
                )  # fmt: skip
        return space

    def _pack_found(self, space: Space) -> None:
        """Pack a space this process meets first with too many fresh postings (rows only).

        Searches read it as it is, so a database this process cannot write to is logged.
        """
        with self.database.transaction() as connection:
            fresh = _FRESH.execute(connection, space=space.id, cap=self.pack_after + 1).fetchone()
        if fresh[0] <= self.pack_after:
            return
        try:
            with self.database.transaction(write=True) as connection:
                self._spaces_of(connection, space.target, space.namespace)  # writers take turns
                self._settle(connection, space.id)
        except BackendError as exc:
            logger.warning(
                "Could not pack the recall index of namespace %r (%s); searches read it as it "
                "is, and its next write packs it.",
                space.namespace, exc,
            )  # fmt: skip

    def _spaces_of(self, connection: sa.Connection, target: str, namespace: str) -> list[Space]:
        mine = (_spaces.c.target == target, _spaces.c.namespace == namespace)
        # Writers of a namespace take turns: FOR UPDATE (SQLite's write lock does it there).
        query = sa.select(_spaces.c.id, _spaces.c.analysis).where(*mine).with_for_update()
        return [Space(i, target, namespace, a) for i, a in connection.execute(query)]

    # -- writes (in the caller's transaction) --------------------------------------------

    def number(
        self, connection: sa.Connection, target: str, namespace: str, sessions: Iterable[str]
    ) -> dict[str, int] | None:
        """The next free turn number of each session; None while the namespace has no index."""
        spaces = self._spaces_of(connection, target, namespace)
        wanted = sorted(set(sessions))
        if not spaces:
            return None
        if not wanted:
            return {}
        query = (
            sa.select(_documents.c.session, sa.func.max(_documents.c.turn))
            .where(_documents.c.space == spaces[0].id, _documents.c.session.in_(wanted))
            .group_by(_documents.c.session)
        )
        highest = dict(connection.execute(query).all())
        return {s: (-1 if highest.get(s) is None else int(highest[s])) + 1 for s in wanted}

    def add(
        self,
        connection: sa.Connection,
        target: str,
        namespace: str,
        documents: Sequence[IndexedDocument],
    ) -> None:
        """Index documents in every space of their namespace (an id already there is replaced)."""
        if not documents:
            return
        for space in self._spaces_of(connection, target, namespace):
            config = _analysis_config(space.analysis)
            self._remove(connection, space.id, [d.doc_id for d in documents])
            self._insert(connection, space.id, [_analyse(d, config) for d in documents])
            self._settle(connection, space.id)

    def remove(
        self,
        connection: sa.Connection,
        target: str,
        namespace: str,
        ids: Sequence[str],
        *,
        session: str | None = None,
    ) -> None:
        """Forget documents (and every one of ``session``), in every space of their namespace."""
        for space in self._spaces_of(connection, target, namespace):
            gone = list(ids)
            if session is not None:
                query = sa.select(_documents.c.doc_id).where(
                    _documents.c.space == space.id, _documents.c.session == session
                )
                gone += connection.execute(query).scalars()
            self._remove(connection, space.id, gone)

    def clear(self, connection: sa.Connection, target: str, namespace: str) -> None:
        """Forget every document of a namespace (its spaces stay, empty and built)."""
        spaces = [space.id for space in self._spaces_of(connection, target, namespace)]
        _drop_rows(connection, spaces)
        emptied = sa.update(_spaces).where(_spaces.c.id.in_(spaces))
        connection.execute(emptied.values(documents=0, total_length=0))

    def adopt(self, connection: sa.Connection, former: str, target: str) -> int:
        """File the spaces under ``former`` under ``target``; return how many moved.

        A copy of a space ``target`` has already (the one in use) is dropped instead.
        """
        mine = _spaces.alias("mine")
        clash = sa.exists().where(
            mine.c.target == target,
            mine.c.namespace == _spaces.c.namespace,
            mine.c.analysis == _spaces.c.analysis,
        )
        query = sa.select(_spaces.c.id).where(_spaces.c.target == former, clash)
        stale = list(connection.execute(query).scalars())
        _drop_rows(connection, stale)
        connection.execute(sa.delete(_spaces).where(_spaces.c.id.in_(stale)))
        moved = connection.execute(
            sa.update(_spaces).where(_spaces.c.target == former).values(target=target)
        )
        return int(moved.rowcount)

    def _insert(
        self,
        connection: sa.Connection,
        space: int,
        rows: Sequence[_Row],
        *,
        into: dict[str, list[tuple[int, int, int]]] | None = None,
    ) -> None:
        """Add documents; their postings as fresh rows, or ``into`` (term: key, tf, length)."""
        if not rows:
            return
        values = [
            {"space": space, "doc_id": row.doc_id, "session": row.session, "turn": row.turn,
             "length": sum(row.terms.values()), "terms": _SEPARATOR.join(row.terms),
             "speakers": _SEPARATOR.join(row.speakers) or None}
            for row in rows
        ]  # fmt: skip
        # One statement for the batch, the new keys returned in the order given.
        inserted = sa.insert(_documents).returning(_documents.c.key, sort_by_parameter_order=True)
        keys = list(connection.execute(inserted, values).scalars())
        if into is not None:  # a build: a tuple per posting, not a dict (millions of them)
            for key, row in zip(keys, rows, strict=True):
                length = sum(row.terms.values())
                for term, tf in row.terms.items():
                    into.setdefault(term, []).append((key, tf, length))
        else:
            postings = [
                {"space": space, "term": term, "key": key, "tf": tf, "length": value["length"]}
                for key, row, value in zip(keys, rows, values, strict=True)
                for term, tf in row.terms.items()
            ]
            if postings:
                connection.execute(sa.insert(_postings), postings)
        self._count(connection, space, rows, +1)

    def _remove(self, connection: sa.Connection, space: int, ids: Sequence[str]) -> None:
        if not ids:
            return
        query = sa.select(
            _documents.c.key,
            _documents.c.doc_id,
            _documents.c.terms,
            _documents.c.speakers,
            _documents.c.length,
        ).where(_documents.c.space == space, _documents.c.doc_id.in_(list(ids)))
        found = connection.execute(query).all()
        if not found:
            return
        gone = [
            (term, key) for key, _, terms, _, _ in found for term in terms.split(_SEPARATOR) if term
        ]
        if gone:
            _drop_fresh(connection, space, gone)
            self._drop_packed(connection, space, gone)
        connection.execute(sa.delete(_documents).where(_documents.c.key.in_([r[0] for r in found])))
        rows = [
            _Row(doc_id, None, None, Counter(), (speakers or "").split(_SEPARATOR))
            for _, doc_id, _, speakers, _ in found
        ]
        self._count(connection, space, rows, -1, length=sum(r[4] for r in found))

    def _drop_packed(
        self, connection: sa.Connection, space: int, gone: Sequence[tuple[str, int]]
    ) -> None:
        """Take the postings ``gone`` (term, key) out of the blocks holding them.

        Only blocks whose key range meets them are read; one left empty is deleted.
        """
        keys: dict[str, list[int]] = {}
        for term, key in gone:
            keys.setdefault(term, []).append(key)
        everyone = [key for _, key in gone]
        # One statement for all the terms (one document's keys: exactly its blocks).
        around = _select_in(
            connection, _BLOCKS_AROUND, _blocks.c.term, sorted(keys),
            space=space, lo=min(everyone), hi=max(everyone),
        )  # fmt: skip
        rewrites: list[dict[str, Any]] = []
        drops: list[dict[str, Any]] = []
        for term, block, data in around:
            columns = _unpack(data)
            kept = columns[:, ~np.isin(columns[0], keys[term])]
            if kept.shape[1] == columns.shape[1]:
                continue
            named = {"s": space, "t": term, "b": block}
            if kept.shape[1]:
                rewrites.append(named | _rewritten(kept))
            else:
                drops.append(named)
        if rewrites:
            connection.execute(_REWRITE, rewrites)
        if drops:
            connection.execute(_DROP_BLOCK, drops)

    def _settle(self, connection: sa.Connection, space: int) -> None:
        """Pack the space's fresh postings when they are more than ``pack_after``."""
        fresh = _FRESH.execute(connection, space=space, cap=self.pack_after + 1).fetchone()[0]
        if fresh > self.pack_after:
            self._compact(connection, space)

    def _fresh(self, connection: sa.Connection, space: int) -> list[Any]:
        """The space's fresh postings: ``(term, key, tf, length)`` rows."""
        return list(_FRESH_ROWS.execute(connection, space=space).fetchall())

    def _compact(self, connection: sa.Connection, space: int) -> int:
        """Move the space's fresh postings into blocks (:meth:`_append`); return how many moved.

        Exactly the rows read are deleted (one added meanwhile stays fresh); writers of
        a space take turns already (:meth:`_spaces_of`).
        """
        started = time.monotonic()
        rows = self._fresh(connection, space)
        if not rows:
            return 0
        by_term: dict[str, list[tuple[int, int, int]]] = {}
        for term, key, tf, length in rows:
            by_term.setdefault(term, []).append((key, tf, length))
        self._append(connection, space, by_term)
        _drop_fresh(connection, space, [(term, key) for term, key, _, _ in rows])
        seconds = time.monotonic() - started
        log = logger.info if len(rows) >= _LOGGED_PACK else logger.debug
        log(
            "Packed %d recall postings of space %d into blocks in %.2f s.",
            len(rows), space, seconds,
        )  # fmt: skip
        return len(rows)

    def _append(
        self,
        connection: sa.Connection,
        space: int,
        by_term: Mapping[str, Sequence[tuple[int, int, int]]],
    ) -> None:
        """Add postings (per term: key, tf, length) to the blocks: the last one's room first."""
        if not by_term:
            return
        size = self.block_size
        # The open block of each term: the latest begun of those with room.
        last: dict[str, tuple[int, bytes]] = {}
        for term, block, data in _select_in(
            connection, _OPEN_BLOCKS, _blocks.c.term, sorted(by_term), space=space, size=size
        ):
            if term not in last or block > last[term][0]:
                last[term] = (int(block), data)
        rewrites: list[dict[str, Any]] = []
        inserts: list[dict[str, Any]] = []
        for term, postings in by_term.items():
            new = np.array(postings, dtype=np.int64).T
            block, data = last.get(term, (0, None))
            if data is not None:
                old = _unpack(data)
                room = size - old.shape[1]
                if room > 0:
                    merged = np.concatenate([old, new[:, :room]], axis=1)
                    rewrites.append({"s": space, "t": term, "b": block} | _rewritten(merged))
                    new = new[:, room:]
            new = new[:, np.argsort(new[0], kind="stable")]  # blocks of close keys
            for start in range(0, new.shape[1], size):
                part = _rewritten(new[:, start : start + size])
                block = part["lo"]
                inserts.append(
                    {"space": space, "term": term, "block": block, "count": part["n"],
                     "low": part["lo"], "high": part["hi"], "data": part["d"]}
                )  # fmt: skip
        if rewrites:
            connection.execute(_REWRITE, rewrites)
        if inserts:
            connection.execute(sa.insert(_blocks), inserts)

    def _count(
        self,
        connection: sa.Connection,
        space: int,
        rows: Sequence[_Row],
        sign: int,
        *,
        length: int | None = None,
    ) -> None:
        """Keep a space's statistics and speaker counts after adding or removing ``rows``."""
        if length is None:
            length = sum(sum(row.terms.values()) for row in rows)
        connection.execute(
            sa.update(_spaces)
            .where(_spaces.c.id == space)
            .values(
                documents=_spaces.c.documents + sign * len(rows),
                total_length=_spaces.c.total_length + sign * length,
            )
        )
        said = Counter(name for row in rows for name in row.speakers if name)
        if not said:
            return
        turns = [{"space": space, "speaker": n, "turns": sign * c} for n, c in said.items()]
        add_counts(connection, _speakers, turns, ["turns"])
        connection.execute(
            sa.delete(_speakers).where(_speakers.c.space == space, _speakers.c.turns <= 0)
        )

    # -- reads ----------------------------------------------------------------------

    def count(self, space: Space) -> int:
        """How many documents the space holds (queued ones included)."""
        query = sa.select(_spaces.c.documents).where(_spaces.c.id == space.id)
        with self.database.transaction() as connection:
            return int(connection.execute(query).scalar() or 0)

    def held(self, target: str, namespace: str, *, session: str | None = None) -> int:
        """The index's rows of a namespace's documents (or one session's): each, its terms,
        and, for a whole namespace, its speakers' counts."""
        spaces = sa.select(_spaces.c.id).where(
            _spaces.c.target == target, _spaces.c.namespace == namespace
        )
        if session is not None:
            # A session's postings, packed or fresh: one per distinct term of each document.
            terms = sa.select(_documents.c.terms).where(
                _documents.c.space.in_(spaces), _documents.c.session == session
            )
            with self.database.transaction() as connection:
                found = connection.execute(terms).scalars().all()
            return len(found) + sum(len([t for t in held.split(_SEPARATOR) if t]) for held in found)
        packed = sa.select(sa.func.sum(_blocks.c.count)).where(_blocks.c.space.in_(spaces))
        with self.database.transaction() as connection:
            rows = [
                count_rows(connection, t, t.c.space.in_(spaces))
                for t in (_documents, _postings, _speakers)
            ]
            return sum(rows) + int(connection.execute(packed).scalar() or 0)

    def namespaces(self, target: str) -> dict[str, int]:
        """The namespaces of a store that have an index, with their document counts."""
        query = (
            sa.select(_spaces.c.namespace, sa.func.max(_spaces.c.documents))
            .where(_spaces.c.target == target)
            .group_by(_spaces.c.namespace)
        )
        with self.database.transaction() as connection:
            return {namespace: int(n) for namespace, n in connection.execute(query)}

    def lexical(
        self, space: Space, query: str, config: RecallConfig, *, limit: int
    ) -> list[ScoredId]:
        """BM25 top ``limit`` for ``query``: Lucene's idf, ``config``'s k1 and b, ties by id.

        One prepared statement reads the terms' postings, packed and fresh;
        scores are summed here (:meth:`_Postings.best`), then the best ids read.
        """
        terms = Counter(config.analyzer().query_terms(query))
        if not terms or limit < 1:
            return []
        with self.database.transaction() as connection:
            stats = _STATS.execute(connection, space=space.id).fetchone()
            if stats is None or not stats[0]:
                return []
            n_docs, total = int(stats[0]), int(stats[1])
            wanted = list(terms)[: _TERM_SIZES[-1]]
            size = _size(connection, _TERM_SIZES, len(wanted))
            named = _values(wanted, size, "t")
            rows = _postings_of(size).execute(connection, space=space.id, **named).fetchall()
            postings = _Postings.read(rows, {term: i for i, term in enumerate(wanted)})
            if not postings.count:
                return []
            k1, b = config.bm25_k1, config.bm25_b
            weights = np.zeros(len(wanted))
            for i, df in enumerate(np.bincount(postings.term, minlength=len(wanted))):
                if df:  # repeats * Lucene's idf * (k1 + 1)
                    idf = math.log(1.0 + (n_docs - df + 0.5) / (df + 0.5))
                    weights[i] = terms[wanted[i]] * idf * (k1 + 1.0)
            slope = k1 * b / (total / n_docs) if total else 0.0
            # Twice the limit, so that ties at the cut are settled by id below, as BM25Index does.
            best = postings.best(weights, c=k1 * (1.0 - b), slope=slope, n=2 * limit + 8)
            ids = dict(_select_in(connection, _IDS_OF_KEYS, _documents.c.key, list(best)))
        return best_first({ids[key]: score for key, score in best.items() if key in ids}, limit)

    def positions(
        self, space: Space, ids: Iterable[str], *, window: int
    ) -> tuple[dict[str, TurnPosition], dict[str, frozenset[str]]]:
        """The positions of ``ids`` and of the turns within ``window`` of them; their speakers.

        Returns ``(position of each document found, speaker keys of each that has them)``.
        """
        wanted = list(dict.fromkeys(ids))
        positions: dict[str, TurnPosition] = {}
        speakers: dict[str, frozenset[str]] = {}
        if not wanted:
            return positions, speakers
        with self.database.transaction() as connection:
            found = _select_in(
                connection, _PLACES_OF_IDS, _documents.c.doc_id, wanted, space=space.id
            )
            around: dict[str, set[int]] = {}
            for _, session, turn, _ in found:
                if session is not None and turn is not None and window:
                    near = range(turn - window, turn + window + 1)
                    around.setdefault(session, set()).update(t for t in near if t != turn)
            known = {doc_id for doc_id, *_ in found}
            for session, turns in around.items():
                # One statement per session (per 512 turns), on the (space, session, turn) index.
                for row in _select_in(
                    connection, _PLACES_IN_SESSION, _documents.c.turn, sorted(turns),
                    space=space.id, session=session,
                ):  # fmt: skip
                    if row[0] not in known:
                        found.append(row)
        for doc_id, session, turn, said in found:
            if session is not None and turn is not None:
                positions[doc_id] = TurnPosition(session, turn)
            if said:
                speakers[doc_id] = frozenset(said.split(_SEPARATOR))
        return positions, speakers

    def rank(
        self,
        space: Space,
        query: str,
        config: RecallConfig,
        *,
        dense: Sequence[ScoredId],
        limit: int,
        candidates: int,
        passing: Callable[[list[str]], Iterable[str]] | None = None,
        parts: dict[str, RankParts] | None = None,
    ) -> list[ScoredId]:
        """Hybrid recall's final ranking: ``dense`` hits fused with BM25's, neighbours, speakers.

        Args:
            dense: the backend's nearest neighbours (cosine similarities).
            passing: which of some ids pass the metadata filter, in the store (the
                dense hits passed it there already, so only the others are asked).
            parts: receives each result's dense, lexical and neighbour parts.
        """
        with self.database.batch(write=False):
            lexical = (
                self.lexical(space, query, config, limit=candidates) if config.uses_lexical else []
            )
            found = {s.id for s in dense} | {s.id for s in lexical}
            window = config.neighbour_window if config.neighbour_weight else 0
            positions, speakers = self.positions(space, found, window=window)
            named = self.named_speakers(space, query)
        if passing is not None:
            filtered = {s.id for s in dense}
            unchecked = sorted((found | set(positions)) - filtered)
            if unchecked:
                filtered.update(passing(unchecked))
            lexical = [s for s in lexical if s.id in filtered]
            positions = {i: p for i, p in positions.items() if i in filtered}
        ranked = rank_candidates(
            config,
            dense=dense,
            lexical=lexical,
            positions=positions,
            speakers=speakers,
            named=named,
            limit=limit,
        )
        if parts is not None:
            parts.update(rank_parts(config, dense=dense, lexical=lexical, ranked=ranked))
        return ranked

    def named_speakers(self, space: Space, query: str) -> frozenset[str]:
        """The speakers of the space that ``query`` names (see :func:`named_speakers`)."""
        speakers = sa.select(_speakers.c.speaker).where(_speakers.c.space == space.id)
        with self.database.transaction() as connection:
            known = set(connection.execute(speakers).scalars())
        return named_speakers(query, known)


def _drop_rows(connection: sa.Connection, spaces: Sequence[int]) -> None:
    """Delete every document, posting and speaker count of these spaces."""
    for table in (_postings, _blocks, _documents, _speakers):
        connection.execute(sa.delete(table).where(table.c.space.in_(spaces)))


def _analyse(document: IndexedDocument, config: RecallConfig) -> _Row:
    session, turn = document.position or (None, None)
    text = config.lexical_text(document.text, when=document_date(document.metadata))
    return _Row(
        document.doc_id,
        session,
        turn,
        Counter(term[:_LONGEST] for term in config.analyzer().terms(text)),
        [name[:_LONGEST] for name in _turn_speakers(document.metadata)],
    )
