"""This process's view of a namespace: turn positions and the BM25 index.

Chroma answers the dense half of recall; the lexical half (a
:class:`~memories.stores.recall.BM25Index`) and the turn positions that neighbour
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

Documents this process has queued but not yet written are *pending*:
searchable here already (lexically, by position, and by their embedding once
it is computed) while the store does not have them yet; see
:meth:`NamespaceIndex.is_current` for how they count.
"""

from __future__ import annotations

import sys
import threading
from collections import Counter, OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any

import numpy as np

from memories.stores.recall import (
    BM25Index,
    RecallConfig,
    ScoredId,
    TurnPosition,
    named_speakers,
    speaker_key,
)

__all__ = [
    "NamespaceIndex",
    "PendingDocument",
    "document_date",
    "namespace_indexes",
    "shared_index",
    "turn_position",
]

SESSION_KEY = "session"
TURN_KEY = "turn"
TIMESTAMP_KEY = "timestamp"
SPEAKERS_KEY = "speakers"

_MAX_INDEXES = 256


def turn_speakers(metadata: dict[str, Any], /) -> frozenset[str]:
    """Who said a document, as speaker keys (its ``speakers`` metadata: a name or a list)."""
    given = metadata.get(SPEAKERS_KEY)
    names = [given] if isinstance(given, str) else given if isinstance(given, list) else []
    return frozenset(speaker_key(n) for n in names if isinstance(n, str) and n.strip())


def turn_position(metadata: dict[str, Any], /) -> TurnPosition | None:
    """Where a document sits in its conversation, if its metadata says (session and turn)."""
    session, turn = metadata.get(SESSION_KEY), metadata.get(TURN_KEY)
    if session is None or not isinstance(turn, int) or isinstance(turn, bool):
        return None
    # Interned, a session's name is held once however many turns it has.
    return TurnPosition(sys.intern(str(session)), turn)


@dataclass
class PendingDocument:
    """A document this process has queued for the store, searchable before the store has it."""

    text: str
    """Its text."""
    metadata: dict[str, Any]
    """Its metadata as the store will return it (namespace and turn included)."""
    vector: list[float] | None = None
    """Its embedding once computed, else None."""
    claimed: bool = False
    """Whether someone is computing its embedding now (others wait rather than redo it)."""
    writing: bool = False
    """Whether a write to the store is under way (the store may have it already)."""


