"""``VectorMemory``: every turn a document in Chroma, recalled by hybrid search.

Each ``save_context`` stores the turn as one document, ``"input: ...\\noutput: ..."``
as LangChain's ``VectorStoreRetrieverMemory`` writes it, with metadata:
namespace, session, turn index, timestamp, speakers, and whatever the caller
adds. ``load_memory_variables`` searches with the chain's input and joins the
top ``k`` texts with newlines, as LangChain does (or returns ``Document``
objects with ``return_docs=True``).

Search is hybrid by default (see :class:`memories.recall.RecallConfig`):
Chroma's nearest neighbours and a BM25 ranking kept in the process (see
:mod:`memories.vector.index`) are fused, then each turn borrows score from the
turns next to it.

Writes go through an outbox (:mod:`memories.vector.outbox`) first, so a store
that is down loses nothing. With ``write="background"`` (the default)
``save_context`` returns once the turn is in the outbox and searchable in
this process; a background thread embeds it and writes it to Chroma (see
:mod:`memories.vector.writes`). With ``write="sync"`` it returns once Chroma
has it. Either way a failure to write is raised as
:class:`~memories.errors.BackendUnavailableError` (or the embedder's error)
-- in background mode by the next call that needs the store, or by
:meth:`VectorMemory.flush` -- and the turn waits in the outbox until a
later call or ``flush()`` writes it.
"""

from __future__ import annotations

import asyncio
import importlib
import os
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from functools import cached_property
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.messages import HumanMessage
from pydantic import Field, PrivateAttr, field_validator

from memories.base import BaseMemory
from memories.errors import BackendError, ConfigError, InvalidInputError
from memories.kernel.capabilities import Capabilities
from memories.keys import select_input_key, select_output_key
from memories.messages import check_storable, message_text, turn_messages
from memories.namespaces import as_namespace, namespace_key
from memories.recall import RecallConfig, ScoredId, neighbour_positions, rank_candidates
from memories.vector.filters import (
    NAMESPACE_KEY,
    check_filter,
    check_metadata,
)
from memories.vector.index import (
    SESSION_KEY,
    TIMESTAMP_KEY,
    TURN_KEY,
    NamespaceIndex,
    namespace_indexes,
)
from memories.vector.outbox import MemoryOutbox, OutboxRow, SQLiteOutbox
from memories.vector.records import SearchResult
from memories.vector.writes import (
    VectorStatus,
    WriteLane,
    WriteMode,
    background_writer,
    write_lane,
)

if TYPE_CHECKING:
    from memories.integrations.chroma import ChromaStore

__all__ = ["VectorMemory", "default_embeddings"]

SPEAKERS_KEY = "speakers"
_DRAIN_BATCH = 256
# Turns of a namespace that background mode lets wait; past this, a save
# writes in the caller's thread, so a writer that falls behind slows saves
# down instead of letting the queue grow.
_MAX_QUEUED = 256
# How long a search waits for the writer to embed a queued turn before doing it itself.
_EMBED_WAIT_SECONDS = 30.0
_PROGRESS_FROM = 1_000
_OUTBOX_FILE = "memories-outbox.db"

Outbox = SQLiteOutbox | MemoryOutbox


@dataclass(frozen=True)
class _Query:
    """A validated search request."""

    text: str
    k: int
    where: dict[str, Any] | None


