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
that is down loses nothing: the call raises
:class:`~memories.errors.BackendUnavailableError` and the turn is written by
the next call that reaches the store, or by :meth:`VectorMemory.flush`.
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
from pydantic import Field, field_validator

from memories.base import BaseMemory
from memories.errors import BackendError, ConfigError, InvalidInputError
from memories.keys import select_input_key, select_output_key
from memories.messages import message_text, turn_messages
from memories.recall import RecallConfig, neighbour_positions, rank_candidates
from memories.vector.filters import as_namespace, check_filter, check_metadata, namespace_key
from memories.vector.index import SESSION_KEY, TIMESTAMP_KEY, TURN_KEY, NamespaceIndex
from memories.vector.outbox import MemoryOutbox, OutboxRow, SQLiteOutbox
from memories.vector.records import SearchResult

if TYPE_CHECKING:
    from integrations.chroma import ChromaStore

__all__ = ["VectorMemory", "default_embeddings"]

SPEAKERS_KEY = "speakers"
_DRAIN_BATCH = 256
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

    mode: Literal["persistent", "memory", "http"] = "persistent"
    path: str = "memories-chroma"
    host: str = "localhost"
    port: int = 8000
    ssl: bool = False
    collection: str = "memories"
    namespace: tuple[str, ...] = ("default",)
    session_id: str = "default"
    k: int = Field(default=4, ge=1)
    recall: RecallConfig = Field(default_factory=RecallConfig)
    embeddings: Embeddings | str | None = None
    outbox: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    memory_key: str = "history"
    input_key: str | None = None
    output_key: str | None = None
    return_docs: bool = False

    @field_validator("namespace", mode="before")
    @classmethod
    def _as_namespace(cls, value: Any) -> tuple[str, ...]:
        return as_namespace(value)

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
        from integrations.chroma import ChromaStore

        return ChromaStore(
            mode=self.mode,
            path=self.path,
            host=self.host,
            port=self.port,
            ssl=self.ssl,
            collection=self.collection,
            embeddings=self._embedder,
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

        Raises:
            InvalidInputError: the turn cannot be stored; nothing was written.
            BackendUnavailableError: the store cannot be reached; the turn waits
                in the outbox and is written by the next call that reaches it.
        """
        row = self._turn_row(inputs, outputs, metadata)
        self._outbox.put(self.store.target, self._namespace_key, [row])
        self._drain()

    async def asave_context(
        self,
        inputs: dict[str, Any],
        outputs: dict[str, Any],
        *,
        metadata: Mapping[str, Any] | None = None,
    ) -> None:
        """Async :meth:`save_context`: the same work, off the event loop."""
        row = self._turn_row(inputs, outputs, metadata)
        await asyncio.to_thread(self._outbox.put, self.store.target, self._namespace_key, [row])
        await asyncio.to_thread(self._drain)

    def load_memory_variables(self, inputs: dict[str, Any]) -> dict[str, Any]:
        """``{memory_key: text}``: the top ``k`` documents for the input, joined by newlines.

        With ``return_docs=True`` the value is a list of LangChain ``Document``.
        """
        return self._variables(self.search(self._query_text(inputs), k=self.k))

    async def aload_memory_variables(self, inputs: dict[str, Any]) -> dict[str, Any]:
        """Async :meth:`load_memory_variables`."""
        return self._variables(await self.asearch(self._query_text(inputs), k=self.k))

    def clear(self) -> None:
        """Delete every document of this memory's namespace, queued ones included."""
        self._outbox.clear(self.store.target, self._namespace_key)
        self._delete(None, None)

    async def aclear(self) -> None:
        """Async :meth:`clear`."""
        await asyncio.to_thread(self.clear)

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
        """
        request = self._request(query, k, filter)
        self._drain()
        vector = self._embedder.embed_query(request.text) if self.recall.uses_dense else None
        return self._search(request, vector)

    async def asearch(
        self, query: str, /, *, k: int | None = None, filter: Mapping[str, Any] | None = None
    ) -> list[SearchResult]:
        """Async :meth:`search`."""
        request = self._request(query, k, filter)
        await asyncio.to_thread(self._drain)
        vector = None
        if self.recall.uses_dense:
            vector = await self._embedder.aembed_query(request.text)
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

    def flush(self) -> int:
        """Write every queued document to the store now; return how many were written.

        Raises:
            BackendUnavailableError: the store still cannot be reached.
        """
        return self._drain()

    async def aflush(self) -> int:
        """Async :meth:`flush`."""
        return await asyncio.to_thread(self._drain)

    def pending(self) -> int:
        """How many documents of this namespace wait in the outbox."""
        return len(self._outbox.pending(self.store.target, self._namespace_key))

    # -- building documents (pure) ----------------------------------------------------

    def _turn_text(self, inputs: Mapping[str, Any], outputs: Mapping[str, Any]) -> str:
        """The document text of one run, validated before anything is written."""
        in_key = select_input_key(inputs, self.memory_variables, self.input_key)
        out_key = select_output_key(outputs, self.output_key, type(self).__name__)
        human, ai = turn_messages(inputs[in_key], outputs[out_key])
        return f"{in_key}: {message_text(human)}\n{out_key}: {message_text(ai)}"

    def _turn_row(
        self,
        inputs: Mapping[str, Any],
        outputs: Mapping[str, Any],
        metadata: Mapping[str, Any] | None,
    ) -> OutboxRow:
        text = self._turn_text(inputs, outputs)
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

    def _drain(self, *, progress: int | None = None) -> int:
        """Write queued documents to the store, oldest first; return how many."""
        target, namespace, index = self.store.target, self._namespace_key, self._index
        written = 0
        bar = _progress_bar(progress)
        try:
            with index.lock:
                while rows := self._outbox.pending(target, namespace, limit=_DRAIN_BATCH):
                    self._ensure_loaded(index)
                    metadatas = _number_turns(rows, index)
                    texts = [row.text for row in rows]
                    vectors = self._embedder.embed_documents(texts)
                    ids = [row.doc_id for row in rows]
                    self._write(ids, texts, vectors, metadatas, [row.replace for row in rows])
                    index.add(zip(ids, texts, metadatas, strict=True))
                    self._outbox.remove(target, namespace, ids)
                    written += len(rows)
                    if bar is not None:
                        bar.update(len(rows))
        except BackendError as exc:
            waiting = len(self._outbox.pending(target, namespace))
            raise type(exc)(
                f"{exc} {waiting} document(s) of namespace {self.namespace!r} wait in the "
                f"outbox ({self._outbox_name()}); they are written by the next call that "
                "reaches the store, or by flush()."
            ) from exc
        finally:
            if bar is not None:
                bar.close()
        return written

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
        smooth = bool(config.neighbour_weight and config.neighbour_window)
        with index.lock:
            self._refresh(index)
            n = min(config.candidates, len(index))
            if n == 0:
                return []
            dense = []
            if vector is not None:
                dense = store.nearest(namespace, vector, n=n, where=request.where)
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
            elif smooth:
                around = neighbour_positions(positions.values(), window=config.neighbour_window)
                positions.update(index.ids_at(around))
        if request.where is not None:
            # Dense hits passed the filter in Chroma; check the others there too.
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
        # Texts and metadata only for what is returned.
        known = {r.id: r for r in store.get(namespace, ids=[s.id for s in ranked])}
        return [
            SearchResult(known[s.id].text, known[s.id].metadata, s.score, s.id)
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
    """The rows' metadata, with the next turn index of their session where one is wanted."""
    next_turn: dict[str, int] = {}
    metadatas = []
    for row in rows:
        metadata = dict(row.metadata)
        if row.needs_turn:
            session = str(metadata.get(SESSION_KEY))
            turn = next_turn.get(session, index.next_turn(session))
            metadata[TURN_KEY] = turn
            next_turn[session] = turn + 1
        metadatas.append(metadata)
    return metadatas


def default_embeddings() -> Embeddings:
    """The embeddings a memory uses when given none: MiniLM, int8 weights and activations.

    Measured on LoCoMo through ``VectorMemory()``: recall-any@10 84.9 hybrid /
    55.0 dense with int8 activations against 84.7 / 55.4 without, for half
    the CPU time per text (about 5 ms instead of 10 for a 40-token turn here).
    """
    from integrations.minilm import MiniLMEmbeddings

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
