"""Chroma as a document store: its three client modes, one collection per namespace.

:class:`ChromaStore` is the only code that talks to Chroma. It

- opens a client lazily in one of Chroma's modes: ``"persistent"``
  (``PersistentClient(path)``, embedded, the default), ``"memory"``
  (``EphemeralClient``, gone with the process) or ``"http"`` (``HttpClient``
  to a server started with ``chroma run``);
- keeps each namespace in a collection of its own (cosine space), named from a
  digest of the namespace, and also stamps every document with its namespace
  (see :mod:`memories.stores.vector.filters`); every record it returns is checked to
  belong to the namespace asked for;
- never lets Chroma embed anything with its default embedding function (which
  downloads a model): collections get :class:`LangChainEmbeddingFunction`, and
  the store passes embeddings it was given;
- translates Chroma, HTTP and SQLite errors into :class:`~memories.errors.BackendError`
  and :class:`~memories.errors.BackendUnavailableError`, ``from`` the original.

Two details measured on this machine (10,000 documents, 2 cores):

- A ``where`` filter costs Chroma about 30 ms even when it matches every
  document, against 5 ms for an unfiltered top-100 query. That is why a
  namespace is a collection rather than only a filter.
- ``count()`` is a scan: 2 ms at 10,000 documents, 25 ms at 100,000. A
  search checks that no one else wrote with :meth:`ChromaStore.change_token`
  first (12 µs), and counts only when it changed.
- An embedded write commits Chroma's SQLite file in rollback-journal mode with
  full sync: about 25 ms of wall time per ``add`` here, 7 ms of it CPU, the rest
  waiting for the disk. Switching that file to WAL mode brings it to 5 ms, but
  doing so under a live client makes Chroma's own SQLite fail ("disk I/O
  error"), so the store leaves Chroma's file alone.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import re
import sqlite3
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

import numpy as np
from langchain_core.embeddings import Embeddings

from memories.errors import (
    BackendError,
    BackendUnavailableError,
    ConfigError,
    MissingDependencyError,
)
from memories.kernel.paths import default_file
from memories.stores.recall import ScoredId
from memories.stores.vector.filters import NAMESPACE_KEY, scoped_filter

try:
    import chromadb
    import httpx
    from chromadb.api.types import Documents, EmbeddingFunction
    from chromadb.errors import ChromaError, NotFoundError
except ImportError as exc:  # pragma: no cover - the chroma extra is installed in tests
    raise MissingDependencyError(
        "Chroma vector memory", "pip install 'chat-memories[chroma]'"
    ) from exc

__all__ = [
    "CHROMA_MODES",
    "ChromaMode",
    "ChromaStore",
    "LangChainEmbeddingFunction",
    "StoredRecord",
]

_CLIENT_CREATION = threading.Lock()
# One read-only connection per persistent folder, shared by its stores: it
# only reads SQLite's data_version (see ChromaStore.change_token).
_WATCHERS: dict[str, tuple[sqlite3.Connection, int]] = {}
_WATCHERS_LOCK = threading.Lock()

ChromaMode = Literal["persistent", "memory", "http"]
#: Chroma's client modes, by the names a config uses.
CHROMA_MODES: tuple[ChromaMode, ...] = ("persistent", "memory", "http")

_COLLECTION_PREFIX = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,200}")
_GENERATION_KEY = "memories_generation"
_NAMESPACE_META_KEY = "memories_namespace"
_PAGE = 5_000
_T = TypeVar("_T")


def _embeddings(result: Mapping[str, Any]) -> list[list[float] | None]:
    """The embeddings of a Chroma ``get`` result, as float lists, one per id (None: not read)."""
    vectors = result.get("embeddings")
    if vectors is None:
        return [None] * len(result["ids"])
    return [None if v is None else np.asarray(v, dtype=float).tolist() for v in vectors]


@dataclass(frozen=True)
class StoredRecord:
    """A document as the store holds it."""

    id: str
    """The document's id, unique within its namespace."""
    text: str
    """The stored text."""
    metadata: dict[str, Any]
    """Its metadata, the namespace included."""
    score: float | None = None
    """Cosine similarity to the query (``1 - cosine distance``) for query results, else None."""
    embedding: list[float] | None = None
    """The stored embedding, when the read asked for it (``get(..., embeddings=True)``)."""


