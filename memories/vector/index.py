"""This process's view of a namespace: turn positions and the BM25 index.

Chroma answers the dense half of recall; the lexical half (a
:class:`~memories.recall.BM25Index`) and the turn positions that neighbour
smoothing needs live in the process. A :class:`NamespaceIndex` is built from
the store the first time a namespace is used, and kept current by the writes
of this process.

Writes by other processes (or other hosts sharing a Chroma server) are
noticed before each search by two cheap reads: the namespace's document
count, which any add changes, and its *generation*, a token in the
collection's metadata that every delete (and every add with caller-chosen
ids, which may replace a document) renews. When either differs from what
the index holds, it is rebuilt from the store. The generation is read before
the documents, so a write that lands during a rebuild is seen next time.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from memories.recall import BM25Index, RecallConfig, ScoredId, TurnPosition

__all__ = ["NamespaceIndex", "shared_index", "turn_position"]

SESSION_KEY = "session"
TURN_KEY = "turn"
TIMESTAMP_KEY = "timestamp"

_MAX_INDEXES = 256


def turn_position(metadata: dict[str, Any], /) -> TurnPosition | None:
    """Where a document sits in its conversation, if its metadata says (session and turn)."""
    session, turn = metadata.get(SESSION_KEY), metadata.get(TURN_KEY)
    if session is None or not isinstance(turn, int) or isinstance(turn, bool):
        return None
    return TurnPosition(str(session), turn)


class NamespaceIndex:
    """Positions and lexical index of one namespace's documents.

    Use under :attr:`lock`: a search reads, a write updates, a rebuild replaces.
    """

    def __init__(self, config: RecallConfig) -> None:
        self.config = config
        self.lock = threading.RLock()
        self.loaded = False
        self.generation: str | None = None
        self._lexical: BM25Index | None = config.lexical_index() if config.uses_lexical else None
        self._ids: set[str] = set()
        self._position: dict[str, TurnPosition] = {}
        self._at: dict[TurnPosition, str] = {}
        self._last_turn: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self._ids)

    def is_current(self, count: int, generation: str | None) -> bool:
        """Whether the index matches a store holding ``count`` documents at ``generation``."""
        return self.loaded and count == len(self._ids) and generation == self.generation

    def rebuild(
        self, documents: Iterable[tuple[str, str, dict[str, Any]]], generation: str | None
    ) -> None:
        """Replace everything with ``(id, text, metadata)`` documents read from the store."""
        self._ids.clear()
        self._position.clear()
        self._at.clear()
        self._last_turn.clear()
        if self._lexical is not None:
            self._lexical.clear()
        self.add(documents)
        self.generation = generation
        self.loaded = True

    def invalidate(self) -> None:
        """Make the next search rebuild the index from the store."""
        self.loaded = False

    def add(self, documents: Iterable[tuple[str, str, dict[str, Any]]]) -> None:
        """Index documents this process wrote (an id already indexed is replaced)."""
        for doc_id, text, metadata in documents:
            self._forget_position(doc_id)
            self._ids.add(doc_id)
            position = turn_position(metadata)
            if position is not None:
                self._position[doc_id] = position
                self._at[position] = doc_id
                last = self._last_turn.get(position.session, -1)
                self._last_turn[position.session] = max(last, position.index)
            if self._lexical is not None:
                self._lexical.add("", doc_id, self.config.lexical_text(text, when=_date(metadata)))

    def next_turn(self, session: str) -> int:
        """The turn index the next turn of ``session`` gets."""
        return self._last_turn.get(session, -1) + 1

    def lexical(self, query: str, *, limit: int) -> list[ScoredId]:
        """BM25 top ``limit`` for ``query``."""
        if self._lexical is None:
            return []
        return self._lexical.search("", query, limit=limit)

    def positions(self, ids: Iterable[str]) -> dict[str, TurnPosition]:
        """The positions of those ``ids`` that have one."""
        return {i: self._position[i] for i in ids if i in self._position}

    @property
    def doc_at(self) -> Mapping[TurnPosition, str]:
        """The document at each position, kept current by every add (read under :attr:`lock`)."""
        return self._at

    def ids_at(self, positions: Iterable[TurnPosition]) -> dict[str, TurnPosition]:
        """The documents at ``positions`` (those that exist), with their positions."""
        return {self._at[p]: p for p in positions if p in self._at}

    def _forget_position(self, doc_id: str) -> None:
        old = self._position.pop(doc_id, None)
        if old is not None and self._at.get(old) == doc_id:
            del self._at[old]


def _date(metadata: dict[str, Any]) -> Any:
    stamp = metadata.get(TIMESTAMP_KEY)
    if not isinstance(stamp, int | float) or isinstance(stamp, bool):
        return None
    try:
        return datetime.fromtimestamp(stamp, tz=UTC).date()
    except (OverflowError, OSError, ValueError):
        return None


_indexes: OrderedDict[tuple[Any, ...], NamespaceIndex] = OrderedDict()
_indexes_lock = threading.Lock()


def shared_index(target: str, namespace: str, config: RecallConfig) -> NamespaceIndex:
    """The process's index of a namespace, shared by every memory that reads it the same way.

    The :data:`_MAX_INDEXES` most recently used are kept; an evicted one is
    rebuilt from the store when it is next used.
    """
    lexical: tuple[Any, ...] = ()
    if config.uses_lexical:
        c = config
        lexical = (c.bm25_k1, c.bm25_b, c.stopwords, c.stem, c.lexical_dates)
    key = (target, namespace, lexical)
    with _indexes_lock:
        index = _indexes.get(key)
        if index is None:
            index = _indexes[key] = NamespaceIndex(config)
            while len(_indexes) > _MAX_INDEXES:
                _indexes.popitem(last=False)
        else:
            _indexes.move_to_end(key)
        return index
