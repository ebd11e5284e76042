"""The default vector backend: Chroma, an outbox in front of it, hybrid recall beside it.

Writes go to the outbox first (:mod:`~memories.stores.vector.outbox`), so a store that
is down loses nothing; with ``write="background"`` the process's writer
(:mod:`~memories.stores.vector.writes`) takes them to Chroma (docs/memories/vector.md).
A search fuses Chroma's nearest neighbours with the SQL recall index beside the outbox.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import KW_ONLY, dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memories.errors import BackendError, BackendUnavailableError
from memories.kernel.accounting import carried
from memories.kernel.background import BackgroundWork, describe_error
from memories.kernel.steps import Steps, blocking_twin, run, step
from memories.stores.compaction import Compaction, chroma_compaction, compactions
from memories.stores.expiry import ExpiryLedger
from memories.stores.recall.types import ScoredId, best_first
from memories.stores.vector.backend import VectorQuery
from memories.stores.vector.embedded import Embeddable, document_vectors
from memories.stores.vector.filters import NAMESPACE_KEY, check_filter
from memories.stores.vector.outbox import DeadLetter, Outbox, OutboxRow, unnumbered
from memories.stores.vector.pending import PendingDocuments
from memories.stores.vector.recall_backend import RecallBackend
from memories.stores.vector.recall_index import SESSION_KEY, SPEAKERS_KEY, RecallIndex
from memories.stores.vector.records import SearchResult
from memories.stores.vector.writes import (
    EXIT_FLUSH_SECONDS,
    VectorStatus,
    WriteLane,
    WriteMode,
    background_writer,
    progress_bar,
    write_lane,
)

if TYPE_CHECKING:
    from memories.integrations.chroma import ChromaStore

__all__ = ["SPEAKERS_KEY", "ChromaBackend"]

logger = logging.getLogger(__name__)

_DRAIN_BATCH = 256
# Turns of a namespace that background mode lets wait; past this, saves write in the
# caller's thread: a writer that falls behind slows saves down, the queue does not grow.
_MAX_QUEUED = 256
# While turns come faster, the writer embeds each at once but writes them to Chroma
# together, at most once per interval (seconds; why: docs/memories/vector.md). 1 s was no
# faster at 10,000 turns (2.46x and 2.22x the floor, against 2.40x) and shows bursts later.
_WRITE_INTERVAL = 0.25
# How long a search waits for the writer to embed a queued turn before doing it itself.
_EMBED_WAIT_SECONDS = 30.0
# Failures that say the store or the network is down, not that a document is bad.
_OUTAGES = (BackendUnavailableError, OSError)


@dataclass(eq=False)
class ChromaBackend(RecallBackend):
    """One namespace of a Chroma store, written through an outbox, searched by hybrid recall.

    Args:
        store: the Chroma store adapter.
        write: ``"background"`` or ``"sync"`` (docs/memories/vector.md).
        outbox: where writes wait until the store has them.
        namespace, session_id, embedder, recall, k: as :class:`RecallBackend` says.
    """

    store: ChromaStore
    _: KW_ONLY
    write: WriteMode
    outbox: Outbox

    def __post_init__(self) -> None:
        self.location = self.store.location
        former = self.store.former_target
        if former is not None:  # rows an earlier version filed under the folder's path
            self.outbox.adopt(former, self.store.target)
        self._writer = BackgroundWork(
            self._drain_key, self._write_queued, scheduler=background_writer()
        )

    @property
    def _pending(self) -> PendingDocuments:
        return self._lane.pending

    @property
    def _index(self) -> RecallIndex:
        return self.outbox.recall

    @property
    def _target(self) -> str:
        return self.store.target

    @cached_property
    def _lane(self) -> WriteLane:
        return write_lane(self.store.target, self._key, self.outbox.where)

    @property
    def _drain_key(self) -> tuple[str, str, str, str]:
        # The outbox too: copies of a folder are one store (one target), each with its own queue.
        return ("vector", self.store.target, self._key, self.outbox.where)

    # -- the protocol ---------------------------------------------------------------

    def save(self, row: OutboxRow) -> None:
        """Queue a turn for the background writer, or write it now (numbered in its session)."""
        row = unnumbered(row)
        if self._queue(row):
            self._writer.schedule()
            return
        self._put([row])
        self._drain()

    def add(self, rows: Sequence[OutboxRow], *, progress: bool) -> None:
        """Write the documents now, in batches."""
        self._put(rows)
        self._drain(progress=len(rows) if progress else None)

    def _preparing(self, query: VectorQuery) -> Steps[None]:
        # Turns saved before the search are found even while still queued.
        yield step(self._catch_up, query)
        if self.recall.uses_dense:
            yield step(self._embed_pending)

    def find(self, where: Mapping[str, Any]) -> list[SearchResult]:
        """Write what is queued, then read the documents matching ``where``."""
        self._drain()
        return self.get(self._passing(None, where))

    def documents(self) -> list[SearchResult]:
        """Write what is queued, then read every document of the namespace from the store."""
        self.flush()
        return self.stored()

    def stored(self) -> list[SearchResult]:
        """Every document of the namespace in the store, read as it is (the queue stays)."""
        records = self.store.get(self._key)
        return [SearchResult(r.text, dict(r.metadata), 0.0, r.id) for r in records]

    def count(self) -> int:
        """Documents in the store, and those still waiting in the outbox (the index has both)."""
        return self.outbox.recall.count(self._space)

    def namespaces(self) -> dict[str, int | None]:
        """The store's namespaces: those indexed for recall, with their counts, from SQL.

        An older version's collection not used since (not indexed) is listed too, uncounted.
        """
        found: dict[str, int | None] = dict(self.outbox.recall.namespaces(self.store.target))
        for namespace in self.store.namespaces(shards=False):
            found.setdefault(namespace, None)
        return {namespace: n for namespace, n in sorted(found.items()) if n != 0}

    def vectors(self, ids: Sequence[str]) -> dict[str, list[float]]:
        """Stored embeddings from the store; a document still queued is embedded now."""
        found = self.store.vectors(self._key, ids)
        missing = self.get([i for i in ids if i not in found])
        if missing:
            embedded = run(document_vectors(self.embedder, [(r.text, r.metadata) for r in missing]))
            found.update(zip([r.id for r in missing], embedded, strict=True))
        return found

    def delete(self, ids: Sequence[str] | None, where: Mapping[str, Any] | None) -> None:
        """Write what is queued, then delete by id and/or filter, from the store and the index,
        then their expiry rows (after: Chroma is not in their transaction)."""
        self._drain()
        if where is not None:
            ids = self._passing(ids, where)
        if ids:
            self._delete(ids)
            self._discard_expiry(self.namespace, ids)

    def delete_expired(
        self, namespace: tuple[str, ...], ids: Sequence[str], expiry: ExpiryLedger, *, now: float
    ) -> list[str]:
        """:meth:`VectorBackend.delete_expired`, the index rows in the expiry rows' transaction.

        On its connection, when the expiry rows share the outbox's database (another
        would wait for its lock); what is queued is written first, and no drain runs.
        """
        self._drain()
        shared = self.outbox.database if expiry.database.shares(self.outbox.database) else None
        with (
            self._lane.lock,
            expiry.sweeping(namespace, ids, expired_at=now, database=shared) as held,
        ):
            if held:
                self._delete(held)
        return held

    def forget_session(self) -> None:
        """Write what is queued, then delete the session's documents, then their expiry rows."""
        self.flush()
        self._discard_expiry(self.namespace, self._delete_session(scrub=False))

    def _delete_session(self, *, scrub: bool) -> list[str]:
        """Delete the session's stored documents (``scrub``: and Chroma's log copies) and index
        rows; return their ids when expiry rows are kept (a deletion discards those)."""
        mine = {SESSION_KEY: self.session_id}
        gone = [] if self.expiry is None else self._passing(None, mine)
        self.store.delete(self._key, where=mine)
        if scrub:
            self.store.scrub_log(self._key, where=mine)
        self.outbox.unindex(self.store.target, self._key, session=self.session_id)
        return gone

    def erase_namespace(self) -> None:
        """Delete every document of the namespace, queued ones too, and blank Chroma's log
        copies of them (:meth:`~memories.integrations.chroma.ChromaStore.scrub_log`)."""
        target, namespace = self.store.target, self._key
        self._writer.cancel()
        with self._lane.lock:  # not while a drain writes what is being deleted
            self.outbox.clear(target, namespace)
            self._pending.forget()
            self.store.delete(namespace)
            self.store.scrub_log(namespace)
            self._lane.succeeded()
        self._discard_expiry(self.namespace, None)

    def held(self, *, session: bool) -> dict[str, int]:
        """The namespace's (or the session's) documents in Chroma, outbox rows, dead letters
        and recall index rows."""
        target, namespace = self.store.target, self._key
        mine = self.session_id if session else None
        where = None if mine is None else {SESSION_KEY: mine}
        stored = self.store.count(namespace) if where is None else len(self._passing(None, where))
        logged = self.store.logged(namespace, where=where)
        held = {"Chroma documents": stored, "Chroma log rows": logged}
        return held | self.outbox.held(target, namespace, session=mine)

    def erase_session(self) -> None:
        """Delete the session's documents, queued and set-aside ones too (never written now)."""
        self._writer.cancel()
        with self._lane.lock:  # not while a drain writes what is being deleted
            gone = self.outbox.erase_session(self.store.target, self._key, self.session_id)
            self._pending.forget(gone)
            stored = self._delete_session(scrub=True)
        self._discard_expiry(self.namespace, [*gone, *stored])

    def compactions(self) -> tuple[Compaction, ...]:
        """Chroma's own SQLite file (the documents, their metadata, full text and log), the
        outbox's database (queued rows, dead letters, the recall index) and the expiry rows'."""
        from memories.integrations.chroma.parts import CHROMA_FILE

        store = self.store
        expiry = None if self.expiry is None else self.expiry.database
        found = compactions(self.outbox.database, expiry)
        if store.mode != "persistent":
            return found
        return (chroma_compaction(Path(store.path) / CHROMA_FILE), *found)

    def check_filter(self, where: Mapping[str, Any]) -> None:
        """Chroma's ``where`` syntax; the namespace key is the memory's own."""
        check_filter(where)

    def flush(self, *, timeout: float | None = None) -> bool:
        """Write every queued document now, after the background write under way (bounded)."""
        self._writer.cancel()
        return self._drain(timeout=timeout) is not None and self.pending() == 0

    def close(self, *, timeout: float | None = None) -> bool:
        """:meth:`flush` for at most ``timeout`` seconds (default :data:`EXIT_FLUSH_SECONDS`).

        Later saves write synchronously. Nothing is raised: what could not be written
        is logged once, with the outbox it waits in.
        """
        self._writer.closed = True
        limit = EXIT_FLUSH_SECONDS if timeout is None else timeout
        try:
            if self.flush(timeout=limit):
                return True
            why = f"a write was still under way after {limit:g} s.{self._waiting()}"
        except Exception as exc:  # closing reports, it does not raise
            why = describe_error(exc)
            if not isinstance(exc, BackendError):  # it has said where they wait
                why += self._waiting()
        logger.warning("Closed the memory of namespace %r unfinished: %s", self.namespace, why)
        return False

    def pending(self) -> int:
        """How many documents of the namespace wait in the outbox (queued or failed)."""
        return self.outbox.counts(self.store.target, self._key)[0]

    def status(self) -> VectorStatus:
        """The write mode, the documents waiting, and the last failed write if none worked since."""
        lane = self._lane
        pending, dead = self.outbox.counts(self.store.target, self._key)
        return VectorStatus(
            pending=pending,
            failures=0 if lane.error is None else 1,
            last_error=lane.last_error,
            background=self._writer.status() if self.write == "background" else None,
            write=self.write,
            failed_at=lane.failed_at,
            dead_letters=dead,
        )

    # -- writing --------------------------------------------------------------------

    def _queue(self, row: OutboxRow) -> bool:
        """In background mode, queue the turn (numbered and indexed) and hold it as pending.

        False (nothing done) when it should be written now: in sync mode, after
        :meth:`close`, before a write has worked in this process (so that the first
        save reports a broken store or embedder), after a failed write (so that it
        is raised), or when too many turns wait.
        """
        if self.write != "background" or self._writer.closed or self._lane.error is not None:
            return False
        if not self._lane.proven:
            return False
        if len(self._pending) >= _MAX_QUEUED:
            return False
        self._put([row])
        return True

    def _put(self, rows: Sequence[OutboxRow]) -> None:
        """Queue rows in the outbox (numbered and indexed there), and hold them as pending.

        With the store down (the namespace's index not made yet), they are queued
        unnumbered and unindexed: the index, once made, numbers and indexes them.
        """
        try:
            self._space  # noqa: B018
        except _OUTAGES as exc:
            logger.debug("Queued without indexing: %s", describe_error(exc))
        queued = self.outbox.put(self.store.target, self._key, rows)
        self._pending.add(_documents(queued, self._key))

    def _write_queued(self) -> None:
        """The background writer's job: write what waits, or embed it now and write it soon.

        Put off (:data:`_WRITE_INTERVAL`) only after a recent write that went well.
        """
        wait = self._lane.wrote_at + _WRITE_INTERVAL - time.monotonic()
        if wait > 0 and self._lane.error is None and not self._writer.closed:
            try:
                self._embed_pending()
            except Exception:  # the drain below records it, and sets a bad turn aside
                pass
            else:
                # Carried on, as the first run was: its calls are the saving operation's.
                again = carried(self._write_queued)
                background_writer().schedule(self._drain_key, again, delay=wait, max_wait=wait)
                return
        self._drain()

    def _drain(self, *, progress: int | None = None, timeout: float | None = None) -> int | None:
        """Write queued documents to the store, oldest first; return how many (None: another
        drain of the namespace held on for over ``timeout`` seconds)."""
        target, namespace, lane = self.store.target, self._key, self._lane
        written = 0
        if not lane.lock.acquire(timeout=-1 if timeout is None else timeout):
            return None
        try:
            with progress_bar(progress) as advance:
                try:
                    self._space  # noqa: B018  (made now if the store was down before: it numbers the queue)
                    while rows := self.outbox.pending(target, namespace, limit=_DRAIN_BATCH):
                        self._write_or_set_aside(rows)
                        written += len(rows)
                        advance(len(rows))
                except Exception as exc:
                    lane.failed(exc)
                    raise
            lane.succeeded(wrote=written > 0)
        except BackendError as exc:
            raise type(exc)(f"{exc}{self._waiting()}") from exc
        finally:
            lane.lock.release()
        return written

    def _waiting(self) -> str:
        """What waits in the outbox, and where, for a message ("" when the outbox is unreadable)."""
        try:
            waiting = self.pending()
        except BackendError:  # the outbox itself is gone: its own error says so
            return ""
        return (
            f" {waiting} document(s) of namespace {self.namespace!r} wait in the outbox "
            f"({self.outbox.where}); they are written by the next call that reaches the "
            "store, or by flush()."
        )

    def _write_or_set_aside(self, rows: Sequence[OutboxRow]) -> None:
        """Write a batch; documents refused while others of it go through are set aside.

        An outage raises, and everything waits. Another failure is retried a
        document at a time: those that still fail while others are written are
        their own fault (Chroma refuses the metadata, an embedder the length) and
        go to :meth:`dead_letters`; when all fail, the error is raised.
        """
        try:
            self._write_rows(rows)
            return
        except _OUTAGES:
            raise
        except Exception as exc:
            if len(rows) == 1:
                raise
            first = exc
        refused = []
        for row in rows:
            try:
                self._write_rows([row])
            except _OUTAGES:
                raise
            except Exception as exc:
                refused.append((row, describe_error(exc)))
        if len(refused) == len(rows):
            raise first
        if refused:
            self._set_aside(refused)

    def _set_aside(self, refused: list[tuple[OutboxRow, str]]) -> None:
        self.outbox.bury(self.store.target, self._key, refused)
        self._pending.forget([row.doc_id for row, _ in refused])
        logger.warning(
            "%d document(s) of namespace %r were refused (%s) and set aside; the others were "
            "written. memory.dead_letters() or `memories dead-letters --config ...` lists them; "
            "retry_dead_letters() or `--retry` queues them again.",
            len(refused),
            self.namespace,
            refused[0][1],
        )

    def dead_letters(self) -> list[DeadLetter]:
        """The documents set aside, oldest first, each with its error."""
        return self.outbox.dead_letters(self.store.target, self._key)

    def retry_dead_letters(self, ids: Sequence[str] | None = None) -> int:
        """Queue set-aside documents again (all, or ``ids``) and write them now; return how many."""
        revived = self.outbox.revive(self.store.target, self._key, ids)
        if revived:
            self._drain()
        return revived

    def _write_rows(self, rows: Sequence[OutboxRow]) -> None:
        """Embed and store one batch of outbox rows (under the lane's lock), then forget them.

        Pending meanwhile, so that searches find them; a search's embeddings are reused.
        """
        target, namespace, pending = self.store.target, self._key, self._pending
        documents = _documents(rows, namespace)
        ids = [row.doc_id for row in rows]
        with pending.lock:
            pending.add(documents)
            vectors: dict[str, list[float]] = pending.claim(ids)
        todo = [row for row in rows if row.doc_id not in vectors]
        if todo:
            todo_ids = [row.doc_id for row in todo]
            embedded = self._embed_claimed(todo_ids, [(row.text, row.metadata) for row in todo])
            vectors.update(zip(todo_ids, embedded, strict=True))
        self._write(rows, [vectors[i] for i in ids])
        pending.stored(documents)
        self.outbox.remove(target, namespace, rows)

    def _write(self, rows: Sequence[OutboxRow], vectors: list[list[float]]) -> None:
        # New ids go in with Chroma's cheaper add.
        for flag, chosen, embeddings in self._by_replace(rows, vectors):
            self.store.upsert(
                self._key,
                ids=[row.doc_id for row in chosen],
                texts=[row.text for row in chosen],
                embeddings=embeddings,
                metadatas=[row.metadata for row in chosen],
                replace=flag,
            )

    def _delete(self, ids: Sequence[str]) -> None:
        """Delete documents from the store, then from the index (a search skips what is gone)."""
        self.store.delete(self._key, ids=ids)
        self.outbox.unindex(self.store.target, self._key, ids=ids)

    # -- reading --------------------------------------------------------------------

    def _catch_up(self, request: VectorQuery) -> None:
        """Before a search: write what waits, where the search needs it written.

        Always in sync mode; in background mode after a failed write (retried) or
        for a filter (Chroma evaluates it): otherwise the index holds queued turns.
        """
        if self.write == "sync" or self._lane.error is not None or request.where is not None:
            self._drain()

    def _embed_pending(self) -> None:
        """Embed every pending document before a dense search (the writer reuses them).

        Those a writer is embedding are waited for, up to :data:`_EMBED_WAIT_SECONDS`.
        """
        pending = self._pending
        with pending.lock:
            claimed, free = pending.unembedded()
            deadline = time.monotonic() + _EMBED_WAIT_SECONDS
            while claimed and (left := deadline - time.monotonic()) > 0:
                pending.changed.wait(left)
                busy, free = pending.unembedded()
                claimed &= busy
            free = [*free, *claimed]
            if not free:
                return
            pending.claim(free)
            held = {i: (d.text, d.metadata) for i in free if (d := pending.get(i)) is not None}
        self._embed_claimed(list(held), list(held.values()))

    def _embed_claimed(self, ids: list[str], documents: list[Embeddable]) -> list[list[float]]:
        """Embed documents claimed in the index; publish the vectors, or release them on failure."""
        try:
            vectors = run(document_vectors(self.embedder, documents))
        except Exception:
            self._pending.release(ids)
            raise
        self._pending.publish(ids, vectors)
        return vectors

    def _candidates(self, limit: int) -> int:
        # Candidates past the namespace's size change nothing; none: no search at all.
        return min(super()._candidates(limit), self._index.count(self._space))

    def _nearest(
        self, vector: Sequence[float], n: int, where: Mapping[str, Any] | None
    ) -> list[ScoredId]:
        # The pending documents first: one the writer stores (and drops from them)
        # after this read, the store's read below finds.
        queued = self._pending.nearest(vector, n=n) if where is None else []
        stored = self.store.nearest(self._key, vector, n=n, where=where)
        return best_first({s.id: s.score for s in [*queued, *stored]}, n)  # the store's wins

    def _passing(self, ids: Sequence[str] | None, where: Mapping[str, Any]) -> list[str]:
        """The stored documents (of ``ids``, if given) passing ``where``; a queued one does not."""
        return [r.id for r in self.store.get(self._key, ids=ids, where=where, text=False)]

    def _results(
        self, ranked: Sequence[ScoredId], *, embeddings_for: set[str]
    ) -> tuple[list[SearchResult], dict[str, list[float]]]:
        """The records of the ranked ids: pending ones from the index, the rest from the store
        (with the embeddings of those in ``embeddings_for``, in the same read)."""
        held = {s.id: d for s in ranked if (d := self._pending.get(s.id)) is not None}
        known = {i: (d.text, dict(d.metadata)) for i, d in held.items()}
        missing = [s.id for s in ranked if s.id not in known]
        fetched: dict[str, list[float]] = {}
        with_embeddings = not embeddings_for.isdisjoint(missing)
        for record in self.store.get(self._key, ids=missing, embeddings=with_embeddings):
            known[record.id] = (record.text, record.metadata)
            if record.id in embeddings_for and record.embedding is not None:
                fetched[record.id] = record.embedding
        # Queued by another process and not written yet: its text is in the outbox.
        unwritten = [i for i in missing if i not in known]
        for row in self.outbox.queued(self.store.target, self._key, unwritten):
            known[row.doc_id] = (row.text, {**row.metadata, NAMESPACE_KEY: self._key})
        results = [
            SearchResult(known[s.id][0], known[s.id][1], s.score, s.id)
            for s in ranked
            if s.id in known
        ]
        return results, fetched

    _acatch_up = blocking_twin(_catch_up)
    _aembed_pending = blocking_twin(_embed_pending)


def _documents(rows: Sequence[OutboxRow], namespace: str) -> list[tuple[str, str, dict[str, Any]]]:
    """Outbox rows as ``(id, text, metadata)``, the metadata as the store returns it."""
    return [(row.doc_id, row.text, {**row.metadata, NAMESPACE_KEY: namespace}) for row in rows]
