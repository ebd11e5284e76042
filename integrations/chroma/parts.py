"""What the Chroma store is built from: settings, records, the embedding function, client helpers.

Importing it imports Chroma, or says how to install it.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import random
import re
import threading
import uuid
from collections.abc import Iterator, Mapping
from contextlib import suppress
from dataclasses import dataclass
from functools import cache, partial
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
from memories.kernel.imports import import_path
from memories.kernel.steps import bounded_call

try:
    import chromadb
    import httpx
    from chromadb.api.types import Documents, EmbeddingFunction
    from chromadb.utils.embedding_functions import register_embedding_function
except ImportError as exc:  # pragma: no cover - the chroma extra is installed in tests
    raise MissingDependencyError(
        "Chroma vector memory", "pip install 'chat-memories[chroma]'"
    ) from exc


_CLIENT_CREATION = threading.Lock()
_clients: dict[tuple[Any, ...], Any] = {}
#: The random share of a first count's step (:func:`.moves.check_size`): a generator of
#: its own, so the application's global ``random`` sequence is never drawn from.
_JITTER = random.Random()

ChromaMode = Literal["persistent", "memory", "http"]
#: Chroma's client modes, by the names a config uses.
CHROMA_MODES: tuple[ChromaMode, ...] = ("persistent", "memory", "http")

_COLLECTION_PREFIX = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,200}")
_NAMESPACE_META_KEY = "memories_namespace"
#: Shared collections ("shards") of a store's small namespaces.
SHARDS = 16
# A shard's metadata: its number. An own collection's: its namespace, and while a
# promotion copies into it, the mark that it is not complete yet.
_SHARD_KEY = "memories_shard"
_INCOMPLETE_KEY = "memories_incomplete"
# An own collection being demoted: the demoting store's token, and when it set the mark
# (seconds since the epoch). Another store leaves a mark younger than _LEAVING_SECONDS
# to its owner, and takes over an older one (its demoter crashed).
_LEAVING_KEY = "memories_leaving"
_LEAVING_AT_KEY = "memories_leaving_at"
_LEAVING_SECONDS = 60.0
# How long a call that failed on a collection being demoted waits for it to be gone.
_DELETION_SECONDS = 2.0
#: Why :meth:`ChromaStore.demote` kept a namespace that has no collection of its own.
_IN_SHARD = "in its shard already"
_OTHER_WIDTH = "embeddings of another width"
# How long a namespace's placement is trusted without a look (seconds), and how many
# namespaces' placements (and write counts) a store object remembers.
_PLACEMENT_SECONDS = 10.0
_REMEMBERED = 4_096
_PAGE = 5_000
_T = TypeVar("_T")
#: A persistent store's SQLite file, where Chroma keeps its write-ahead log.
CHROMA_FILE = "chroma.sqlite3"
#: The file in a persistent store's folder holding the store's id: what names its rows
#: in the outbox and the recall index, wherever the folder is mounted or moved.
STORE_ID_FILE = "memories-store-id"
_STORE_ID = re.compile(r"[0-9a-f]{32}")
#: Chroma's log operations that carry a document (add, update, upsert; 3 is a delete).
_LOGGED_WRITES = (0, 1, 2)
#: How long a scrub of the log waits for Chroma's own writers (seconds).
_LOG_TIMEOUT = 30.0


@cache
def import_client_code(mode: ChromaMode, /) -> None:
    """Import the module of Chroma's client for ``mode`` now, before any client is made.

    Chroma imports it when the first client is made, about 0.1 s here (the
    embedded one, ``chromadb.api.rust``): a memory calls this when it is made,
    so that a restarted process's first search does not pay it. Once per mode:
    Chroma's settings read the environment each time (about 20 ms).
    """
    api = "chromadb.api.fastapi.FastAPI" if mode == "http" else chromadb.Settings().chroma_api_impl
    with suppress(ImportError):  # another chromadb may name it otherwise: the client imports it
        importlib.import_module(api.rpartition(".")[0])


def _store_id(folder: Path) -> str:
    """The id in a persistent store's folder, written there first if it has none.

    Written once: a new id goes to a file of its own, fsynced, then is linked
    to :data:`STORE_ID_FILE`, which fails if another process linked its id
    first (that one stands), so the file is never seen half-written.
    """
    file = folder / STORE_ID_FILE
    if not file.exists():
        folder.mkdir(parents=True, exist_ok=True)
        made = folder / f".{STORE_ID_FILE}-{uuid.uuid4().hex}"
        with open(made, "x", encoding="ascii") as out:
            out.write(uuid.uuid4().hex + "\n")
            out.flush()
            os.fsync(out.fileno())
        try:
            os.link(made, file)
        except FileExistsError:
            pass
        except OSError:  # no hard links here (FAT, some network shares): made in place
            with suppress(FileExistsError), open(file, "x", encoding="ascii") as out:
                out.write(made.read_text(encoding="ascii"))
                out.flush()
                os.fsync(out.fileno())
        finally:
            made.unlink(missing_ok=True)
        _sync_folder(folder)  # rows are filed under the id next: it must outlive a power cut
    found = file.read_text(encoding="ascii", errors="replace").strip()
    if not _STORE_ID.fullmatch(found):
        raise ConfigError(
            f"{str(file)!r} holds {found[:40]!r}, not a store id (32 hex digits). It names "
            "this store's queued writes and recall index: restore it from a backup of the "
            "folder rather than editing it."
        )
    return found


def _sync_folder(folder: Path) -> None:
    """Make the folder's entries durable (POSIX; Windows cannot open a folder, nor needs to)."""
    try:
        descriptor = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _records(result: Mapping[str, Any]) -> list[StoredRecord]:
    """The records of a Chroma ``get`` result (ids as Chroma holds them; embeddings if read)."""
    count = len(result["ids"])
    vectors = result.get("embeddings")
    return [
        StoredRecord(
            doc_id,
            document or "",
            dict(metadata or {}),
            embedding=None if vector is None else np.asarray(vector, dtype=float).tolist(),
        )
        for doc_id, document, metadata, vector in zip(
            result["ids"],
            result.get("documents") or [""] * count,
            result["metadatas"],
            [None] * count if vectors is None else vectors,
            strict=True,
        )
    ]