class VectorMemory(BaseMemory):
    """Conversation turns in a Chroma vector store, recalled by relevance to the input.

    Args:
        mode: ``"persistent"`` (embedded Chroma in ``path``, the default),
            ``"memory"`` (in this process only; shared by the process's
            in-memory memories) or ``"http"`` (a server started with ``chroma run``).
        path: the folder of the persistent store.
        host: the Chroma server's host in ``"http"`` mode.
        port: the Chroma server's port in ``"http"`` mode.
        ssl: reach the server over HTTPS.
        timeout: the longest one request to the server may take, in seconds
            ("http" mode); a hung server then raises BackendUnavailableError.
        collection: prefix of the Chroma collections (one per namespace).
        namespace: whose memory this is, e.g. ``("user-42", "chat")``. A memory
            only ever reads, searches and deletes its own namespace.
        session_id: the conversation new turns belong to; turns are numbered
            within it, and neighbour smoothing follows that order.
        k: how many documents ``load_memory_variables`` and ``search`` return.
        recall: how documents are ranked (a :class:`~memories.recall.RecallConfig`
            or a dict of its fields); the default is the best measured on LoCoMo.
        embeddings: any LangChain ``Embeddings``, or ``"module:attr"`` naming a
            class to build; default: offline MiniLM with int8 activations
            (see :func:`default_embeddings`).
        write: ``"background"`` (default): ``save_context`` returns once the turn is in
            the outbox, and a background thread embeds and stores it; searches see it
            at once. ``"sync"``: ``save_context`` returns once Chroma has the turn.
            See :meth:`save_context` for how failures surface in each mode.
        outbox: SQLite file where writes wait until the store has them; default:
            ``memories-outbox.db`` inside ``path`` (persistent mode) or in the
            working directory (http mode); in-process for ``"memory"`` mode.
        metadata: metadata added to every document this memory saves.
        memory_key: the prompt variable this memory fills.
        input_key: the chain input to store and search with; by default the
            only input that is not a memory variable.
        output_key: the chain output to store; by default the only one, or ``"output"``.
        return_docs: give LangChain ``Document`` objects instead of one string.
    """

    config_type: ClassVar[str] = "vector"
    capabilities: ClassVar[Capabilities] = Capabilities(
        scope="namespace", searchable=True, exportable=True, deferred=True
    )

    mode: Literal["persistent", "memory", "http"] = "persistent"
    path: str = "memories-chroma"
    host: str = "localhost"
    port: int = 8000
    ssl: bool = False
    timeout: float = Field(default=30.0, gt=0)
    collection: str = "memories"
    namespace: tuple[str, ...] = ("default",)
    session_id: str = "default"
    k: int = Field(default=4, ge=1)
    recall: RecallConfig = Field(default_factory=RecallConfig)
    embeddings: Embeddings | str | None = None
    write: WriteMode = "background"
    outbox: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    memory_key: str = "history"
    input_key: str | None = None
    output_key: str | None = None
    return_docs: bool = False

    _closed: bool = PrivateAttr(default=False)

    @field_validator("namespace", mode="before")
    @classmethod
    def _as_namespace(cls, value: Any) -> tuple[str, ...]:
        return as_namespace(value)

    @field_validator("write", mode="before")
    @classmethod
    def _check_write(cls, value: Any) -> Any:
        if value not in ("sync", "background"):
            raise ConfigError(f"write must be 'sync' or 'background', got {value!r}.")
        return value

    @field_validator("recall", mode="before")
    @classmethod
    def _as_recall(cls, value: Any) -> RecallConfig:
        if isinstance(value, RecallConfig):
            return value
        if isinstance(value, Mapping):
            return RecallConfig.from_dict(dict(value))
        raise ConfigError(f"recall must be a RecallConfig or a dict of its fields, got {value!r}")

    @field_validator("metadata", mode="before")
    @classmethod
    def _check_metadata(cls, value: Any) -> dict[str, Any]:
        return check_metadata(value, what="metadata")

    # -- configuration --------------------------------------------------------------

    def _config_value(self, name: str, value: Any) -> Any:
        if isinstance(value, RecallConfig):
            defaults = RecallConfig()
            return {
                f.name: getattr(value, f.name)
                for f in fields(value)
                if getattr(value, f.name) != getattr(defaults, f.name)
            }
        if name == "metadata":
            return dict(value)
        return super()._config_value(name, value)

    # -- what the memory is made of (rebuilt when the configuration changes) --------

    @cached_property
    def _namespace_key(self) -> str:
        return namespace_key(self.namespace)

    @cached_property
    def _embedder(self) -> Embeddings:
        if self.embeddings is None:
            return default_embeddings()
        if isinstance(self.embeddings, Embeddings):
            return self.embeddings
        return _build_embeddings(self.embeddings)

    @cached_property
    def store(self) -> ChromaStore:
        """The Chroma store adapter (opened lazily, on the first call that needs it)."""
        from memories.integrations.chroma import ChromaStore

        return ChromaStore(
            mode=self.mode,
            path=self.path,
            host=self.host,
            port=self.port,
            ssl=self.ssl,
            collection=self.collection,
            embeddings=self._embedder,
            timeout=self.timeout,
        )

    @cached_property
    def _outbox(self) -> Outbox:
        if self.outbox is not None:
            return _sqlite_outbox(self.outbox)
        if self.mode == "memory":
            return _MEMORY_OUTBOX
        if self.mode == "persistent":
            os.makedirs(self.path, exist_ok=True)
            return _sqlite_outbox(os.path.join(self.path, _OUTBOX_FILE))
        return _sqlite_outbox(_OUTBOX_FILE)

    @cached_property
    def _index(self) -> NamespaceIndex:
        from memories.vector.index import shared_index

        return shared_index(self.store.target, self._namespace_key, self.recall)

    @cached_property
    def _lane(self) -> WriteLane:
        return write_lane(self.store.target, self._namespace_key)

    @property
    def _drain_key(self) -> tuple[str, str, str]:
        return ("vector", self.store.target, self._namespace_key)

    # -- LangChain's interface ------------------------------------------------------

    @property
    def memory_variables(self) -> list[str]:
        """The prompt variables this memory fills: ``[memory_key]``."""
        return [self.memory_key]

    def save_context(
        self,
        inputs: dict[str, Any],
        outputs: dict[str, Any],
        *,
        metadata: Mapping[str, Any] | None = None,
    ) -> None:
        """Store the run's input and output as one document.

        Args:
            inputs: the chain's inputs.
            outputs: the chain's outputs.
            metadata: extra metadata for this document.

        With ``write="background"`` the turn is queued in the outbox, indexed
        for search in this process, and written to Chroma by a background
        thread. A background write that fails is logged, shown by
        :meth:`status` and raised by the next call that needs the store
        (``save_context``, ``search``, ``flush``...), which first retries it;
        until a write succeeds again, saves write synchronously.

        Raises:
            InvalidInputError: the turn cannot be stored; nothing was written.
            BackendUnavailableError: the store cannot be reached (now, or by the
                last background write); the turn waits in the outbox and is
                written by the next call that reaches the store, or by ``flush()``.
        """
        self._save(self._turn_row(inputs, outputs, metadata))

    async def asave_context(
        self,
        inputs: dict[str, Any],
        outputs: dict[str, Any],
        *,
        metadata: Mapping[str, Any] | None = None,
    ) -> None:
        """Async :meth:`save_context`: the same work, off the event loop."""
        row = self._turn_row(inputs, outputs, metadata)
        await asyncio.to_thread(self._save, row)

    def load_memory_variables(self, inputs: dict[str, Any]) -> dict[str, Any]:
        """``{memory_key: text}``: the top ``k`` documents for the input, joined by newlines.

        With ``return_docs=True`` the value is a list of LangChain ``Document``.
        """
        return self._variables(self.search(self._query_text(inputs), k=self.k))

    async def aload_memory_variables(self, inputs: dict[str, Any]) -> dict[str, Any]:
        """Async :meth:`load_memory_variables`."""
        return self._variables(await self.asearch(self._query_text(inputs), k=self.k))

    def clear(self) -> None:
        """Delete the documents this memory's session wrote (queued ones are written first).

        Other sessions' documents in the namespace stay: a "new chat" that
        clears its memory must not erase a user's long-term memory. To erase
        the whole namespace, call :meth:`erase_namespace`.

        Raises:
            BackendUnavailableError: the store cannot be reached (nothing is deleted).
        """
        self.flush()
        self._delete(None, {SESSION_KEY: self.session_id})

    async def aclear(self) -> None:
        """Async :meth:`clear`."""
        await asyncio.to_thread(self.clear)

    def erase_namespace(self) -> None:
        """Delete every document of this memory's namespace, every session's, queued ones too."""
        target, namespace = self.store.target, self._namespace_key
        background_writer().cancel(self._drain_key)
        with self._lane.lock:  # not while a drain writes what is being deleted
            self._outbox.clear(target, namespace)
            for index in namespace_indexes(target, namespace):
                with index.lock:
                    index.drop_pending()
            self._delete(None, None)
            self._lane.succeeded()

    async def aerase_namespace(self) -> None:
        """Async :meth:`erase_namespace`."""
        await asyncio.to_thread(self.erase_namespace)

    # -- the vector memory's own API ------------------------------------------------

    def search(
        self, query: str, /, *, k: int | None = None, filter: Mapping[str, Any] | None = None
    ) -> list[SearchResult]:
        """The ``k`` documents of this namespace that best match ``query``, best first.

        Args:
            query: the text to match.
            k: how many to return; default ``self.k``.
            filter: a Chroma ``where`` clause on metadata, e.g.
                ``{"session": "s1"}`` or ``{"$and": [...]}``. It may not name
                ``"namespace"``: the namespace is always this memory's.

        Turns saved before the call are found even while the background
        writer still has them; a filtered search writes them first (Chroma
        evaluates the filter).
        """
        request = self._request(query, k, filter)
        self._catch_up(request)
        vector = None
        if self.recall.uses_dense:
            vector = self._embedder.embed_query(request.text)
            self._embed_pending()
        return self._search(request, vector)

    async def asearch(
        self, query: str, /, *, k: int | None = None, filter: Mapping[str, Any] | None = None
    ) -> list[SearchResult]:
        """Async :meth:`search`."""
        request = self._request(query, k, filter)
        await asyncio.to_thread(self._catch_up, request)
        vector = None
        if self.recall.uses_dense:
            vector = await self._embedder.aembed_query(request.text)
            await asyncio.to_thread(self._embed_pending)
        return await asyncio.to_thread(self._search, request, vector)

    def add(
        self,
        texts: Sequence[str],
        /,
        *,
        metadatas: Sequence[Mapping[str, Any] | None] | None = None,
        ids: Sequence[str] | None = None,
        progress: bool | None = None,
    ) -> list[str]:
        """Store many documents at once (bulk import), in batches; return their ids.

        A document's metadata may give ``session`` and ``turn`` (its index in
        that session) so that neighbour smoothing knows its place, and
        ``timestamp`` (seconds since the epoch) for when it was said.

        Args:
            texts: the documents.
            metadatas: one dict (or None) per text.
            ids: one id per text; an existing id is replaced. Default: new ids.
            progress: show a progress bar; default: for more than 1,000 texts.
        """
        rows = self._bulk_rows(texts, metadatas, ids)
        self._outbox.put(self.store.target, self._namespace_key, rows)
        show = progress if progress is not None else len(rows) > _PROGRESS_FROM
        self._drain(progress=len(rows) if show else None)
        if ids is not None:
            self._renew_generation()
        return [row.doc_id for row in rows]

    async def aadd(
        self,
        texts: Sequence[str],
        /,
        *,
        metadatas: Sequence[Mapping[str, Any] | None] | None = None,
        ids: Sequence[str] | None = None,
        progress: bool | None = None,
    ) -> list[str]:
        """Async :meth:`add`."""
        return await asyncio.to_thread(
            lambda: self.add(texts, metadatas=metadatas, ids=ids, progress=progress)
        )

    def delete(
        self, ids: Sequence[str] | None = None, /, *, filter: Mapping[str, Any] | None = None
    ) -> None:
        """Delete documents of this namespace by id, by metadata filter, or both (AND).

        Raises:
            InvalidInputError: neither ids nor a filter given (use :meth:`clear`).
        """
        if ids is None and filter is None:
            raise InvalidInputError(
                "delete() needs ids or a filter; to delete everything, call clear()."
            )
        if ids is not None and (isinstance(ids, str) or not all(isinstance(i, str) for i in ids)):
            raise InvalidInputError(f"ids must be a list of strings, got {ids!r:.80}.")
        if filter is not None:
            check_filter(filter)
        self._drain()
        self._delete(ids, filter)

    async def adelete(
        self, ids: Sequence[str] | None = None, /, *, filter: Mapping[str, Any] | None = None
    ) -> None:
        """Async :meth:`delete`."""
        await asyncio.to_thread(lambda: self.delete(ids, filter=filter))

    def flush(self, *, timeout: float | None = None) -> bool:
        """Write every queued document to the store now and wait for it.

        A background write under way is waited for first (at most ``timeout``
        seconds). Call it (or :meth:`close`) before exiting when the last
        turns must be in Chroma; at interpreter exit the background writer
        gets a few seconds, and the outbox keeps anything it did not write.

        Returns:
            True when nothing of this namespace waits in the outbox any more;
            False when a write under way outlasted ``timeout``.

        Raises:
            BackendUnavailableError: the store still cannot be reached.
        """
        background_writer().cancel(self._drain_key)
        return self._drain(timeout=timeout) is not None and self.pending() == 0

    def close(self, *, timeout: float | None = None) -> bool:
        """Write what is queued (as :meth:`flush`); later saves of this object write synchronously.

        The background writer itself keeps serving other memories.
        """
        self._closed = True
        return self.flush(timeout=timeout)

    def pending(self) -> int:
        """How many documents of this namespace wait in the outbox (queued or failed)."""
        return len(self._outbox.pending(self.store.target, self._namespace_key))

    def status(self) -> VectorStatus:
        """The write mode, the documents waiting, and the last failed write if none worked since."""
        lane = self._lane
        return VectorStatus(
            pending=self.pending(),
            failures=0 if lane.error is None else 1,
            last_error=lane.last_error,
            background=background_writer().status() if self.write == "background" else None,
            write=self.write,
            failed_at=lane.failed_at,
        )

    # -- building documents (pure) ----------------------------------------------------

    def _turn_text(self, inputs: Mapping[str, Any], outputs: Mapping[str, Any]) -> str:
        """The document text of one run, validated before anything is written."""
        in_key = select_input_key(inputs, self.memory_variables, self.input_key)
        out_key = select_output_key(outputs, self.output_key, type(self).__name__)
        human, ai = turn_messages(inputs[in_key], outputs[out_key])
        return f"{in_key}: {message_text(human)}\n{out_key}: {message_text(ai)}"

    def check_turn(self, inputs: Any, outputs: Any) -> None:
        """Raise what :meth:`save_context` would raise for this turn, writing nothing."""
        self._turn_row(inputs, outputs, None)

    def _turn_row(
        self,
        inputs: Mapping[str, Any],
        outputs: Mapping[str, Any],
        metadata: Mapping[str, Any] | None,
    ) -> OutboxRow:
        text = self._turn_text(inputs, outputs)
        check_storable([HumanMessage(text)])
        extra = check_metadata(metadata, what="save_context metadata")
        fixed = {SESSION_KEY: self.session_id, TIMESTAMP_KEY: time.time()}
        meta = {**self.metadata, **fixed, SPEAKERS_KEY: ["human", "ai"], **extra}
        meta.pop(TURN_KEY, None)
        return OutboxRow(uuid.uuid4().hex, text, meta, needs_turn=True)

    def _bulk_rows(
        self,
        texts: Sequence[str],
        metadatas: Sequence[Mapping[str, Any] | None] | None,
        ids: Sequence[str] | None,
    ) -> list[OutboxRow]:
        if isinstance(texts, str) or not all(isinstance(t, str) for t in texts):
            raise InvalidInputError(f"texts must be a list of strings, got {texts!r:.80}.")
        count = len(texts)
        if metadatas is not None and len(metadatas) != count:
            raise InvalidInputError(f"Got {len(metadatas)} metadatas for {count} texts.")
        if ids is not None:
            if isinstance(ids, str) or len(ids) != count:
                raise InvalidInputError(f"ids must be a list of {count} strings, got {ids!r:.80}.")
            if not all(isinstance(i, str) and i for i in ids) or len(set(ids)) != count:
                raise InvalidInputError("ids must be distinct non-empty strings.")
        rows = []
        now = time.time()
        for i, text in enumerate(texts):
            given = check_metadata(metadatas[i] if metadatas else None, what=f"metadatas[{i}]")
            turn = given.get(TURN_KEY)
            if turn is not None and (not isinstance(turn, int) or isinstance(turn, bool)):
                raise InvalidInputError(f"metadatas[{i}]['turn'] must be an int, got {turn!r}.")
            meta = {**self.metadata, SESSION_KEY: self.session_id, TIMESTAMP_KEY: now, **given}
            doc_id = ids[i] if ids is not None else uuid.uuid4().hex
            rows.append(OutboxRow(doc_id, text, meta, needs_turn=False, replace=ids is not None))
        return rows

    # -- writing ----------------------------------------------------------------------

    def _save(self, row: OutboxRow) -> None:
        """Queue a turn for the background writer, or write it now."""
        if self._queue(row):
            background_writer().schedule(self._drain_key, self._drain)
            return
        self._outbox.put(self.store.target, self._namespace_key, [row])
        self._drain()

    def _queue(self, row: OutboxRow) -> bool:
        """In background mode, number the turn, put it in the outbox and index it as pending.

        Returns False (nothing done) when the turn should be written now instead:
        in sync mode, after :meth:`close`, while the last write of the
        namespace has failed (so that the failure is raised), before the
        index is loaded (numbering needs it), or when too many turns wait.
        """
        if self.write != "background" or self._closed or self._lane.error is not None:
            return False
        target, namespace, index = self.store.target, self._namespace_key, self._index
        with index.lock:
            if not index.loaded or index.pending_count() >= _MAX_QUEUED:
                return False
            session = str(row.metadata[SESSION_KEY])
            metadata = {**row.metadata, TURN_KEY: index.next_turn(session)}
            queued = OutboxRow(row.doc_id, row.text, metadata, needs_turn=False)
            self._outbox.put(target, namespace, [queued])
            index.add_pending([(row.doc_id, row.text, {**metadata, NAMESPACE_KEY: namespace})])
        return True

    def _drain(self, *, progress: int | None = None, timeout: float | None = None) -> int | None:
        """Write queued documents to the store, oldest first; return how many.

        None when another drain of the namespace held on for over ``timeout`` seconds.
        """
        target, namespace, lane = self.store.target, self._namespace_key, self._lane
        written = 0
        if not lane.lock.acquire(timeout=-1 if timeout is None else timeout):
            return None
        bar = _progress_bar(progress)
        try:
            try:
                while rows := self._outbox.pending(target, namespace, limit=_DRAIN_BATCH):
                    self._write_rows(rows)
                    written += len(rows)
                    if bar is not None:
                        bar.update(len(rows))
            except Exception as exc:
                lane.failed(exc)
                raise
            lane.succeeded()
        except BackendError as exc:
            waiting = len(self._outbox.pending(target, namespace))
            raise type(exc)(
                f"{exc} {waiting} document(s) of namespace {self.namespace!r} wait in the "
                f"outbox ({self._outbox_name()}); they are written by the next call that "
                "reaches the store, or by flush()."
            ) from exc
        finally:
            lane.lock.release()
            if bar is not None:
                bar.close()
        return written

    def _write_rows(self, rows: Sequence[OutboxRow]) -> None:
        """Embed and store one batch of outbox rows (under the lane's lock), then forget them.

        The rows are pending in the index while this runs, so searches see
        them; embeddings a search already computed are reused.
        """
        target, namespace, index = self.store.target, self._namespace_key, self._index
        ids = [row.doc_id for row in rows]
        texts = [row.text for row in rows]
        with index.lock:
            self._ensure_loaded(index)
            metadatas = _number_turns(rows, index)
            stamped = [{**m, NAMESPACE_KEY: namespace} for m in metadatas]
            index.add_pending(zip(ids, texts, stamped, strict=True))
            vectors: dict[str, list[float]] = index.claim(ids)
        todo = [i for i, doc_id in enumerate(ids) if doc_id not in vectors]
        if todo:
            todo_ids = [ids[i] for i in todo]
            try:
                embedded = self._embedder.embed_documents([texts[i] for i in todo])
            except Exception:
                with index.lock:
                    index.release(todo_ids)
                raise
            with index.lock:
                index.publish(todo_ids, embedded)
            vectors.update(zip(todo_ids, embedded, strict=True))
        with index.lock:
            index.writing(ids, now=True)
        try:
            replace = [row.replace for row in rows]
            self._write(ids, texts, [vectors[i] for i in ids], metadatas, replace)
        except Exception:
            with index.lock:
                index.writing(ids, now=False)
            raise
        for each in namespace_indexes(target, namespace):
            with each.lock:
                each.stored(zip(ids, texts, stamped, strict=True))
        self._outbox.remove(target, namespace, ids)

    def _write(
        self,
        ids: list[str],
        texts: list[str],
        vectors: list[list[float]],
        metadatas: list[dict[str, Any]],
        replace: list[bool],
    ) -> None:
        # New ids go in with Chroma's cheaper add; caller-chosen ids may replace.
        for flag in (False, True):
            chosen = [i for i, r in enumerate(replace) if r is flag]
            if chosen:
                self.store.upsert(
                    self._namespace_key,
                    ids=[ids[i] for i in chosen],
                    texts=[texts[i] for i in chosen],
                    embeddings=[vectors[i] for i in chosen],
                    metadatas=[metadatas[i] for i in chosen],
                    replace=flag,
                )

    def _delete(self, ids: Sequence[str] | None, where: Mapping[str, Any] | None) -> None:
        index = self._index
        with index.lock:
            try:
                self.store.delete(self._namespace_key, ids=ids, where=where)
            finally:
                # Whatever happened, the next search re-reads the namespace.
                index.invalidate()

    def _renew_generation(self) -> None:
        # Caller-chosen ids may have replaced documents other processes indexed.
        index = self._index
        with index.lock:
            index.generation = self.store.touch(self._namespace_key)

    def _outbox_name(self) -> str:
        outbox = self._outbox
        return outbox.path if isinstance(outbox, SQLiteOutbox) else "in this process"

    # -- reading ----------------------------------------------------------------------

    def _catch_up(self, request: _Query) -> None:
        """Before a search: write what waits, where the search needs it written.

        In sync mode, every queued document (as ever). In background mode
        only after a failed write (which retries it, or raises) or for a
        filtered search, whose filter Chroma evaluates; an unfiltered search
        reads queued turns from the index instead.
        """
        if self.write == "sync" or self._lane.error is not None or request.where is not None:
            self._drain()

    def _embed_pending(self) -> None:
        """Make sure every pending document has its embedding before a dense search.

        Those a writer is embedding now are waited for (up to
        :data:`_EMBED_WAIT_SECONDS`, then embedded here too); the others are
        embedded here (and the writer reuses them).
        """
        index = self._index
        with index.lock:
            claimed, free = index.unembedded()
            deadline = time.monotonic() + _EMBED_WAIT_SECONDS
            while claimed and (left := deadline - time.monotonic()) > 0:
                index.changed.wait(left)
                busy, free = index.unembedded()
                claimed &= busy
            free = [*free, *claimed]
            if not free:
                return
            index.claim(free)
            texts = [index.text_of(i) for i in free]
        try:
            vectors = self._embedder.embed_documents(texts)
        except Exception:
            with index.lock:
                index.release(free)
            raise
        with index.lock:
            index.publish(free, vectors)

    def _ensure_loaded(self, index: NamespaceIndex) -> None:
        if not index.loaded:
            self._rebuild(index)

    def _refresh(self, index: NamespaceIndex) -> None:
        store, namespace = self.store, self._namespace_key
        generation = store.generation(namespace)
        if not index.is_current(store.count(namespace), generation):
            self._rebuild(index, generation)

    def _rebuild(self, index: NamespaceIndex, generation: str | None = None) -> None:
        store, namespace = self.store, self._namespace_key
        if generation is None:
            generation = store.generation(namespace)
        records = store.get(namespace)
        index.rebuild(((r.id, r.text, r.metadata) for r in records), generation)
        # Queued documents (some perhaps left by a process that stopped before
        # writing them) are searchable from now on, and written soon.
        rows = self._outbox.pending(store.target, namespace)
        if rows:
            metadatas = [{**m, NAMESPACE_KEY: namespace} for m in _number_turns(rows, index)]
            index.add_pending((r.doc_id, r.text, m) for r, m in zip(rows, metadatas, strict=True))
            if self.write == "background" and not self._lane.lock.locked():
                # (A drain that is running writes them before it returns.)
                background_writer().schedule(self._drain_key, self._drain)

    def _request(self, query: Any, k: int | None, where: Mapping[str, Any] | None) -> _Query:
        if not isinstance(query, str):
            raise InvalidInputError(f"query must be a str, got {type(query).__name__}.")
        k = self.k if k is None else k
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise InvalidInputError(f"k must be a positive int, got {k!r}.")
        if where is not None:
            check_filter(where)
        return _Query(query, k, None if where is None else dict(where))

    def _search(self, request: _Query, vector: Sequence[float] | None) -> list[SearchResult]:
        config, store, namespace, index = self.recall, self.store, self._namespace_key, self._index
        with index.lock:
            self._refresh(index)
            n = min(config.candidates, len(index))
            if n == 0:
                return []
            dense = []
            if vector is not None:
                dense = store.nearest(namespace, vector, n=n, where=request.where)
                if request.where is None and index.pending_count():
                    dense = _merge_nearest(dense, index.pending_nearest(vector, n=n), n)
            lexical = index.lexical(request.text, limit=n) if config.uses_lexical else []
            found = {s.id for s in dense} | {s.id for s in lexical}
            positions = index.positions(found)
            if request.where is None:
                # Unfiltered, any neighbour may be returned: look them up in the
                # index's own position map instead of gathering them first.
                ranked = rank_candidates(
                    config,
                    dense=dense,
                    lexical=lexical,
                    positions=positions,
                    doc_at=index.doc_at,
                    limit=request.k,
                )
            elif config.neighbour_weight and config.neighbour_window:
                around = neighbour_positions(positions.values(), window=config.neighbour_window)
                positions.update(index.ids_at(around))
        if request.where is not None:
            # Dense hits passed the filter in Chroma; check the others there too
            # (a document still pending is not there, so it does not pass).
            unchecked = (found | set(positions)) - {s.id for s in dense}
            passed = store.get(namespace, ids=sorted(unchecked), where=request.where, text=False)
            allowed = {s.id for s in dense} | {r.id for r in passed}
            ranked = rank_candidates(
                config,
                dense=dense,
                lexical=[s for s in lexical if s.id in allowed],
                positions={i: p for i, p in positions.items() if i in allowed},
                limit=request.k,
            )
        return self._results(ranked)

    def _results(self, ranked: Sequence[ScoredId]) -> list[SearchResult]:
        """The records of the ranked ids: pending ones from the index, the rest from the store."""
        known: dict[str, tuple[str, dict[str, Any]]] = {}
        index = self._index
        with index.lock:
            for item in ranked:
                document = index.pending_document(item.id)
                if document is not None:
                    known[item.id] = (document.text, dict(document.metadata))
        missing = [s.id for s in ranked if s.id not in known]
        for record in self.store.get(self._namespace_key, ids=missing):
            known[record.id] = (record.text, record.metadata)
        return [
            SearchResult(known[s.id][0], known[s.id][1], s.score, s.id)
            for s in ranked
            if s.id in known
        ]

    def _query_text(self, inputs: Mapping[str, Any]) -> str:
        key = select_input_key(inputs, self.memory_variables, self.input_key)
        value = inputs[key]
        if isinstance(value, str):
            return value
        (human, _) = turn_messages(value, "")
        return message_text(human)

    def _variables(self, results: list[SearchResult]) -> dict[str, Any]:
        value: str | list[Document]
        if self.return_docs:
            value = [r.to_document() for r in results]
        else:
            value = "\n".join(r.text for r in results)
        return {self.memory_key: value}