class LangChainEmbeddingFunction(EmbeddingFunction[Documents]):
    """Chroma's embedding function protocol over any LangChain ``Embeddings``.

    Given to every collection so that Chroma never falls back to its default
    embedding function. Chroma stores :meth:`get_config` with the collection;
    :meth:`build_from_config` rebuilds the embeddings from their
    ``module:qualname`` when the class takes no arguments.
    """

    def __init__(self, embeddings: Embeddings | None = None, *, spec: str | None = None) -> None:
        self._embeddings = embeddings
        self._spec = spec if spec is not None else _spec_of(embeddings)

    def __call__(self, input: Documents) -> Any:
        return self._get().embed_documents(list(input))

    def embed_query(self, input: Documents) -> Any:
        return [self._get().embed_query(text) for text in input]

    @staticmethod
    def name() -> str:
        return "memories-langchain"

    def get_config(self) -> dict[str, Any]:
        return {"embeddings": self._spec}

    @staticmethod
    def build_from_config(config: dict[str, Any]) -> LangChainEmbeddingFunction:
        return LangChainEmbeddingFunction(spec=str(config.get("embeddings", "")))

    def default_space(self) -> Any:
        return "cosine"

    def supported_spaces(self) -> Any:
        return ["cosine", "l2", "ip"]

    def _get(self) -> Embeddings:
        if self._embeddings is None:
            module, _, name = self._spec.partition(":")
            try:
                target: Any = importlib.import_module(module)
                for part in name.split("."):
                    target = getattr(target, part)
                self._embeddings = target()
            except Exception as exc:
                raise ConfigError(
                    f"This Chroma collection was filled with embeddings {self._spec!r}, which "
                    "cannot be rebuilt here; pass the same embeddings object to the memory."
                ) from exc
        assert self._embeddings is not None
        return self._embeddings


def _spec_of(embeddings: Embeddings | None) -> str:
    if embeddings is None:
        return ""
    cls = type(embeddings)
    return f"{cls.__module__}:{cls.__qualname__}"