def _pages(collection: Any, **query: Any) -> Iterator[Mapping[str, Any]]:
    """The results of a Chroma ``get`` of every document that ``query`` asks for, by pages."""
    offset = 0
    while True:
        page = collection.get(**query, limit=_PAGE, offset=offset)
        yield page
        if len(page["ids"]) < _PAGE:
            return
        offset += _PAGE


def _busy(seconds: float) -> str:
    """Why :meth:`ChromaStore.demote` left a namespace to another store moving it."""
    return (
        f"being moved into its shard by another process (for {seconds:.0f} s); run again "
        f"later: a move not finished within {_LEAVING_SECONDS:.0f} s is taken over"
    )


def _digest(namespace: str) -> str:
    return hashlib.sha256(namespace.encode("utf-8")).hexdigest()[:24]


def _shard_of(namespace: str) -> int:
    """The shard of a namespace: stable across processes and versions (not Python's hash)."""
    return int(_digest(namespace)[:8], 16) % SHARDS


def _tag(namespace: str) -> str:
    """What a namespace's ids start with in a shard, where two namespaces may use one id."""
    return _digest(namespace)[:16] + ":"


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

    def _get(self) -> Embeddings:
        if self._embeddings is None:
            try:
                self._embeddings = import_path(self._spec, what="embeddings")()
            except Exception as exc:
                raise ConfigError(
                    f"This Chroma collection was filled with embeddings {self._spec!r}, which "
                    "cannot be rebuilt here; pass the same embeddings object to the memory."
                ) from exc
        assert self._embeddings is not None
        return self._embeddings


# Known to Chroma by name, so that a client reading a collection's configuration
# (a Chroma server sends it with every collection) rebuilds it instead of
# warning "Could not reconstruct embedding function" on stderr. Building it
# from its configuration imports nothing: only an embedding call would.
register_embedding_function(LangChainEmbeddingFunction)


def _spec_of(embeddings: Embeddings | None) -> str:
    if embeddings is None:
        return ""
    cls = type(embeddings)
    return f"{cls.__module__}:{cls.__qualname__}"


@dataclass(frozen=True)
class Demotion:
    """What :meth:`ChromaStore.demote` did with one namespace's own collection."""

    namespace: str
    """The namespace key."""
    documents: int
    """How many documents its collection held (moved into the shard unless ``kept``)."""
    kept: str = ""
    """Why the collection stays, or ``""`` when the namespace moved into its shard."""

    @property
    def moved(self) -> bool:
        """Whether the namespace now lives in its shard."""
        return not self.kept


@dataclass(frozen=True)
class _Placement:
    """Where a namespace's documents are, as one lookup found it."""

    collection: Any
    """The Chroma collection holding them."""
    shard: bool
    """The collection is a shard shared with other namespaces (reads are filtered, ids tagged)."""
    checked: float
    """When the lookup was made (``time.monotonic()``)."""


def shared_client(
    mode: ChromaMode, path: str, host: str, port: int, ssl: bool, timeout: float, *, location: str
) -> Any:
    """The process's Chroma client of a folder (or server), made once: each client reads
    Chroma's settings from the environment again (about 50 ms a user in a web app)."""
    key = (mode, host, port, ssl, timeout) if mode == "http" else (mode, path)
    # Chroma shares one system per path between clients, and two threads creating the
    # first at once break it ("Could not connect to tenant default_tenant").
    with _CLIENT_CREATION:
        if key in _clients:
            return _clients[key]
        settings = chromadb.Settings(anonymized_telemetry=False)
        if mode == "memory":
            client = chromadb.EphemeralClient(settings=settings)
        elif mode == "http":
            make = partial(chromadb.HttpClient, host=host, port=port, ssl=ssl, settings=settings)
            try:  # HttpClient() calls the server before it returns, with no deadline
                client = bounded_call(make, timeout, name="memories-chroma-connect")
            except TimeoutError as exc:
                raise BackendUnavailableError(
                    f"Could not connect to the {location}: no answer within "
                    f"{timeout} s. Is `chroma run` running and answering? Queued documents "
                    "wait in the outbox."
                ) from exc
            _bound_waits(client, timeout)
        else:
            Path(path).mkdir(parents=True, exist_ok=True)
            client = chromadb.PersistentClient(path=path, settings=settings)
        _clients[key] = client
        return client


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
