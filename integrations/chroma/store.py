"""ChromaStore: the one class that talks to Chroma, and where each namespace lives.

Chroma keeps every collection it opened loaded (about 2.5 MB and 4 open files
each), so small namespaces share one of :data:`SHARDS` shard collections,
filtered on the namespace, and one past ``promote_at`` documents gets a
collection of its own. The placement rule, its cache and its thresholds are on
the architecture page ("Chroma: where a namespace lives"); the measurements
behind them in docs/performance.md; the moves between placements in :mod:`.moves`.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, Literal

import httpx
from chromadb.errors import ChromaError, NotFoundError
from langchain_core.embeddings import Embeddings
from memories.integrations.chroma import moves
from memories.integrations.chroma.parts import (
    _COLLECTION_PREFIX,
    _DELETION_SECONDS,
    _INCOMPLETE_KEY,
    _LEAVING_KEY,
    _LOG_TIMEOUT,
    _LOGGED_WRITES,
    _NAMESPACE_META_KEY,
    _PLACEMENT_SECONDS,
    _REMEMBERED,
    _SHARD_KEY,
    _T,
    CHROMA_FILE,
    CHROMA_MODES,
    SHARDS,
    ChromaMode,
    Demotion,
    LangChainEmbeddingFunction,
    StoredRecord,
    _digest,
    _pages,
    _Placement,
    _records,
    _shard_of,
    _store_id,
    _tag,
    shared_client,
)

from memories.errors import (
    BackendError,
    BackendUnavailableError,
    ConfigError,
)
from memories.kernel.checks import whole_number
from memories.kernel.lru import LRU
from memories.kernel.paths import default_file
from memories.stores.recall import ScoredId
from memories.stores.vector.filters import NAMESPACE_KEY, scoped_filter


class ChromaStore:
    """Documents in Chroma: small namespaces in shared shards, large ones in a collection each.

    Every method takes the namespace key (see
    :func:`memories.kernel.namespaces.namespace_key`) first, works on that
    namespace's documents only, ANDs the namespace with any caller filter and
    drops any record whose metadata names another namespace.

    Args:
        mode: ``"persistent"``, ``"memory"`` or ``"http"``.
        path: the folder of a persistent store.
        host: the Chroma server's host, in ``"http"`` mode.
        port: the Chroma server's port, in ``"http"`` mode.
        ssl: use HTTPS to reach the server.
        collection: prefix of the collection names (3 or more characters from
            ``[A-Za-z0-9._-]``, starting with a letter or digit).
        embeddings: what the collections are told embeds their documents; the
            store itself only ever receives embeddings.
        timeout: seconds an HTTP request may take.
        promote_at: a namespace holding more documents than this in its shard
            is moved into a collection of its own (:meth:`promote`) by a write.
        demote_on_open: move a namespace's own collection of at most ``promote_at // 2``
            documents (a store written before shards) into its shard when this object
            first looks the namespace up (:meth:`demote`); False leaves it to ``memories reshard``.
    """

    def __init__(
        self,
        *,
        mode: ChromaMode = "persistent",
        path: str | None = None,
        host: str = "localhost",
        port: int = 8000,
        ssl: bool = False,
        collection: str = "memories",
        embeddings: Embeddings | None = None,
        timeout: float = 30.0,
        promote_at: int = 2_000,
        demote_on_open: bool = True,
    ) -> None:
        path = default_file("chroma") if path is None else path
        if mode not in CHROMA_MODES:
            raise ConfigError(
                f"Unknown Chroma mode {mode!r}; use one of: {', '.join(CHROMA_MODES)}."
            )
        if not _COLLECTION_PREFIX.fullmatch(collection) or len(collection) < 3:
            raise ConfigError(
                f"collection {collection!r} is not a usable Chroma collection name prefix: use "
                "3 to 200 characters from A-Z a-z 0-9 . _ - starting with a letter or digit."
            )
        whole_number(promote_at, "promote_at", least=1, hint="documents")
        if not isinstance(demote_on_open, bool):
            raise ConfigError(f"demote_on_open must be True or False; got {demote_on_open!r}.")
        self.mode = mode
        self.path = str(Path(path).expanduser().resolve()) if mode == "persistent" else path
        self.host = host
        self.port = port
        self.ssl = ssl
        self.timeout = timeout
        self.collection_prefix = collection
        self.promote_at = promote_at
        self.demote_on_open = demote_on_open
        self._embedding_function = LangChainEmbeddingFunction(embeddings)
        self._client: Any = None
        self._id: str | None = None
        self._lock = threading.Lock()
        # Bounded: a process serving many users keeps no per-user state forever.
        self._placements: LRU[str, _Placement] = LRU(_REMEMBERED, locked=True)
        self._written: LRU[str, int] = LRU(_REMEMBERED)  # under self._lock: read, then written
        self._shards: dict[int, Any] = {}
        # Namespaces whose own collection a first look found to stay (another width).
        self._staying: LRU[str, None] = LRU(_REMEMBERED, locked=True)
        self._promoting = threading.Lock()
        # Names this object's demotion marks, so that it knows its own from another's.
        self._token = uuid.uuid4().hex

    @property
    def location(self) -> str:
        """Where the documents live, for messages: a folder, ``memory`` or a server URL."""
        if self.mode == "persistent":
            return f"Chroma folder {self.path!r}"
        if self.mode == "memory":
            return "in-memory Chroma"
        scheme = "https" if self.ssl else "http"
        return f"Chroma server at {scheme}://{self.host}:{self.port}"

    @property
    def target(self) -> str:
        """A string naming this store and collection prefix; equal for stores that share data.

        A persistent store is named by the id kept in its folder
        (:data:`STORE_ID_FILE`, written on first use), not by the folder's path:
        moved, renamed or mounted elsewhere, it is the same store. A copy of the
        folder keeps the id too, so copies tell their rows apart by their
        outboxes (each folder's own by default).
        """
        if self.mode == "persistent":
            if self._id is None:
                with self._lock:
                    try:
                        self._id = self._id or _store_id(Path(self.path))
                    except OSError as exc:
                        raise BackendUnavailableError(
                            f"Cannot read or write the store id in the {self.location}: {exc}"
                        ) from exc
            return f"persistent:id:{self._id}#{self.collection_prefix}"
        where = {"memory": "", "http": f"{self.host}:{self.port}"}
        return f"{self.mode}:{where[self.mode]}#{self.collection_prefix}"

    @property
    def former_target(self) -> str | None:
        """The :attr:`target` this store had before stores kept an id: its folder's path.

        Rows filed under it by an earlier version are filed under :attr:`target`
        on first use (:meth:`memories.stores.vector.outbox.SQLOutbox.adopt`).
        None for stores that are not persistent: their target never changed.
        """
        if self.mode != "persistent":
            return None
        return f"persistent:{self.path}#{self.collection_prefix}"

    def collection_name(self, namespace: str, /) -> str:
        """The namespace's own collection: the prefix and a digest of the namespace key.

        It holds the namespace once it exists and is complete; see :meth:`placement`.
        """
        return f"{self.collection_prefix}-{_digest(namespace)}"

    def shard_name(self, namespace: str, /) -> str:
        """The shard a namespace lives in until it has a collection of its own."""
        return self._shard_name(_shard_of(namespace))

    def placement(self, namespace: str, /) -> Literal["own", "shard"]:
        """Where the namespace's documents are read from now (looked up, not cached)."""
        with self._translate("find the namespace's collection"):
            return "shard" if self._resolve(namespace, fresh=True).shard else "own"

    def count(self, namespace: str, /) -> int:
        """How many documents the namespace holds (in a shard, a filtered get of its ids)."""

        def run(place: _Placement) -> int:
            if not place.shard:
                return int(place.collection.count())
            return len(self._shard_ids(place.collection, namespace))

        return self._call(namespace, "count documents", run, missing=lambda n: n == 0)

    def nearest(
        self,
        namespace: str,
        embedding: Sequence[float],
        /,
        *,
        n: int,
        where: Mapping[str, Any] | None = None,
    ) -> list[ScoredId]:
        """Ids and cosine similarities of the ``n`` nearest documents (that pass ``where``).

        A search that keeps only a few of its candidates reads those with
        :meth:`get`: leaving texts and metadata out of a top-100 query costs
        2 ms instead of 5 at 10,000 documents. In a shard the query is
        filtered on the namespace and only ids tagged with it are kept.
        """

        def run(place: _Placement) -> list[ScoredId]:
            try:
                result = place.collection.query(
                    query_embeddings=[list(embedding)],
                    n_results=n,
                    where=self._scope(place, namespace, where),
                    include=["distances"],
                )
            except ChromaError as exc:
                if moves.other_width(self, place, namespace, exc):
                    return []  # nothing of this namespace in a shard of another width
                raise
            found = zip(result["ids"][0], result["distances"][0], strict=True)
            tag = _tag(namespace) if place.shard else ""
            return [ScoredId(i[len(tag) :], 1.0 - float(d)) for i, d in found if i.startswith(tag)]

        return self._call(namespace, "query", run, missing=lambda found: not found)

    def get(
        self,
        namespace: str,
        /,
        *,
        ids: Sequence[str] | None = None,
        where: Mapping[str, Any] | None = None,
        text: bool = True,
        embeddings: bool = False,
    ) -> list[StoredRecord]:
        """Documents by id and/or filter (every document when both are None), in pages.

        With ``embeddings``, each record carries its stored embedding too (one read).
        """
        include = ["documents", "metadatas"] if text else ["metadatas"]
        if embeddings:
            include.append("embeddings")
        if ids is not None:
            ids = list(ids)
            if not ids:
                return []

        def run(place: _Placement) -> list[StoredRecord]:
            scoped = self._scope(place, namespace, where)
            if ids is None:
                pages = _pages(place.collection, where=scoped, include=include)
            else:
                keys = self._ids(place, namespace, ids)
                pages = iter([place.collection.get(ids=keys, where=scoped, include=include)])
            records = [r for page in pages for r in _records(page)]
            return self._own(namespace, place, records)

        def missing(records: list[StoredRecord]) -> bool:
            return not records if ids is None else len(records) < len(ids)

        return self._call(namespace, "read documents", run, missing=missing)

    def vectors(self, namespace: str, ids: Sequence[str], /) -> dict[str, list[float]]:
        """The stored embeddings of these documents of the namespace, by id."""
        if not ids:
            return {}
        records = self.get(namespace, ids=ids, text=False, embeddings=True)
        return {r.id: r.embedding for r in records if r.embedding is not None}

    def namespaces(self, *, shards: bool = True) -> list[str]:
        """The namespace keys of this store's own collections and shards, sorted.

        An own collection is listed while it exists, empty or not (:meth:`count`
        tells); a sharded namespace while it holds a document. The shards are read
        whole (3.2 s at 50,000 sharded documents), so this is for tools, not for a
        request's path; ``shards=False`` lists the own collections only (one call).
        """
        with self._translate("list collections"):
            collections = self._get_client().list_collections()
            found = set()
            shard_names = {self._shard_name(i) for i in range(SHARDS)}
            for collection in collections:
                metadata = collection.metadata or {}
                namespace = metadata.get(_NAMESPACE_META_KEY)
                # Only collections this store made for that namespace (same prefix and digest).
                if namespace and self.collection_name(str(namespace)) == collection.name:
                    found.add(str(namespace))
                elif shards and collection.name in shard_names and _SHARD_KEY in metadata:
                    pages = _pages(collection, include=["metadatas"])
                    metadatas = [m for page in pages for m in page["metadatas"] if m]
                    found.update(str(m[NAMESPACE_KEY]) for m in metadatas if NAMESPACE_KEY in m)
        return sorted(found)

    def upsert(
        self,
        namespace: str,
        /,
        *,
        ids: Sequence[str],
        texts: Sequence[str],
        embeddings: Sequence[Sequence[float]],
        metadatas: Sequence[Mapping[str, Any]],
        replace: bool = True,
    ) -> None:
        """Write documents; each metadata gets the namespace.

        With ``replace`` an existing id is overwritten (Chroma's upsert); without
        it an existing id is left as it is (Chroma's add, a third cheaper at
        10,000 documents), which is what a retried write of new ids wants. It
        repeats itself where a promotion or a demotion (:mod:`.moves`) moves the
        namespace, so that none is lost; into a shard, it now and then counts the
        namespace and promotes it past ``promote_at``.
        """
        ids = list(ids)
        if not ids:
            return
        stamped = [{**m, NAMESPACE_KEY: namespace} for m in metadatas]
        vectors = [list(e) for e in embeddings]
        texts = list(texts)

        def write(collection: Any, keys: list[str]) -> None:
            put = collection.upsert if replace else collection.add
            put(ids=keys, documents=texts, embeddings=vectors, metadatas=stamped)

        def apply(place: _Placement) -> None:
            write(place.collection, self._ids(place, namespace, ids))

        def run(place: _Placement) -> _Placement:
            try:
                apply(place)
            except ChromaError as exc:
                if not moves.other_width(self, place, namespace, exc):
                    raise
                # The shard holds another embedding model's vectors (other namespaces'):
                # this namespace, empty there, gets a collection of its own.
                own = moves.own_collection_made(self, namespace, incomplete=False)
                write(own, ids)
                return self._remember(namespace, own, shard=False)
            return place

        def into_own(shard: _Placement, own: Any | None, complete: bool) -> bool:
            if own is not None and _LEAVING_KEY in (own.metadata or {}):
                # Moving into the shard: its readers read the collection until it goes
                # (a server may answer a write during the deletion with another error).
                with suppress(ChromaError):
                    write(own, ids)
                return False
            if own is not None:
                # A promotion started (here or elsewhere) after this write was routed:
                # the documents must reach the collection the namespace moves to.
                write(own, ids)
            if own is None or not complete:
                moves.check_size(self, namespace, len(ids))
                return False
            shard.collection.delete(ids=self._ids(shard, namespace, ids))
            self._remember(namespace, own, shard=False)
            return True

        self._following(namespace, "write documents", run, apply, into_own)

    def delete(
        self,
        namespace: str,
        /,
        *,
        ids: Sequence[str] | None = None,
        where: Mapping[str, Any] | None = None,
    ) -> None:
        """Delete documents by id and/or filter; with neither, every document of the namespace.

        Like :meth:`upsert`, it repeats itself where a promotion or a demotion moves the namespace.
        """
        if ids is not None:
            ids = list(ids)
            if not ids:
                return

        def erase(place: _Placement) -> None:
            scoped = self._scope(place, namespace, where)
            if scoped is None and ids is None:
                scoped = {NAMESPACE_KEY: {"$eq": namespace}}
            keys = None if ids is None else self._ids(place, namespace, ids)
            place.collection.delete(ids=keys, where=scoped)

        def run(place: _Placement) -> _Placement:
            erase(place)
            return place

        def into_own(shard: _Placement, own: Any | None, complete: bool) -> bool:
            # A promotion may have copied them already; a demotion reads it until it goes.
            if own is not None:
                with suppress(NotFoundError):
                    erase(_Placement(own, False, shard.checked))
            return own is not None

        self._following(namespace, "delete documents", run, erase, into_own)

    def _following(
        self,
        namespace: str,
        action: str,
        run: Callable[[_Placement], _Placement],
        apply: Callable[[_Placement], None],
        into_own: Callable[[_Placement, Any | None, bool], bool],
    ) -> None:
        """A write or delete where the namespace is, then where it moves (:mod:`.moves`).

        ``run`` does it in the namespace's placement and returns the one it wrote to.
        From a shard, ``into_own(shard, own, complete)`` repeats it in the namespace's
        own collection (None when there is none) and says whether to go on. Done in an
        own collection that a demotion marked or deleted meanwhile, ``apply`` repeats it
        in the shard: a demotion's copy never overwrites it, and may have copied what
        it deletes.
        """
        place = self._call(namespace, action, run)
        with self._translate(action):
            if place.shard:
                own, complete = self._own_collection(namespace)
                if not into_own(place, own, complete):
                    return
            if moves.leaving(self, namespace):
                apply(_Placement(self._shard(namespace), True, place.checked))

    # -- Chroma's write-ahead log (erasure) ---------------------------------------------

    def logged(self, namespace: str, /, *, where: Mapping[str, str] | None = None) -> int:
        """How many writes of the namespace's documents (those matching ``where``, a metadata
        equality) Chroma's write-ahead log still holds with their text and embedding.

        A persistent Chroma keeps every write in its log (``embeddings_queue`` in
        ``chroma.sqlite3``) until its vector index is saved, every
        ``hnsw:sync_threshold`` writes (1,000) of a collection: a deleted
        document's text stays there meanwhile. Other modes: 0 (a server's log is
        the server's; an in-memory one goes with the process).
        """
        if not self._log_file().exists():
            return 0
        with self._log(namespace, where) as (_, rows):
            return len(rows)

    def scrub_log(self, namespace: str, /, *, where: Mapping[str, str] | None = None) -> int:
        """Blank the logged writes :meth:`logged` counts, once their documents are deleted:
        no text, no metadata, an all-zero embedding. Returns how many.

        The rows stay, so Chroma replays the same operations when it next loads
        its index (an add of nothing, then its delete). Call it after deleting
        the documents: a document still stored would come back from the log
        with a blank embedding.
        """
        if not self._log_file().exists():
            return 0
        with self._log(namespace, where, write=True) as (connection, rows):
            connection.executemany(
                "UPDATE embeddings_queue SET metadata = NULL, vector = CASE WHEN vector IS NULL "
                "THEN NULL ELSE zeroblob(length(vector)) END WHERE seq_id = ?",
                [(seq,) for seq in rows],
            )
            return len(rows)

    def _log_file(self) -> Path:
        """Where a persistent store's log is (a path that exists in no other mode)."""
        if self.mode != "persistent":
            return Path(os.devnull) / CHROMA_FILE
        return Path(self.path) / CHROMA_FILE

    @contextmanager
    def _log(
        self, namespace: str, where: Mapping[str, str] | None, *, write: bool = False
    ) -> Iterator[tuple[sqlite3.Connection, list[int]]]:
        """The log's writes of the namespace's documents in this store's collections (its
        own and its shard), matching ``where``, in a transaction (immediate to ``write``)."""
        with self._translate("read Chroma's write-ahead log"):
            connection = sqlite3.connect(
                self._log_file(), timeout=_LOG_TIMEOUT, isolation_level=None
            )
            try:
                connection.execute("BEGIN IMMEDIATE" if write else "BEGIN")
                names = (self.collection_name(namespace), self.shard_name(namespace))
                found = connection.execute(
                    "SELECT id FROM collections WHERE name IN (?, ?)", names
                ).fetchall()
                topics = [f"%/{collection}" for (collection,) in found]
                fields = {NAMESPACE_KEY: namespace, **(where or {})}
                rows = [
                    seq
                    for topic in topics
                    for (seq,) in connection.execute(
                        "SELECT seq_id FROM embeddings_queue WHERE topic LIKE ? "
                        f"AND operation IN {_LOGGED_WRITES} AND metadata IS NOT NULL "
                        + "".join(" AND json_extract(metadata, ?) = ?" for _ in fields),
                        [topic, *(v for k, value in fields.items() for v in (f'$."{k}"', value))],
                    )
                ]
                yield connection, rows
                connection.execute("COMMIT")
            finally:
                if connection.in_transaction:
                    connection.execute("ROLLBACK")
                connection.close()

    def promote(self, namespace: str, /) -> None:
        """Move a namespace from its shard into a collection of its own (:mod:`.moves`).

        Running it again, after a crash at any point or on a namespace already
        promoted, finishes the job: a half-copied collection is completed, not trusted.
        """
        with self._promoting, self._translate("move the namespace to its own collection"):
            moves.promote(self, namespace)

    def demote(self, namespace: str, /, *, dry_run: bool = False) -> Demotion:
        """Move a small namespace from its own collection into its shard (undoes :meth:`promote`).

        For a namespace of at most ``promote_at`` documents of a store made before
        shards; safe while other processes read and write it, and finished by
        running it again after a crash (:mod:`.moves`). ``kept`` says why a
        namespace stays: in its shard already, more than ``promote_at`` documents,
        embeddings of another width than its shard's, or moved by another store.
        ``dry_run`` writes nothing: the result says what a real run would do.
        """
        with self._promoting, self._translate("move the namespace into its shard"):
            return moves.demote(self, namespace, limit=self.promote_at, dry_run=dry_run)

    def reshard(self, *, dry_run: bool = False) -> list[Demotion]:
        """:meth:`demote` every namespace that has a collection of its own, in key order."""
        return [self.demote(n, dry_run=dry_run) for n in self.namespaces(shards=False)]

    def _resolve(self, namespace: str, *, fresh: bool = False) -> _Placement:
        """The namespace's placement: cached for :data:`_PLACEMENT_SECONDS`, else looked up."""
        now = time.monotonic()
        cached = self._placements.get(namespace)
        if cached is not None and not fresh and now - cached.checked < _PLACEMENT_SECONDS:
            return cached
        own, complete = self._own_collection(namespace)
        if own is None or not complete or moves.demoted_on_open(self, namespace, own):
            return self._remember(namespace, self._shard(namespace), shard=True)
        return self._remember(namespace, own, shard=False)

    def _remember(self, namespace: str, collection: Any, *, shard: bool) -> _Placement:
        place = _Placement(collection, shard, time.monotonic())
        self._placements.put(namespace, place)
        return place

    def _own_collection(self, namespace: str) -> tuple[Any | None, bool]:
        """The namespace's own collection if it exists, and whether it is complete."""
        name = self.collection_name(namespace)
        try:
            collection = self._collection(name)
        except NotFoundError:
            return None, False
        metadata = collection.metadata or {}
        self._check_owner(name, metadata, namespace)
        return collection, not metadata.get(_INCOMPLETE_KEY)

    def _shard(self, namespace: str) -> Any:
        number = _shard_of(namespace)
        shard = self._shards.get(number)
        if shard is None:
            shard = self._shards[number] = self._made(
                self._shard_name(number), {_SHARD_KEY: number}
            )
        return shard

    def _shard_name(self, number: int) -> str:
        return f"{self.collection_prefix}-shard-{number:02d}"

    def _collection(self, name: str) -> Any:
        """The collection of this name (``NotFoundError`` when there is none)."""
        return self._get_client().get_collection(name, embedding_function=self._embedding_function)

    def _made(self, name: str, metadata: dict[str, Any]) -> Any:
        """The collection of this name, made with ``metadata`` (and cosine distance) if missing."""
        return self._get_client().get_or_create_collection(
            name,
            metadata=metadata,
            configuration={"hnsw": {"space": "cosine"}},
            embedding_function=self._embedding_function,
        )

    def _call(
        self,
        namespace: str,
        action: str,
        run: Callable[[_Placement], _T],
        *,
        missing: Callable[[_T], bool] | None = None,
    ) -> _T:
        """``run`` on the namespace's placement, looked up again when it may have moved.

        A collection deleted behind our back (another process, a server reset)
        is reopened once, and so is one that failed otherwise while a demotion
        deleted it. A read that found nothing, or less than asked, in a
        cached shard placement looks again: another process may have promoted
        the namespace since; in an own collection being demoted, or gone, it
        reads the shard.
        """
        with self._translate(action):
            place = self._resolve(namespace)
            try:
                result = run(place)
            except NotFoundError:
                with self._lock:
                    self._shards.clear()
                return run(self._resolve(namespace, fresh=True))
            except ChromaError:
                # A Chroma server answers a call made while a demotion deletes the collection
                # with other errors than NotFoundError ("Missing metadata segment").
                again = None if place.shard else self._moved_meanwhile(namespace)
                if again is None:
                    raise
                return run(again)
            if missing is None or not missing(result):
                return result
            # An own collection read while a demotion deleted it: Chroma may answer nothing
            # rather than NotFoundError then.
            if place.shard or moves.leaving(self, namespace):
                again = self._resolve(namespace, fresh=True)
                if again.shard != place.shard:
                    result = run(again)
            return result

    def _moved_meanwhile(self, namespace: str) -> _Placement | None:
        """The shard's placement when the namespace's own collection, being demoted, is gone
        within :data:`_DELETION_SECONDS`; None when it is not being demoted, or stays."""
        deadline = time.monotonic() + _DELETION_SECONDS
        while moves.leaving(self, namespace):
            again = self._resolve(namespace, fresh=True)
            if again.shard:
                return again
            if time.monotonic() >= deadline:
                return None
            time.sleep(0.05)
        return None

    def _scope(
        self, place: _Placement, namespace: str, where: Mapping[str, Any] | None
    ) -> dict[str, Any] | None:
        """The ``where`` of a read: a shard is always filtered on the namespace."""
        scoped = scoped_filter(namespace, where)
        if scoped is None and place.shard:
            return {NAMESPACE_KEY: {"$eq": namespace}}
        return scoped

    def _ids(self, place: _Placement, namespace: str, ids: Sequence[str]) -> list[str]:
        """Chroma's ids: in a shard, tagged with the namespace (an id is unique per namespace)."""
        tag = _tag(namespace) if place.shard else ""
        return [tag + i for i in ids]

    def _own(
        self, namespace: str, place: _Placement, records: list[StoredRecord]
    ) -> list[StoredRecord]:
        # The filter already asked for the namespace; this is the last line of defence.
        tag = _tag(namespace) if place.shard else ""
        return [
            StoredRecord(r.id[len(tag) :], r.text, r.metadata, embedding=r.embedding)
            for r in records
            if r.metadata.get(NAMESPACE_KEY) == namespace and r.id.startswith(tag)
        ]

    def _shard_ids(self, shard: Any, namespace: str, *, limit: int | None = None) -> list[str]:
        """The namespace's tagged ids in the shard (up to ``limit``)."""
        where = {NAMESPACE_KEY: {"$eq": namespace}}
        return shard.get(where=where, include=[], limit=limit)["ids"]

    def _check_owner(self, name: str, metadata: Mapping[str, Any], namespace: str) -> None:
        owner = metadata.get(_NAMESPACE_META_KEY)
        if owner != namespace:
            raise BackendError(
                f"Collection {name!r} in the {self.location} belongs to namespace {owner!r}, "
                f"not {namespace!r}; use another collection prefix."
            )

    def _get_client(self) -> Any:
        if self._client is None:
            where = (self.mode, self.path, self.host, self.port, self.ssl, self.timeout)
            self._client = shared_client(*where, location=self.location)
        return self._client

    @contextmanager
    def _translate(self, action: str) -> Iterator[None]:
        try:
            yield
        except (ChromaError, httpx.HTTPError, sqlite3.Error, OSError, ValueError) as exc:
            raise self._translated(action, exc) from exc

    def _translated(self, action: str, exc: Exception) -> BackendError:
        """Chroma's, the network's or SQLite's ``exc`` as ours, saying what to do."""
        if self.mode == "persistent" and not os.path.isdir(self.path):
            # Chroma reports it as "attempt to write a readonly database".
            return BackendUnavailableError(
                f"The {self.location} is gone: it was deleted while this process used it "
                f"(to {action}: {exc}). Close a memory (memory.close()) before deleting its "
                "folder; to go on, make the memory again on a folder that exists, in a new "
                "process."
            )
        # A ValueError naming "connect": HttpClient() when no server answers.
        connecting = isinstance(exc, ValueError) and "connect" in str(exc).lower()
        if connecting or isinstance(exc, (httpx.TransportError, ConnectionError)):
            return self._unavailable(action, exc)
        hint = ""
        if "dimension" in str(exc).lower():
            hint = (
                " The collection holds embeddings of another width: it was filled with "
                "another embedding model. Use the same embeddings, or another collection."
            )
        return BackendError(f"Chroma could not {action} in the {self.location}: {exc}.{hint}")

    def _unavailable(self, action: str, exc: Exception) -> BackendUnavailableError:
        what = f"The {self.location} cannot be reached (to {action}): {exc}."
        if self.mode == "http":
            what += (
                f" Start it (`chroma run --path DIR --host {self.host} --port {self.port}`) or "
                "fix host/port."
            )
        return BackendUnavailableError(what)