class ChromaStore:
    """Documents in Chroma, one collection per namespace key.

    Every method takes the namespace key (see
    :func:`memories.kernel.namespaces.namespace_key`) first, works on that
    namespace's collection only, ANDs the namespace with any caller filter and
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
        self.mode = mode
        self.path = str(Path(path).expanduser().resolve()) if mode == "persistent" else path
        self.host = host
        self.port = port
        self.ssl = ssl
        self.timeout = timeout
        self.collection_prefix = collection
        self._embedding_function = LangChainEmbeddingFunction(embeddings)
        self._client: Any = None
        self._collections: dict[str, Any] = {}
        self._lock = threading.Lock()

    # -- identity -------------------------------------------------------------------

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
        """A string naming this store and collection prefix; equal for stores that share data."""
        where = {"persistent": self.path, "memory": "", "http": f"{self.host}:{self.port}"}
        return f"{self.mode}:{where[self.mode]}#{self.collection_prefix}"

    def collection_name(self, namespace: str, /) -> str:
        """The collection holding a namespace: the prefix and a digest of the namespace key."""
        digest = hashlib.sha256(namespace.encode("utf-8")).hexdigest()[:24]
        return f"{self.collection_prefix}-{digest}"

    # -- reads ----------------------------------------------------------------------

    def count(self, namespace: str, /) -> int:
        """How many documents the namespace holds."""
        return self._call(namespace, "count documents", lambda c: int(c.count()))

    def generation(self, namespace: str, /) -> str | None:
        """A token that changes whenever documents are deleted from the namespace."""

        def read(collection: Any) -> str | None:
            fresh = self._get_client().get_collection(
                collection.name, embedding_function=self._embedding_function
            )
            value = (fresh.metadata or {}).get(_GENERATION_KEY)
            return None if value is None else str(value)

        return self._call(namespace, "read the collection", read)

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
        2 ms instead of 5 at 10,000 documents. The ids come from the
        namespace's own collection; :meth:`get` checks the records it returns.
        """
        scoped = scoped_filter(namespace, where)

        def run(collection: Any) -> Any:
            return collection.query(
                query_embeddings=[list(embedding)], n_results=n, where=scoped, include=["distances"]
            )

        result = self._call(namespace, "query", run)
        return [
            ScoredId(i, 1.0 - float(d))
            for i, d in zip(result["ids"][0], result["distances"][0], strict=True)
        ]

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
        scoped = scoped_filter(namespace, where)
        include = ["documents", "metadatas"] if text else ["metadatas"]
        if embeddings:
            include.append("embeddings")
        if ids is not None:
            ids = list(ids)
            if not ids:
                return []

        def page(offset: int) -> Callable[[Any], Any]:
            def run(collection: Any) -> Any:
                if ids is not None:
                    return collection.get(ids=ids, where=scoped, include=include)
                return collection.get(where=scoped, include=include, limit=_PAGE, offset=offset)

            return run

        records: list[StoredRecord] = []
        offset = 0
        while True:
            result = self._call(namespace, "read documents", page(offset))
            documents = result.get("documents") or [""] * len(result["ids"])
            vectors = _embeddings(result) if embeddings else [None] * len(result["ids"])
            for doc_id, document, metadata, vector in zip(
                result["ids"], documents, result["metadatas"], vectors, strict=True
            ):
                records.append(
                    StoredRecord(doc_id, document or "", dict(metadata or {}), embedding=vector)
                )
            if ids is not None or len(result["ids"]) < _PAGE:
                break
            offset += _PAGE
        return self._own(namespace, records)

    def vectors(self, namespace: str, ids: Sequence[str], /) -> dict[str, list[float]]:
        """The stored embeddings of these documents of the namespace, by id."""
        if not ids:
            return {}
        scoped = scoped_filter(namespace, None)

        def run(collection: Any) -> Any:
            return collection.get(ids=list(ids), where=scoped, include=["embeddings"])

        result = self._call(namespace, "read embeddings", run)
        pairs = zip(result["ids"], _embeddings(result), strict=True)
        return {doc_id: vector for doc_id, vector in pairs if vector is not None}

    def change_token(self) -> int | None:
        """A number that changes whenever anyone commits a write to the store, else None.

        A persistent store's SQLite file is watched through a read-only
        connection of its own (SQLite's ``data_version``, which changes with
        every commit of every other connection, this process's Chroma and other
        processes alike). In the other modes, or when the file cannot be read,
        it is None: the caller must look at the documents themselves.
        """
        if self.mode != "persistent":
            return None
        file = Path(self.path) / "chroma.sqlite3"
        with _WATCHERS_LOCK:
            try:
                inode = file.stat().st_ino
                watcher = _WATCHERS.get(self.path)
                if watcher is None or watcher[1] != inode:
                    # First use, or the folder was made anew: watch the new file.
                    if watcher is not None:
                        watcher[0].close()
                    connection = sqlite3.connect(
                        f"{file.as_uri()}?mode=ro", uri=True, check_same_thread=False, timeout=1.0
                    )
                    watcher = _WATCHERS[self.path] = (connection, inode)
                row = watcher[0].execute("PRAGMA data_version").fetchone()
            except (OSError, sqlite3.Error):
                return None
        return int(row[0])

    def namespaces(self) -> list[str]:
        """The namespace keys of this store's collections (those under its prefix), sorted.

        A namespace whose documents were all deleted keeps its collection, so
        it is listed; :meth:`count` tells it apart.
        """
        with self._translate("list collections"):
            collections = self._get_client().list_collections()
        found = set()
        for collection in collections:
            namespace = (collection.metadata or {}).get(_NAMESPACE_META_KEY)
            # Only collections this store made for that namespace (same prefix and digest).
            if namespace and self.collection_name(str(namespace)) == collection.name:
                found.add(str(namespace))
        return sorted(found)

    # -- writes ---------------------------------------------------------------------

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
        10,000 documents), which is what a retried write of new ids wants.
        """
        stamped = [{**m, NAMESPACE_KEY: namespace} for m in metadatas]

        def run(collection: Any) -> None:
            write = collection.upsert if replace else collection.add
            write(
                ids=list(ids),
                documents=list(texts),
                embeddings=[list(e) for e in embeddings],
                metadatas=stamped,
            )

        self._call(namespace, "write documents", run)

    def delete(
        self,
        namespace: str,
        /,
        *,
        ids: Sequence[str] | None = None,
        where: Mapping[str, Any] | None = None,
    ) -> None:
        """Delete documents by id and/or filter, then change the namespace's generation.

        With neither, every document of the namespace is deleted.
        """
        scoped = scoped_filter(namespace, where)
        if ids is None and scoped is None:
            scoped = {NAMESPACE_KEY: {"$eq": namespace}}

        def run(collection: Any) -> None:
            collection.delete(ids=None if ids is None else list(ids), where=scoped)

        if ids is not None and not ids:
            return
        self._call(namespace, "delete documents", run)
        self.touch(namespace)

    def touch(self, namespace: str, /) -> str:
        """Give the namespace a new generation, telling other processes to re-read it; return it."""
        token = uuid.uuid4().hex

        def run(collection: Any) -> None:
            collection.modify(metadata={_NAMESPACE_META_KEY: namespace, _GENERATION_KEY: token})

        self._call(namespace, "update the collection", run)
        return token

    # -- plumbing -------------------------------------------------------------------

    def _own(self, namespace: str, records: list[StoredRecord]) -> list[StoredRecord]:
        # The collection is the namespace's own; this is the last line of defence.
        return [r for r in records if r.metadata.get(NAMESPACE_KEY) == namespace]

    def _call(self, namespace: str, action: str, run: Callable[[Any], _T]) -> _T:
        with self._translate(action):
            collection = self._collection(namespace)
            try:
                return run(collection)
            except NotFoundError:
                # Deleted behind our back (another process, a server reset): reopen once.
                self._collections.pop(namespace, None)
                return run(self._collection(namespace))

    def _collection(self, namespace: str) -> Any:
        collection = self._collections.get(namespace)
        if collection is None:
            name = self.collection_name(namespace)
            collection = self._get_client().get_or_create_collection(
                name,
                metadata={_NAMESPACE_META_KEY: namespace},
                configuration={"hnsw": {"space": "cosine"}},
                embedding_function=self._embedding_function,
            )
            owner = (collection.metadata or {}).get(_NAMESPACE_META_KEY)
            if owner != namespace:
                raise BackendError(
                    f"Collection {name!r} in the {self.location} belongs to namespace {owner!r}, "
                    f"not {namespace!r}; use another collection prefix."
                )
            self._collections[namespace] = collection
        return collection

    def _get_client(self) -> Any:
        with self._lock:
            if self._client is None:
                # Chroma shares one system per path (or one ephemeral system) between
                # clients, and two threads creating the first client at once break it
                # ("Could not connect to tenant default_tenant"): one creation at a time.
                with _CLIENT_CREATION:
                    self._client = self._make_client()
            return self._client

    def _make_client(self) -> Any:
        settings = chromadb.Settings(anonymized_telemetry=False)
        if self.mode == "memory":
            return chromadb.EphemeralClient(settings=settings)
        if self.mode == "http":
            client = _within(
                self.timeout,
                lambda: chromadb.HttpClient(
                    host=self.host, port=self.port, ssl=self.ssl, settings=settings
                ),
                f"connect to the Chroma server at {self.location}",
            )
            _bound_waits(client, self.timeout)
            return client
        Path(self.path).mkdir(parents=True, exist_ok=True)
        return chromadb.PersistentClient(path=self.path, settings=settings)

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
        if isinstance(exc, (httpx.TransportError, ConnectionError)):
            return self._unavailable(action, exc)
        if isinstance(exc, ValueError):
            if "connect" in str(exc).lower():  # HttpClient() when no server answers
                return self._unavailable(action, exc)
            return BackendError(f"Chroma could not {action} in the {self.location}: {exc}")
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


def _bound_waits(client: Any, timeout: float) -> None:
    """Give the HTTP client's requests a deadline (chromadb's own client waits forever).

    A hung server (``kill -STOP``) then makes a call fail with
    :class:`BackendUnavailableError` after ``timeout`` seconds instead of
    hanging the chain.
    """
    session = getattr(getattr(client, "_server", None), "_session", None)
    if not isinstance(session, httpx.Client):
        raise BackendError(
            "This chromadb version's HTTP client cannot be given a timeout; pin chromadb to a "
            "version whose client keeps an httpx session (1.x)."
        )
    session.timeout = httpx.Timeout(timeout, connect=min(timeout, 5.0))


def _within(seconds: float, make: Any, action: str) -> Any:
    """``make()``, or :class:`BackendUnavailableError` when it takes over ``seconds``.

    chromadb's ``HttpClient()`` calls the server before it returns, with no
    deadline; it runs on a daemon thread so a hung server cannot hang the caller.
    """
    outcome: list[tuple[bool, Any]] = []

    def run() -> None:
        try:
            outcome.append((True, make()))
        except BaseException as exc:  # handed to the caller below
            outcome.append((False, exc))

    thread = threading.Thread(target=run, name="memories-chroma-connect", daemon=True)
    thread.start()
    thread.join(seconds)
    if not outcome:
        raise BackendUnavailableError(
            f"Could not {action}: no answer within {seconds} s. Is `chroma run` running and "
            "answering? Queued documents wait in the outbox."
        )
    ok, value = outcome[0]
    if not ok:
        raise value
    return value