class NamespaceIndex:
    """Positions and lexical index of one namespace's documents.

    Use under :attr:`lock`: a search reads, a write updates, a rebuild replaces.
    :attr:`changed` (on the same lock) is notified when pending embeddings arrive.
    """

    def __init__(self, config: RecallConfig) -> None:
        self.config = config
        self.lock = threading.RLock()
        self.loaded = False
        self.generation: str | None = None
        self.verified: int | None = None
        """The store's change token when the index was last found current (None: check)."""
        self._lexical: BM25Index | None = config.lexical_index() if config.uses_lexical else None
        self._ids: set[str] = set()
        self._position: dict[str, TurnPosition] = {}
        self._at: dict[tuple[str, int], str] = {}  # (session, index) -> id
        self._last_turn: dict[str, int] = {}
        self._speakers: dict[str, frozenset[str]] = {}
        self._speaker_sets: dict[frozenset[str], frozenset[str]] = {}  # one copy of each set
        self._speaker_turns: Counter[str] = Counter()
        self._pending: dict[str, PendingDocument] = {}
        self.changed = threading.Condition(self.lock)

    def __len__(self) -> int:
        return len(self._ids)

    def is_current(self, count: int, generation: str | None) -> bool:
        """Whether the index matches a store holding ``count`` documents at ``generation``.

        A pending document is not in the store until a write of it starts;
        while one runs it may or may not be, so the count may be anywhere from
        the documents known stored to those plus the ones being written. (A
        document another process adds during such a write is then seen by the
        next search, once the count is exact again.)
        """
        if not self.loaded or generation != self.generation:
            return False
        stored = len(self._ids) - len(self._pending)
        writing = sum(1 for document in self._pending.values() if document.writing)
        return stored <= count <= stored + writing

    def rebuild(
        self, documents: Iterable[tuple[str, str, dict[str, Any]]], generation: str | None
    ) -> None:
        """Replace everything with ``(id, text, metadata)`` documents read from the store."""
        self._ids.clear()
        self._position.clear()
        self._at.clear()
        self._last_turn.clear()
        self._speakers.clear()
        self._speaker_sets.clear()
        self._speaker_turns.clear()
        if self._lexical is not None:
            self._lexical.clear()
        stored = set()
        for document in documents:
            stored.add(document[0])
            self.add([document])
        # What this process is still writing stays searchable; what the store
        # returned is written already.
        for doc_id in stored & self._pending.keys():
            del self._pending[doc_id]
        self.add((i, p.text, p.metadata) for i, p in self._pending.items())
        self.generation = generation
        self.loaded = True

    def invalidate(self) -> None:
        """Make the next search rebuild the index from the store."""
        self.loaded = False
        self.verified = None

    def add(self, documents: Iterable[tuple[str, str, dict[str, Any]]]) -> None:
        """Index documents this process wrote (an id already indexed is replaced)."""
        for doc_id, text, metadata in documents:
            self._forget_turn(doc_id)
            self._ids.add(doc_id)
            position = turn_position(metadata)
            if position is not None:
                self._position[doc_id] = position
                self._at[(position.session, position.index)] = doc_id
                last = self._last_turn.get(position.session, -1)
                self._last_turn[position.session] = max(last, position.index)
            speakers = turn_speakers(metadata)
            if speakers:
                self._speakers[doc_id] = self._speaker_sets.setdefault(speakers, speakers)
                self._speaker_turns.update(speakers)
            if self._lexical is not None:
                when = document_date(metadata)
                self._lexical.add("", doc_id, self.config.lexical_text(text, when=when))

    # -- pending documents ----------------------------------------------------------

    def add_pending(self, documents: Iterable[tuple[str, str, dict[str, Any]]]) -> None:
        """Index documents about to be written, before the store has them."""
        for doc_id, text, metadata in documents:
            old = self._pending.get(doc_id)
            if old is not None and old.text == text and old.metadata == metadata:
                continue  # queued by a save, indexed then
            self.add([(doc_id, text, metadata)])
            self._pending[doc_id] = PendingDocument(text, metadata)

    def pending_count(self) -> int:
        """How many documents are pending."""
        return len(self._pending)

    def pending_document(self, doc_id: str) -> PendingDocument | None:
        """The pending document with that id, if it is one."""
        return self._pending.get(doc_id)

    def text_of(self, doc_id: str) -> str:
        """The text of a pending document.

        Raises:
            KeyError: ``doc_id`` is not pending.
        """
        return self._pending[doc_id].text

    def claim(self, ids: Iterable[str]) -> dict[str, list[float]]:
        """Take the embedding work of pending ``ids``; return the embeddings already known.

        The other pending ids are now claimed by the caller (even if someone
        else claimed them: the caller needs them and may not wait), who must
        :meth:`publish` or :meth:`release` them.
        """
        known = {}
        for doc_id in ids:
            document = self._pending.get(doc_id)
            if document is None:
                continue
            if document.vector is not None:
                known[doc_id] = document.vector
            else:
                document.claimed = True
        return known

    def unembedded(self) -> tuple[set[str], list[str]]:
        """Pending documents without an embedding: (claimed by someone, unclaimed)."""
        claimed: set[str] = set()
        free: list[str] = []
        for doc_id, document in self._pending.items():
            if document.vector is None:
                if document.claimed:
                    claimed.add(doc_id)
                else:
                    free.append(doc_id)
        return claimed, free

    def publish(self, ids: Sequence[str], vectors: Sequence[Sequence[float]]) -> None:
        """Give pending documents their embeddings and wake whoever waits for them."""
        for doc_id, vector in zip(ids, vectors, strict=True):
            document = self._pending.get(doc_id)
            if document is not None:
                document.vector, document.claimed = list(vector), False
        self.changed.notify_all()

    def release(self, ids: Iterable[str]) -> None:
        """Give up claims (the embedding failed) so that someone else may try."""
        for doc_id in ids:
            document = self._pending.get(doc_id)
            if document is not None:
                document.claimed = False
        self.changed.notify_all()

    def writing(self, ids: Iterable[str], /, *, now: bool) -> None:
        """Mark the start (``now=True``) or the failed end of a write of pending ``ids``."""
        for doc_id in ids:
            document = self._pending.get(doc_id)
            if document is not None:
                document.writing = now

    def stored(self, documents: Iterable[tuple[str, str, dict[str, Any]]]) -> None:
        """The store has these ``(id, text, metadata)`` documents now: index them as stored."""
        for doc_id, text, metadata in documents:
            old = self._pending.pop(doc_id, None)
            if old is None or old.text != text or old.metadata != metadata:
                self.add([(doc_id, text, metadata)])

    def forget_pending(self, ids: Iterable[str]) -> None:
        """Forget pending documents that will not be written; the next search rebuilds."""
        for doc_id in ids:
            self._pending.pop(doc_id, None)
        self.loaded = False
        self.changed.notify_all()

    def drop_pending(self) -> None:
        """Forget pending documents (their namespace is being cleared)."""
        self._pending.clear()
        self.changed.notify_all()

    def pending_nearest(self, vector: Sequence[float], *, n: int) -> list[ScoredId]:
        """The ``n`` embedded pending documents most similar to ``vector``, by cosine.

        One of another width (another embedding model, which the store will
        refuse) is left out.
        """
        width = len(vector)
        embedded = [
            (i, d.vector)
            for i, d in self._pending.items()
            if d.vector is not None and len(d.vector) == width
        ]
        if not embedded:
            return []
        matrix = np.asarray([v for _, v in embedded], dtype=np.float32)
        query = np.asarray(vector, dtype=np.float32)
        norms = np.linalg.norm(matrix, axis=1) * float(np.linalg.norm(query))
        scores = (matrix @ query) / np.where(norms > 0, norms, 1.0)
        found = zip((i for i, _ in embedded), scores.tolist(), strict=True)
        ranked = sorted(found, key=lambda item: (-item[1], item[0]))
        return [ScoredId(doc_id, score) for doc_id, score in ranked[:n]]

    # -- turns --------------------------------------------------------------------

    def next_turn(self, session: str) -> int:
        """The turn index the next turn of ``session`` gets."""
        return self._last_turn.get(session, -1) + 1

    def lexical(self, query: str, *, limit: int) -> list[ScoredId]:
        """BM25 top ``limit`` for ``query``."""
        if self._lexical is None:
            return []
        return self._lexical.search("", query, limit=limit)

    @property
    def speakers(self) -> Mapping[str, frozenset[str]]:
        """The speaker keys of each document that has them (read under :attr:`lock`)."""
        return self._speakers

    def named_speakers(self, query: str) -> frozenset[str]:
        """The speakers of this namespace that ``query`` names (see :func:`named_speakers`)."""
        return named_speakers(query, self._speaker_turns)

    def positions(self, ids: Iterable[str]) -> dict[str, TurnPosition]:
        """The positions of those ``ids`` that have one."""
        return {i: self._position[i] for i in ids if i in self._position}

    @property
    def doc_at(self) -> Mapping[tuple[str, int], str]:
        """The document at each ``(session, index)``, kept current (read under :attr:`lock`)."""
        return self._at

    def ids_at(self, positions: Iterable[TurnPosition]) -> dict[str, TurnPosition]:
        """The documents at ``positions`` (those that exist), with their positions."""
        found = ((self._at.get((p.session, p.index)), p) for p in positions)
        return {doc_id: p for doc_id, p in found if doc_id is not None}

    def _forget_turn(self, doc_id: str) -> None:
        speakers = self._speakers.pop(doc_id, None)
        if speakers:
            self._speaker_turns.subtract(speakers)
            for name in speakers:
                if self._speaker_turns[name] <= 0:
                    del self._speaker_turns[name]
        old = self._position.pop(doc_id, None)
        if old is not None and self._at.get((old.session, old.index)) == doc_id:
            del self._at[(old.session, old.index)]


def document_date(metadata: Mapping[str, Any], /) -> date | None:
    """The day a document was said on (UTC), from its ``timestamp`` metadata, if it has one."""
    stamp = metadata.get(TIMESTAMP_KEY)
    if not isinstance(stamp, int | float) or isinstance(stamp, bool):
        return None
    try:
        return datetime.fromtimestamp(stamp, tz=UTC).date()
    except (OverflowError, OSError, ValueError):
        return None


_indexes: OrderedDict[tuple[Any, ...], NamespaceIndex] = OrderedDict()
_indexes_lock = threading.Lock()


def namespace_indexes(target: str, namespace: str) -> list[NamespaceIndex]:
    """The process's indexes of a namespace (one per way of reading it)."""
    with _indexes_lock:
        return [index for key, index in _indexes.items() if key[:2] == (target, namespace)]


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
