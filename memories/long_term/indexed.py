"""``DocumentMemory``: what every memory whose data is documents in a vector backend shares.

The vector, example and collection memories keep documents in one namespace
of one store (:mod:`memories.stores.vector.backend`), searched by hybrid
recall; a subclass says what a document is and what the prompt shows.
"""

from __future__ import annotations

import builtins
import time
import uuid
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import replace
from functools import cached_property, partial
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from langchain_core.embeddings import Embeddings
from langchain_core.messages import HumanMessage
from pydantic import Field

from memories.core.base import BaseMemory
from memories.errors import InvalidInputError
from memories.kernel.checks import whole_number
from memories.kernel.embeddings import resolve_embeddings
from memories.kernel.messages import check_storable
from memories.kernel.namespaces import Namespace, NamespaceField, in_namespace, namespace_text
from memories.kernel.paths import default_file
from memories.kernel.retention import Sweeps
from memories.kernel.steps import Step, Steps, blocking_twin, run, step, twins
from memories.stores.erasure import StoreShare
from memories.stores.expiry import OWN, Expiring, ExpiryLedger, Rule
from memories.stores.recall import RecallConfig
from memories.stores.recall.config import RecallField
from memories.stores.vector.backend import VectorBackend, VectorQuery
from memories.stores.vector.chroma_backend import ChromaBackend
from memories.stores.vector.filters import MetadataField, check_metadata
from memories.stores.vector.outbox import DeadLetter, OutboxRow, outbox_for
from memories.stores.vector.pgvector_backend import PgVectorBackend, PostgresURLField
from memories.stores.vector.recall_index import TURN_KEY
from memories.stores.vector.records import SearchResult
from memories.stores.vector.scoring import check_min_score, passing
from memories.stores.vector.writes import VectorStatus, WriteModeField

#: A document's time to live as a write gives it: minutes, None (never expires), or
#: ``"default"`` (the memory's ``ttl``).
TTL = float | None | Literal["default"]

if TYPE_CHECKING:
    import sqlalchemy as sa

    from memories.integrations.chroma import ChromaStore

__all__ = ["DocumentMemory", "IndexedMemory", "checked_ids", "show_progress"]

#: The fields that say which Chroma store, and which part of it, the default backend uses.
_STORE_FIELDS = ("mode", "path", "host", "port", "ssl", "collection", "timeout")
_BACKEND_FIELDS = ("namespace", "session_id", "recall", "k", "write")

_PROGRESS_FROM = 1_000