def _number_turns(rows: Sequence[OutboxRow], index: NamespaceIndex) -> list[dict[str, Any]]:
    """The rows' metadata, with the next turn index of their session where one is wanted.

    A row an earlier attempt numbered (it is pending in the index) keeps its number.
    """
    next_turn: dict[str, int] = {}
    metadatas = []
    for row in rows:
        metadata = dict(row.metadata)
        if row.needs_turn:
            pending = index.pending_document(row.doc_id)
            if pending is not None and TURN_KEY in pending.metadata:
                metadata[TURN_KEY] = pending.metadata[TURN_KEY]
            else:
                session = str(metadata.get(SESSION_KEY))
                turn = next_turn.get(session, index.next_turn(session))
                metadata[TURN_KEY] = turn
                next_turn[session] = turn + 1
        metadatas.append(metadata)
    return metadatas


def _merge_nearest(stored: list[ScoredId], pending: list[ScoredId], n: int) -> list[ScoredId]:
    """The ``n`` nearest of the store's and the pending documents' (the store's score wins)."""
    scores = {item.id: item.score for item in pending}
    scores.update((item.id, item.score) for item in stored)
    best = sorted(scores.items(), key=lambda item: (-item[1], item[0]))[:n]
    return [ScoredId(doc_id, score) for doc_id, score in best]


