"""``VectorMemory``: every turn a document, recalled by relevance to the input.

Each ``save_context`` stores the turn as one document, ``"input: ...\\noutput: ..."``
as LangChain's ``VectorStoreRetrieverMemory`` writes it, with metadata:
namespace, session, turn index, timestamp, speakers, and whatever the caller
adds. ``load_memory_variables`` searches with the chain's input and joins the
top ``k`` texts with newlines, as LangChain does (or returns ``Document``
objects with ``return_docs=True``).

The memory turns runs into documents and results into prompt variables;
storing and searching are its backend's (:mod:`memories.vector.backend`): by
default :class:`~memories.vector.chroma_backend.ChromaBackend` (Chroma
embedded, in memory or on a server, an outbox that loses nothing when the
store is down, hybrid recall), built from this memory's fields.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.messages import HumanMessage
from pydantic import Field

from memories.base import BaseMemory
from memories.embeddings import default_embeddings, resolve_embeddings
from memories.errors import InvalidInputError
from memories.kernel.capabilities import Capabilities
from memories.kernel.steps import to_thread
from memories.keys import select_input_key, select_output_key
from memories.messages import check_storable, message_text, turn_messages
from memories.namespaces import NamespaceField
from memories.paths import default_file
from memories.recall import RecallConfig
from memories.recall.config import RecallField
from memories.vector.backend import VectorBackend, VectorQuery
from memories.vector.filters import MetadataField, check_metadata
from memories.vector.index import TURN_KEY
from memories.vector.outbox import DeadLetter, OutboxRow
from memories.vector.records import SearchResult
from memories.vector.writes import VectorStatus, WriteModeField

if TYPE_CHECKING:
    from memories.integrations.chroma import ChromaStore

__all__ = ["VectorMemory", "default_embeddings"]

_PROGRESS_FROM = 1_000


class VectorMemory(BaseMemory):
    """Conversation turns in a Chroma vector store, recalled by relevance to the input.

    Args:
        mode: ``"persistent"`` (embedded Chroma in ``path``, the default),
            ``"memory"`` (in this process only; shared by the process's
            in-memory memories) or ``"http"`` (a server started with ``chroma run``).
        path: the folder of the persistent store; default: ``chroma`` in the
            data directory (:mod:`memories.paths`), created on the first write.
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
            data directory (http mode); in-process for ``"memory"`` mode.
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
    path: str = Field(default_factory=lambda: default_file("chroma"))
    host: str = "localhost"
    port: int = 8000
    ssl: bool = False
    timeout: float = Field(default=30.0, gt=0)
    collection: str = "memories"
    namespace: NamespaceField = ("default",)
    session_id: str = "default"
    k: int = Field(default=4, ge=1)
    recall: RecallField = Field(default_factory=RecallConfig)
    embeddings: Embeddings | str | None = None
    write: WriteModeField = "background"
    outbox: str | None = None
    metadata: MetadataField = Field(default_factory=dict)
    memory_key: str = "history"
    input_key: str | None = None
    output_key: str | None = None
    return_docs: bool = False

    # -- configuration --------------------------------------------------------------

    def _config_value(self, name: str, value: Any) -> Any:
        if isinstance(value, RecallConfig):
            return value.overrides()
        if name == "metadata":
            return dict(value)
        return super()._config_value(name, value)

    # -- what the memory is made of (rebuilt when the configuration changes) --------

    @cached_property
    def embedder(self) -> Embeddings:
        """The embeddings in use: ``embeddings`` built, or the default (built on first use)."""
        return resolve_embeddings(self.embeddings)

    @cached_property
    def backend(self) -> VectorBackend:
        """Where the documents live and how they are found (built on first use)."""
        return self._make_backend()

    def _make_backend(self) -> VectorBackend:
        from memories.vector.chroma_backend import ChromaBackend

        return ChromaBackend.of(self)

    @property
    def store(self) -> ChromaStore:
        """The Chroma store under the default backend (NotImplementedError under another)."""
        store: ChromaStore | None = getattr(self.backend, "store", None)
        if store is None:
            raise NotImplementedError(f"{self.backend.location} is not a Chroma store.")
        return store

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
        """Store the run's input and output as one document (``metadata``: extra metadata for it).

        With ``write="background"`` the turn is queued in the outbox, searchable
        at once, and written to Chroma by a background thread; a failed
        background write is raised by the next call that needs the store, which
        first retries it (see :mod:`memories.vector.chroma_backend`).

        Raises:
            InvalidInputError: the turn cannot be stored; nothing was written.
            BackendUnavailableError: the store cannot be reached (now, or by the
                last background write); the turn waits in the outbox and is
                written by the next call that reaches the store, or by ``flush()``.
        """
        self.backend.save(self._turn_row(inputs, outputs, metadata))

    async def asave_context(
        self,
        inputs: dict[str, Any],
        outputs: dict[str, Any],
        *,
        metadata: Mapping[str, Any] | None = None,
    ) -> None:
        """Async :meth:`save_context`."""
        await self.backend.asave(self._turn_row(inputs, outputs, metadata))

    def load_memory_variables(self, inputs: dict[str, Any]) -> dict[str, Any]:
        """``{memory_key: text}``: the top ``k`` documents for the input, joined by newlines.

        With ``return_docs=True`` the value is a list of LangChain ``Document``.
        """
        return self._variables(self.backend.search(self._load_query(inputs)))

    async def aload_memory_variables(self, inputs: dict[str, Any]) -> dict[str, Any]:
        """Async :meth:`load_memory_variables`."""
        return self._variables(await self.backend.asearch(self._load_query(inputs)))

    def clear(self) -> None:
        """Delete the documents this memory's session wrote (queued ones are written first).

        Other sessions' documents in the namespace stay: a "new chat" that
        clears its memory must not erase a user's long-term memory. To erase
        the whole namespace, call :meth:`erase_namespace`.

        Raises:
            BackendUnavailableError: the store cannot be reached (nothing is deleted).
        """
        self.backend.forget_session()

    async def aclear(self) -> None:
        """Async :meth:`clear`."""
        await self.backend.aforget_session()

    def erase_namespace(self) -> None:
        """Delete every document of this memory's namespace, every session's, queued ones too."""
        self.backend.erase_namespace()

    async def aerase_namespace(self) -> None:
        """Async :meth:`erase_namespace`."""
        await self.backend.aerase_namespace()

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
        return self.backend.search(self._request(query, k, filter))

    async def asearch(
        self, query: str, /, *, k: int | None = None, filter: Mapping[str, Any] | None = None
    ) -> list[SearchResult]:
        """Async :meth:`search`."""
        return await self.backend.asearch(self._request(query, k, filter))

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
        self.backend.add(rows, progress=_show_progress(progress, rows))
        return [row.doc_id for row in rows]

    async def aadd(self, texts: Sequence[str], /, **options: Any) -> list[str]:
        """Async :meth:`add` (the same arguments)."""
        return await to_thread(self.add, texts, **options)

    def delete(
        self, ids: Sequence[str] | None = None, /, *, filter: Mapping[str, Any] | None = None
    ) -> None:
        """Delete documents of this namespace by id, by metadata filter, or both (AND).

        Raises:
            InvalidInputError: neither ids nor a filter given (use :meth:`clear`).
        """
        self.backend.delete(*self._deletion(ids, filter))

    async def adelete(
        self, ids: Sequence[str] | None = None, /, *, filter: Mapping[str, Any] | None = None
    ) -> None:
        """Async :meth:`delete`."""
        await self.backend.adelete(*self._deletion(ids, filter))

    def flush(self, *, timeout: float | None = None) -> bool:
        """Write every queued document to the store now and wait for it.

        A background write under way is waited for first (at most ``timeout``
        seconds). At interpreter exit the background writer gets a few
        seconds, and the outbox keeps anything it did not write.

        Returns:
            True when nothing of this namespace waits in the outbox any more;
            False when a write under way outlasted ``timeout``.

        Raises:
            BackendUnavailableError: the store still cannot be reached.
        """
        return self.backend.flush(timeout=timeout)

    def close(self, *, timeout: float | None = None) -> bool:
        """Write what is queued (as :meth:`flush`); later saves of this object write synchronously.

        The background writer itself keeps serving other memories.
        """
        return self.backend.close(timeout=timeout)

    def dead_letters(self) -> list[DeadLetter]:
        """Documents set aside, oldest first: the store or the embedder refused them alone.

        A document that fails while others are written (Chroma rejects its
        metadata, a hosted embedder its length) would otherwise block its
        namespace: it is moved aside, logged and counted in :meth:`status`.
        """
        return self.backend.dead_letters()

    def retry_dead_letters(self, ids: Sequence[str] | None = None) -> int:
        """Queue set-aside documents again (all, or ``ids``) and write them now; return how many.

        Raises what writing them raises; one that fails again is set aside again.
        """
        return self.backend.retry_dead_letters(ids)

    def pending(self) -> int:
        """How many documents of this namespace wait in the outbox (queued or failed)."""
        return self.backend.pending()

    def status(self) -> VectorStatus:
        """The write mode, the documents waiting, and the last failed write if none worked since."""
        return self.backend.status()

    # -- building documents and queries (pure) ----------------------------------------

    def _turn_text(self, inputs: Mapping[str, Any], outputs: Mapping[str, Any]) -> str:
        """The document text of one run, validated before anything is written."""
        in_key = select_input_key(inputs, self.memory_variables, self.input_key)
        out_key = select_output_key(outputs, self.output_key, type(self).__name__)
        human, ai = check_storable(turn_messages(inputs[in_key], outputs[out_key]))
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
        meta = {**self.metadata, **self.backend.bookkeeping(turn=True), **extra}
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
        stamp = self.backend.bookkeeping(turn=False)
        for i, text in enumerate(texts):
            given = check_metadata(metadatas[i] if metadatas else None, what=f"metadatas[{i}]")
            turn = given.get(TURN_KEY)
            if turn is not None and (not isinstance(turn, int) or isinstance(turn, bool)):
                raise InvalidInputError(f"metadatas[{i}]['turn'] must be an int, got {turn!r}.")
            meta = {**self.metadata, **stamp, **given}
            doc_id = ids[i] if ids is not None else uuid.uuid4().hex
            rows.append(OutboxRow(doc_id, text, meta, needs_turn=False, replace=ids is not None))
        return rows

    def _deletion(
        self, ids: Sequence[str] | None, where: Mapping[str, Any] | None
    ) -> tuple[Sequence[str] | None, dict[str, Any] | None]:
        if ids is None and where is None:
            raise InvalidInputError(
                "delete() needs ids or a filter; to delete everything, call clear()."
            )
        if ids is not None and (isinstance(ids, str) or not all(isinstance(i, str) for i in ids)):
            raise InvalidInputError(f"ids must be a list of strings, got {ids!r:.80}.")
        if where is not None:
            self.backend.check_filter(where)
        return ids, None if where is None else dict(where)

    def _request(self, query: Any, k: int | None, where: Mapping[str, Any] | None) -> VectorQuery:
        if not isinstance(query, str):
            raise InvalidInputError(f"query must be a str, got {type(query).__name__}.")
        if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 1):
            raise InvalidInputError(f"k must be a positive int, got {k!r}.")
        if where is not None:
            self.backend.check_filter(where)
        return VectorQuery(query, k, None if where is None else dict(where))

    def _load_query(self, inputs: Mapping[str, Any]) -> VectorQuery:
        """The search a chain run makes: its input, the backend's default ``k``."""
        key = select_input_key(inputs, self.memory_variables, self.input_key)
        value = inputs[key]
        if not isinstance(value, str):
            (human, _) = turn_messages(value, "")
            value = message_text(human)
        return VectorQuery(value, None, None)

    def _variables(self, results: list[SearchResult]) -> dict[str, Any]:
        value: str | list[Document]
        if self.return_docs:
            value = [r.to_document() for r in results]
        else:
            value = "\n".join(r.text for r in results)
        return {self.memory_key: value}


def _show_progress(progress: bool | None, rows: Sequence[OutboxRow]) -> bool:
    return progress if progress is not None else len(rows) > _PROGRESS_FROM