class IndexedMemory(BaseMemory, Sweeps):
    """A memory with an index: one namespace of a Chroma store or of PostgreSQL with pgvector.

    The store's and the namespace's fields, the embedder and the backend
    built from them. :class:`DocumentMemory` adds the document API; a
    memory whose writes must go through something else first (the
    collection's ledger) uses the backend itself.

    Args:
        mode: ``"persistent"`` (embedded Chroma in ``path``, the default),
            ``"memory"`` (in this process only; shared by the process's
            in-memory memories) or ``"http"`` (a server started with ``chroma run``).
        path: the folder of the persistent store; default: ``chroma`` in the
            data directory (:mod:`memories.kernel.paths`), created on the first write.
        host: the Chroma server's host in ``"http"`` mode.
        port: the Chroma server's port in ``"http"`` mode.
        ssl: reach the server over HTTPS.
        timeout: the longest one request to the server may take, in seconds
            ("http" mode); a hung server then raises BackendUnavailableError.
        collection: prefix of the Chroma collections (one per namespace).
        namespace: whose memory this is, e.g. ``("user-42", "chat")``. A memory
            only ever reads, searches and deletes its own namespace.
        session_id: the conversation new documents belong to.
        k: how many documents a search returns by default.
        recall: how documents are ranked (a :class:`~memories.stores.recall.RecallConfig`
            or a dict of its fields).
        embeddings: any LangChain ``Embeddings``, or ``"module:attr"`` naming a
            class to build; default: offline MiniLM with int8 activations
            (see :func:`memories.kernel.embeddings.default_embeddings`).
        write: ``"background"`` (default): a save returns once the document is
            in the outbox, and a background thread embeds and stores it;
            searches see it at once. ``"sync"``: a save returns once Chroma has it.
        outbox: SQLite file (or SQLAlchemy URL, e.g. PostgreSQL for several hosts)
            where writes wait until the store has them, with the recall index; default:
            ``memories-outbox.db`` inside ``path`` (persistent mode) or in the
            data directory (http mode); a file of the process for ``"memory"`` mode.
        metadata: metadata added to every document this memory saves.
        vectors: a PostgreSQL database with pgvector, as a SQLAlchemy URL
            (``"postgresql+psycopg://user:password@host/db"``): when set, the
            documents, their embeddings and the recall index live there
            (:class:`~memories.stores.vector.pgvector_backend.PgVectorBackend`),
            every write is one transaction and synchronous (``write`` is not
            used), and the Chroma fields (``mode``, ``path``, ``host``, ``port``,
            ``ssl``, ``timeout``, ``collection``) and ``outbox`` are unused.
            Default: None, Chroma.
        min_score: leave out of every search (and of what ``load_memory_variables``
            shows) the documents scoring below this, 0 to 1; 0 keeps all. Scores are
            on a calibrated scale (:mod:`memories.stores.recall.scores`): the best
            result's is about the probability that it answers the query.
        ttl: minutes a new document lives after it was written (one written
            again keeps its own; a write may give one its own); None: forever.
            An expired document is hidden from every read at once and deleted
            by :meth:`sweep`.
        refresh_on_read: a document a search returns starts its time to live
            again, as LangGraph's ``refresh_on_read``.
        hide_expired: leave expired documents out of every read (False: read
            them until the sweep deletes them, as LangGraph's ``omit_expired=False``).
        clock: the time expiry is reckoned with (Unix seconds; tests inject one).
    """

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
    vectors: PostgresURLField = None
    metadata: MetadataField = Field(default_factory=dict)
    min_score: float = Field(default=0.0, ge=0.0, le=1.0)
    ttl: float | None = Field(default=None, gt=0)
    refresh_on_read: bool = False
    hide_expired: bool = True
    clock: Callable[[], float] = Field(default=time.time, exclude=True)

    #: Whether its documents belong to the session that wrote them (erasing a session
    #: erases them), or only to the namespace.
    session_documents: ClassVar[bool] = True

    # -- configuration --------------------------------------------------------------

    def _config_value(self, name: str, value: Any) -> Any:
        if isinstance(value, RecallConfig):
            return value.overrides()
        return super()._config_value(name, value)

    def model_post_init(self, context: Any, /) -> None:
        self._import_backend()
        super().model_post_init(context)

    def _import_backend(self) -> None:
        """Import the backend's client library now: about 0.5 s once per process for Chroma,
        paid at construction rather than by the first search, and a missing ``chroma``
        extra is a MissingDependencyError at once."""
        if self.vectors is None:
            from memories.integrations.chroma import import_client_code

            import_client_code(self.mode)

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
        """PostgreSQL with pgvector when ``vectors`` is set, else Chroma as the store fields say."""
        fields = {name: getattr(self, name) for name in _BACKEND_FIELDS}
        fields["namespace"] = self.index_namespace
        if self.vectors is not None:
            del fields["write"]
            return PgVectorBackend(self.vectors, **fields, embedder=self.embedder)
        from memories.integrations.chroma import ChromaStore

        store = ChromaStore(
            **{name: getattr(self, name) for name in _STORE_FIELDS}, embeddings=self.embedder
        )
        return ChromaBackend(
            store,
            **fields,
            embedder=self.embedder,
            outbox=outbox_for(self.mode, self.path, self.outbox),
        )

    def erasure_shares(self, *, session: bool, namespace: bool) -> list[StoreShare]:
        """The namespace's documents (or, erasing only a session, the session's), everywhere
        the backend keeps them."""
        found = super().erasure_shares(session=session, namespace=namespace)
        if not namespace and not (session and self.session_documents):
            return found
        backend = self.backend
        where = backend.location
        if self.vectors is None:
            where += f" (collections {self.collection!r})"
        where += f", namespace {'.'.join(self.namespace)}"
        if not namespace:
            where += f", session {self.session_id!r}"
        held = partial(backend.held, session=not namespace)
        erase = backend.erase_namespace if namespace else backend.erase_session
        return [*found, StoreShare(where, held, erase, backend.compactions())]

    @property
    def store(self) -> ChromaStore:
        """The Chroma store under the default backend (NotImplementedError under another)."""
        store: ChromaStore | None = getattr(self.backend, "store", None)
        if store is None:
            raise NotImplementedError(f"{self.backend.location} is not a Chroma store.")
        return store

    def _floor(self, min_score: float | None) -> float:
        """The score a result needs: ``min_score`` if given (checked), else the memory's.

        Raises:
            InvalidInputError: ``min_score`` is not a number between 0 and 1.
            NotImplementedError: a floor above 0 on a backend whose scores are not calibrated.
        """
        floor = self.min_score if min_score is None else check_min_score(min_score)
        if floor > 0 and not self.backend.calibrated_scores:
            raise NotImplementedError(
                f"{type(self.backend).__name__} gives no calibrated scores, so min_score "
                f"({floor!r}) has no meaning there; leave it at 0, or use the default Chroma "
                "backend."
            )
        return floor

    def _request(self, query: Any, k: int | None, where: Mapping[str, Any] | None) -> VectorQuery:
        if not isinstance(query, str):
            raise InvalidInputError(f"query must be a str, got {type(query).__name__}.")
        if k is not None:
            whole_number(k, "k", least=1, error=InvalidInputError)
        if where is not None:
            self.backend.check_filter(where)
        return VectorQuery(query, k, None if where is None else dict(where))

    # -- time to live (expiry times in an ExpiryLedger beside the store) --------------

    def _expiry_url(self) -> str:
        """The database expiry times go to: the index's SQL side (pgvector, else the outbox)."""
        if self.vectors is not None:
            return str(self.vectors)
        return outbox_for(self.mode, self.path, self.outbox).url

    @cached_property
    def expiry(self) -> ExpiryLedger:
        """When this memory's documents expire (one table, every namespace)."""
        return ExpiryLedger(self._expiry_url())

    def _ttls(
        self,
        ids: Sequence[str],
        ttl: TTL,
        *,
        existing: Collection[str] = (),
        anew: Collection[str] = (),
    ) -> dict[str, Rule]:
        """The time to live a write gives each document: the item's, not the memory's.

        ``ttl`` when given. Else (``"default"``) one in ``existing`` keeps its
        own (:data:`~memories.stores.expiry.OWN`: restarted; a permanent one
        stays so) and a new one gets the memory's ``ttl``; a new one has no row
        to write without one, unless it is in ``anew`` (expired, written anew:
        its old row goes).

        Raises:
            InvalidInputError: ``ttl`` is not minutes > 0, None or ``"default"``.
        """
        if ttl != "default":
            if ttl is not None and (
                isinstance(ttl, bool) or not isinstance(ttl, int | float) or not ttl > 0
            ):
                raise InvalidInputError(f"ttl must be minutes > 0, None or 'default', got {ttl!r}.")
            return dict.fromkeys(ids, ttl)
        kept = (i for i in ids if i in existing or self.ttl is not None or i in anew)
        return {i: OWN if i in existing else self.ttl for i in kept}

    def _storing(
        self, write: Step, ids: Sequence[str], ttl: TTL = "default", *, chosen: bool = False
    ) -> Steps[Any]:
        """Write documents (``write``) after their time to live.

        The index and the expiry times are two stores: the expiry rows go
        first, so a crash between the two leaves a row whose document never
        came (the sweep deletes nothing and drops it), never a document that
        lives forever. ``chosen``: the caller chose the ids, so some may exist
        already and keep their own time to live (asked of the index only when
        the memory has a default to tell them from new ones).
        """
        existing: Collection[str] = ()
        if chosen and ttl == "default":
            existing = ids if self.ttl is None else (yield step(self._existing, ids))
        ttls = self._ttls(ids, ttl, existing=existing)
        if ttls:
            yield step(self.expiry.set_many, self.namespace, ttls, now=self.clock())
        return (yield write)

    def _existing(self, ids: Sequence[str]) -> set[str]:
        """Those of ``ids`` this namespace holds (queued ones too)."""
        return {found.id for found in self.backend.get(ids)}

    def expired_items(
        self,
        namespace: Namespace | None = None,
        /,
        *,
        limit: int | None = None,
        offset: int = 0,
        keys: Sequence[str] | None = None,
    ) -> builtins.list[Expiring]:
        """The items every read leaves out now: expired, not swept yet (few).

        Those of ``namespace`` (None: every namespace of the store), among
        ``keys`` (the ids at hand: few) when given, a page of ``limit`` from
        ``offset`` when given; none with ``hide_expired=False``. Tools that
        read the store themselves (the inspector) leave these out too.
        """
        if not self.hide_expired:
            return []
        return self.expiry.expired(
            now=self.clock(), namespace=namespace, limit=limit, offset=offset, keys=keys
        )

    aexpired_items: ClassVar = blocking_twin(expired_items)

    def expired_counts(
        self, namespace: Namespace | None = None, /, *, keys: Sequence[str] | None = None
    ) -> dict[Namespace, int]:
        """How many of :meth:`expired_items` each namespace holds: one aggregate query."""
        if not self.hide_expired:
            return {}
        return self.expiry.expired_counts(now=self.clock(), namespace=namespace, keys=keys)

    aexpired_counts: ClassVar = blocking_twin(expired_counts)

    def unexpired(
        self, namespace: Namespace, /, *, prefix: str = ""
    ) -> Callable[[sa.ColumnElement[str]], sa.ColumnElement[bool]] | None:
        """For a tool reading the items' SQL table itself (the collection's ledger): a condition
        on its key column leaving out what every read hides (:meth:`ExpiryLedger.unexpired`);
        None: nothing is hidden.
        """
        if not self.hide_expired:
            return None
        return partial(
            self.expiry.unexpired, namespace, now=self.clock(), prefix=prefix, mark=self.expiry_mark
        )

    @property
    def index_namespace(self) -> Namespace:
        """The namespace the backend keeps this memory's documents under: its own."""
        return self.namespace

    @property
    def expiry_mark(self) -> str:
        """What this memory's expiry rows' keys start with, before the document's id: none."""
        return ""

    def _expired_ids(self) -> Steps[set[str]]:
        """The ids of this namespace's documents reads leave out (:meth:`expired_items`)."""
        found = yield step(self.expired_items, self.namespace)
        mark = self.expiry_mark
        return {e.key.removeprefix(mark) for e in found if e.key.startswith(mark)}

    def _touching(self, ids: Sequence[str]) -> Steps[None]:
        """Start the time to live of documents just read again (``refresh_on_read``)."""
        if self.refresh_on_read and ids:
            pairs = [(self.namespace, self.expiry_mark + i) for i in ids]
            yield step(self.expiry.refresh, pairs, now=self.clock())

    def _live_search(self, request: VectorQuery) -> Steps[list[SearchResult]]:
        """The backend's search with expired documents left out, reading past them to fill k."""
        expired = yield from self._expired_ids()
        limit = request.k or self.k
        if expired:
            request = replace(request, k=limit + len(expired))
        found = yield step(self.backend.search, request)
        if expired:
            found = [r for r in found if r.id not in expired][:limit]
        yield from self._touching([r.id for r in found])
        return list(found)

    def sweep(
        self, *, batch: int = 500, dry_run: bool = False, own: bool = False
    ) -> dict[str, int]:
        """Delete every expired document of every namespace of the store; how many per namespace.

        With ``own``, only this memory's namespace. A crash mid-way leaves the
        rest to the next sweep. With ``dry_run`` it only counts.
        """
        only = self.namespace if own else None
        return self.expiry.sweep(
            self._expire_in, now=self.clock(), batch=batch, dry_run=dry_run, namespace=only
        )

    def _expire_in(
        self, namespace: tuple[str, ...], expired: builtins.list[Expiring], now: float
    ) -> None:
        twin = self if namespace == self.namespace else in_namespace(self, namespace)
        twin._expire(expired, now)

    def _expire(self, expired: Sequence[Expiring], now: float) -> None:
        """Delete expired documents of this namespace from the index, with their expiry rows.

        Only those still expired: a document written again since the sweep
        read its row (same id, a new time to live) is kept.
        """
        ids = [e.key for e in expired]
        self.backend.delete_expired(self.namespace, ids, self.expiry, now=now)
        self.backend.flush()

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