def default_embeddings() -> Embeddings:
    """The embeddings a memory uses when given none: MiniLM, int8 weights and activations.

    Measured on LoCoMo through ``VectorMemory()``: recall-any@10 84.9 hybrid /
    55.0 dense with int8 activations against 84.7 / 55.4 without, for half
    the CPU time per text (about 5 ms instead of 10 for a 40-token turn here).
    """
    from memories.integrations.minilm import MiniLMEmbeddings

    return MiniLMEmbeddings(int8_activations=True)


def _build_embeddings(spec: str) -> Embeddings:
    module, _, attr = spec.partition(":")
    try:
        target: Any = importlib.import_module(module)
        for part in attr.split("."):
            target = getattr(target, part)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(
            f"embeddings {spec!r} cannot be imported ({exc}); give 'module:Class' of a "
            "LangChain Embeddings class that takes no arguments, or pass an Embeddings object."
        ) from exc
    built = target() if callable(target) else target
    if not isinstance(built, Embeddings):
        raise ConfigError(f"embeddings {spec!r} gave {built!r:.80}, not a LangChain Embeddings.")
    return built


_MEMORY_OUTBOX = MemoryOutbox()
_outboxes: dict[str, SQLiteOutbox] = {}


def _sqlite_outbox(path: str) -> SQLiteOutbox:
    key = os.path.abspath(path)
    outbox = _outboxes.get(key)
    if outbox is None:
        outbox = _outboxes[key] = SQLiteOutbox(key)
    return outbox


def _progress_bar(total: int | None) -> Any:
    if total is None:
        return None
    from tqdm.auto import tqdm

    bar: Callable[..., Any] = tqdm
    return bar(total=total, unit="doc", desc="Storing")