class DocumentMemory(IndexedMemory):
    """Documents in one namespace of a vector store, with the document API.

    Search, bulk add, delete, flush, dead letters, status, clear and erase,
    written once for the vector and the example memories (see
    :class:`IndexedMemory` for the arguments; ``memory_key``, ``input_key``
    and ``output_key`` are LangChain's).
    """

    memory_key: str = "history"
    input_key: str | None = None
    output_key: str | None = None

    @property
    def memory_variables(self) -> list[str]:
        """The prompt variables this memory fills: ``[memory_key]``."""
        return [self.memory_key]

    def _make_backend(self) -> VectorBackend:
        """The backend, discarding the expiry rows of the documents it deletes."""
        backend = super()._make_backend()
        backend.expiry = self.expiry
        return backend

    # -- the document API ----------------------------------------------------------

    def _search_steps(
        self,
        query: str,
        /,
        *,
        k: int | None = None,
        filter: Mapping[str, Any] | None = None,
        min_score: float | None = None,
    ) -> Steps[list[SearchResult]]:
        """The ``k`` documents of this namespace that best match ``query``, best first.

        Args:
            k: how many to return at most; default ``self.k``.
            filter: a Chroma ``where`` clause on metadata, e.g.
                ``{"session": "s1"}`` or ``{"$and": [...]}``. It may not name
                ``"namespace"``: the namespace is always this memory's.
            min_score: leave out documents scoring below this (default ``self.min_score``).

        Results come in recall's order (hybrid recall also weighs rare words,
        neighbouring turns and the speaker a query names) and their scores are
        recall's on a calibrated scale (:mod:`memories.stores.recall.scores`), so
        they never rise down the list; ``min_score`` drops results, never reorders them.

        Turns saved before the call are found even while the background
        writer still has them; a filtered search writes them first (Chroma
        evaluates the filter).
        """
        floor = self._floor(min_score)
        found = yield from self._live_search(self._request(query, k, filter))
        return passing(found, floor)

    search, asearch = twins(_search_steps)

    def add(
        self,
        texts: Sequence[str],
        /,
        *,
        metadatas: Sequence[Mapping[str, Any] | None] | None = None,
        ids: Sequence[str] | None = None,
        progress: bool | None = None,
        ttl: TTL = "default",
    ) -> list[str]:
        """Store many documents at once (bulk import), in batches; return their ids.

        A document's metadata may give ``session`` and ``turn`` (its index in
        that session) so that neighbour smoothing knows its place, and
        ``timestamp`` (seconds since the epoch) for when it was said.

        Args:
            metadatas: one dict (or None) per text.
            ids: one id per text; an existing id is replaced. Default: new ids.
            progress: show a progress bar; default: for more than 1,000 texts.
            ttl: minutes each lives from now; None: forever; default: the memory's ``ttl``.
        """
        rows = self._bulk_rows(texts, metadatas, ids)
        written = [row.doc_id for row in rows]
        adding = step(self.backend.add, rows, progress=show_progress(progress, rows))
        run(self._storing(adding, written, ttl, chosen=ids is not None))
        return written

    aadd: ClassVar = blocking_twin(add)

    def _delete_steps(
        self, ids: Sequence[str] | None = None, /, *, filter: Mapping[str, Any] | None = None
    ) -> Steps[None]:
        """Delete documents of this namespace by id, by metadata filter, or both (AND).

        Raises:
            InvalidInputError: neither ids nor a filter given (use :meth:`clear`).
        """
        yield step(self.backend.delete, *self._deletion(ids, filter))

    delete, adelete = twins(_delete_steps)

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

        Waits at most ``timeout`` seconds (default
        :data:`~memories.stores.vector.writes.EXIT_FLUSH_SECONDS`) and raises nothing:
        documents it could not write are logged once, with the outbox they
        wait in, and written by a later ``flush()`` or process. Close a
        memory before deleting its store's folder. The background writer
        itself keeps serving other memories.

        Returns:
            True when nothing of this namespace waits any more.
        """
        return self.backend.close(timeout=timeout)

    def pending(self) -> int:
        """How many documents of this namespace wait in the outbox (queued or failed)."""
        return self.backend.pending()

    def usage_namespace(self) -> str:
        """The namespace, ``"users.maya"``: its calls are counted and budgeted under it."""
        return namespace_text(self.namespace)

    def status(self) -> VectorStatus:
        """The write mode, the documents waiting, and the last failed write if none worked since."""
        return self.backend.status()

    def _clear_steps(self) -> Steps[None]:
        """Delete the documents this memory's session wrote (queued ones are written first).

        Other sessions' documents in the namespace stay: a "new chat" that
        clears its memory must not erase a user's long-term memory. To erase
        the whole namespace, call :meth:`erase_namespace`.

        Raises:
            BackendUnavailableError: the store cannot be reached (nothing is deleted).
        """
        yield step(self.backend.forget_session)

    clear, aclear = twins(_clear_steps)

    def _erase_namespace_steps(self) -> Steps[None]:
        """Delete every document of this memory's namespace, every session's, queued ones too."""
        yield step(self.backend.erase_namespace)

    erase_namespace, aerase_namespace = twins(_erase_namespace_steps)

    # -- export and import (the command line's) -------------------------------------

    def export_documents(self) -> list[SearchResult]:
        """Every document of the namespace, oldest first (queued ones written first)."""
        return sorted(self.backend.documents(), key=_document_order)

    def import_documents(
        self, ids: Sequence[str], texts: Sequence[str], metadatas: Sequence[Mapping[str, Any]]
    ) -> None:
        """Store exported documents under their ids (a second import replaces, never duplicates)."""
        self.add(texts, metadatas=metadatas, ids=ids, progress=False)

    # -- checking requests (pure) -------------------------------------------------

    def _bulk_rows(
        self,
        texts: Sequence[str],
        metadatas: Sequence[Mapping[str, Any] | None] | None,
        ids: Sequence[str] | None,
    ) -> list[OutboxRow]:
        if isinstance(texts, str) or not all(isinstance(t, str) for t in texts):
            raise InvalidInputError(f"texts must be a list of strings, got {texts!r:.80}.")
        check_storable([HumanMessage(text) for text in texts])  # before any expiry row
        count = len(texts)
        if metadatas is not None and len(metadatas) != count:
            raise InvalidInputError(f"Got {len(metadatas)} metadatas for {count} texts.")
        if ids is not None:
            if isinstance(ids, str) or len(ids) != count:
                raise InvalidInputError(f"ids must be a list of {count} strings, got {ids!r:.80}.")
            if not all(isinstance(i, str) and i for i in ids) or len(set(ids)) != count:
                raise InvalidInputError("ids must be distinct non-empty strings.")
        rows, stamp = [], self.backend.bookkeeping(turn=False)
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
        if where is not None:
            self.backend.check_filter(where)
        return None if ids is None else checked_ids(ids), None if where is None else dict(where)


def checked_ids(ids: Sequence[str]) -> list[str]:
    """``ids`` as a list, if it is a list of strings (InvalidInputError naming it if not)."""
    if isinstance(ids, str) or not all(isinstance(i, str) for i in ids):
        raise InvalidInputError(f"ids must be a list of strings, got {ids!r:.80}.")
    return list(ids)


def _document_order(result: SearchResult) -> tuple[float, int]:
    return float(result.metadata.get("timestamp", 0.0)), int(result.metadata.get("turn", 0))


def show_progress(progress: bool | None, rows: Sequence[OutboxRow]) -> bool:
    """Whether a bulk write shows a progress bar: as asked, else for more than 1,000 rows."""
    return progress if progress is not None else len(rows) > _PROGRESS_FROM
