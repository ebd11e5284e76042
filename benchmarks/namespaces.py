"""Many users in one process: what each Chroma layout costs per user namespace.

Run from the repository root::

    python benchmarks/namespaces.py [--users 2000] [--docs 5] [--checkpoint 500]

Today every user namespace of a vector memory is its own Chroma collection,
and Chroma keeps every collection it has opened loaded (its HNSW segment and
its files), so a process serving many users grows without bound (issue 25).
This benchmark measures the store alone, on an embedded persistent Chroma in a
temporary folder, with random unit vectors (384 dimensions, as MiniLM's) so
that no embedding cost hides the store's:

- ``per-namespace``: one collection per user (today's layout);
- ``one-collection``: one collection for all users, the namespace a metadata
  key and every query filtered on it (``where={"namespace": ...}``);
- ``sharded``: ``--shards`` collections (16 by default), each namespace in the
  one its hash picks, filtered as above: memory and files bounded by the
  shard count, each query searching one shard;
- ``two-placement``: :class:`memories.integrations.chroma.ChromaStore` itself
  (its 16 shards, and a collection of its own for a namespace past
  ``promote_at``), through its ``upsert`` and ``nearest``; ``--shards`` does
  not apply;
- ``vector-memory``: the whole library as a web app uses it: per user a
  ``VectorMemory`` (default persistent store, ``write="sync"``), ``--docs``
  ``save_context`` turns and one ``search``, then ``close()`` (with ``--drop``:
  the default ``write`` and the object only dropped, as a request handler
  does); its "add" latency is per turn (the turn and its recall index row in
  SQL included); ``--embeddings default`` embeds with the default MiniLM
  (loaded once per process) instead of random vectors;
- ``vector-memory-pgvector``: the same on PostgreSQL with pgvector
  (``vectors=`` a throwaway server started from ``tests/postgres.py``; the
  server's own memory is not counted).

Each layout runs in a fresh process. Each user gets ``--docs`` documents in one
``add`` and then one filtered query of 4 results, as a user's first turn
would; the process's resident memory (VmRSS) and open files are read every
``--checkpoint`` users, and the add and query latencies of the last
checkpoint's users are summarised; ``first`` is the RSS after the first user
(imports, the store opened, the model loaded). The layouts are printed side by side.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path
from typing import Any

import numpy as np
from langchain_core.embeddings import Embeddings

DIMENSIONS = 384
LAYOUTS = (
    "per-namespace",
    "one-collection",
    "sharded",
    "two-placement",
    "vector-memory",
    "vector-memory-pgvector",
)


def _rss_mb() -> float:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _open_files() -> int:
    return len(os.listdir("/proc/self/fd"))


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def run_layout(
    layout: str, users: int, docs: int, checkpoint: int, shards: int, **memory: Any
) -> dict[str, Any]:
    """One layout in this process: the checkpoints' RSS, files and latencies.

    ``memory``: ``embeddings`` and ``drop`` of the vector-memory layouts.
    """
    import chromadb
    from chromadb.config import Settings

    with tempfile.TemporaryDirectory(prefix="namespaces-bench-") as folder:
        if layout == "two-placement":
            return {"layout": layout, "points": _run_store(folder, users, docs, checkpoint)}
        if layout == "vector-memory":
            points = _run_memories(folder, users, docs, checkpoint, **memory)
            return {"layout": layout, "points": points}
        if layout == "vector-memory-pgvector":
            sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
            from tests.postgres import postgres_server

            with postgres_server(with_vector=True) as url:
                points = _run_memories(folder, users, docs, checkpoint, vectors=url, **memory)
            return {"layout": layout, "points": points}
        client = chromadb.PersistentClient(
            path=folder, settings=Settings(anonymized_telemetry=False)
        )
        return {"layout": layout, "points": _run(client, layout, users, docs, checkpoint, shards)}


def _run(
    client: Any, layout: str, users: int, docs: int, checkpoint: int, shards: int
) -> list[dict[str, float]]:
    rng = np.random.default_rng(7)

    def collection_of(user: int) -> Any:
        name = {
            "per-namespace": f"ns-{user}",
            "one-collection": "memories",
            "sharded": f"shard-{zlib.crc32(f'users/u{user}'.encode()) % shards}",
        }[layout]
        return client.get_or_create_collection(name, metadata={"hnsw:space": "cosine"})

    points: list[dict[str, float]] = []
    adds: list[float] = []
    queries: list[float] = []
    for user in range(users):
        namespace = f"users/u{user}"
        vectors = rng.normal(size=(docs + 1, DIMENSIONS)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        ids = [f"u{user}-{i}" for i in range(docs)]
        texts = [f"turn {i} of user {user}" for i in range(docs)]
        started = time.perf_counter()
        collection = collection_of(user)
        metadatas: list[Any] = [{"namespace": namespace}] * docs
        collection.add(ids=ids, embeddings=vectors[:docs], documents=texts, metadatas=metadatas)
        added = time.perf_counter()
        where = None if layout == "per-namespace" else {"namespace": namespace}
        found = collection.query(query_embeddings=vectors[docs:], n_results=4, where=where)
        queries.append(time.perf_counter() - added)
        adds.append(added - started)
        assert all(i.startswith(f"u{user}-") for i in found["ids"][0]), "another user's document"
        del collection
        _checkpoint(points, layout, user, checkpoint, adds, queries)
    return points


def _run_store(folder: str, users: int, docs: int, checkpoint: int) -> list[dict[str, float]]:
    """The two-placement layout: the same users and documents through ChromaStore."""
    from memories.integrations.chroma import ChromaStore

    store = ChromaStore(mode="persistent", path=folder)
    rng = np.random.default_rng(7)
    points: list[dict[str, float]] = []
    adds: list[float] = []
    queries: list[float] = []
    for user in range(users):
        namespace = f"users/u{user}"
        vectors = rng.normal(size=(docs + 1, DIMENSIONS)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        ids = [f"u{user}-{i}" for i in range(docs)]
        started = time.perf_counter()
        store.upsert(
            namespace,
            ids=ids,
            texts=[f"turn {i} of user {user}" for i in range(docs)],
            embeddings=vectors[:docs].tolist(),
            metadatas=[{}] * docs,
            replace=False,
        )
        added = time.perf_counter()
        found = store.nearest(namespace, vectors[docs].tolist(), n=4)
        queries.append(time.perf_counter() - added)
        adds.append(added - started)
        assert found and all(s.id.startswith(f"u{user}-") for s in found), "another user's document"
        _checkpoint(points, "two-placement", user, checkpoint, adds, queries)
    return points


class _Random(Embeddings):
    """Random unit vectors of 384 dimensions, as the other layouts use (no model run)."""

    def __init__(self) -> None:
        self._rng = np.random.default_rng(11)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        vectors = self._rng.normal(size=(len(texts), DIMENSIONS)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        return vectors.tolist()

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


def _run_memories(
    folder: str,
    users: int,
    docs: int,
    checkpoint: int,
    *,
    vectors: str | None = None,
    embeddings: str = "random",
    drop: bool = False,
) -> list[dict[str, float]]:
    """Whole memories, as a web app uses them: per user a VectorMemory, ``docs`` turns, a search.

    Each user's memory is made, used and closed (or, with ``drop``, only
    dropped), as a request would; the process keeps only what the library keeps.
    """
    from memories.long_term.vector import VectorMemory

    embedder = _Random() if embeddings == "random" else None
    options: dict[str, Any] = {} if drop else {"write": "sync"}
    points: list[dict[str, float]] = []
    adds: list[float] = []
    queries: list[float] = []
    for user in range(users):
        memory = VectorMemory(
            path=folder,
            namespace=("users", f"u{user}"),
            embeddings=embedder,
            vectors=vectors,
            **options,
        )
        started = time.perf_counter()
        for i in range(docs):
            memory.save_context({"input": f"turn {i} of user {user}"}, {"output": "ok"})
        added = time.perf_counter()
        found = memory.search(f"turn 1 of user {user}", k=4)
        queries.append(time.perf_counter() - added)
        adds.append((added - started) / docs)
        assert found and all(f"of user {user}\n" in r.text for r in found), "another user's turn"
        if not drop:
            memory.close()
        del memory
        _checkpoint(points, "vector-memory", user, checkpoint, adds, queries)
    return points


def _checkpoint(
    points: list[dict[str, float]],
    layout: str,
    user: int,
    checkpoint: int,
    adds: list[float],
    queries: list[float],
) -> None:
    """Every ``checkpoint`` users: the process's RSS and files, the window's latencies."""
    if user == 0:
        points.append({"users": 1, "rss_mb": _rss_mb()})
    if (user + 1) % checkpoint:
        return
    window_adds, window_queries = adds[-checkpoint:], queries[-checkpoint:]
    points.append(
        {
            "users": user + 1,
            "rss_mb": _rss_mb(),
            "open_files": _open_files(),
            "add_p50_ms": 1000 * statistics.median(window_adds),
            "add_p95_ms": 1000 * _percentile(window_adds, 0.95),
            "query_p50_ms": 1000 * statistics.median(window_queries),
            "query_p95_ms": 1000 * _percentile(window_queries, 0.95),
        }
    )
    print(f"  {layout}: {points[-1]}", file=sys.stderr, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=2000)
    parser.add_argument("--docs", type=int, default=5, help="documents per user")
    parser.add_argument("--checkpoint", type=int, default=500)
    parser.add_argument("--shards", type=int, default=16, help="collections of the sharded layout")
    parser.add_argument(
        "--layouts",
        nargs="+",
        choices=LAYOUTS,
        default=list(LAYOUTS),
        help="which layouts (per-namespace needs about 2.8 GB and 4 files per 1,000 users)",
    )
    parser.add_argument(
        "--embeddings",
        choices=("random", "default"),
        default="random",
        help="vector-memory layouts: random vectors, or the default MiniLM embedder",
    )
    parser.add_argument(
        "--drop", action="store_true", help="vector-memory layouts: drop each memory, no close()"
    )
    parser.add_argument("--layout", choices=LAYOUTS, help=argparse.SUPPRESS)  # the child process
    args = parser.parse_args()
    if min(args.users, args.docs, args.checkpoint, args.shards) < 1:
        parser.error("--users, --docs, --checkpoint and --shards must be at least 1")
    if args.layout:
        memory = {"embeddings": args.embeddings, "drop": args.drop}
        point = run_layout(
            args.layout, args.users, args.docs, args.checkpoint, args.shards, **memory
        )
        print(json.dumps(point))
        return
    results = {}
    layouts = [layout for layout in LAYOUTS if layout in args.layouts]
    for layout in layouts:
        print(f"{layout}: {args.users} users x {args.docs} documents ...", file=sys.stderr)
        child = subprocess.run(
            [sys.executable, __file__, "--layout", layout, "--users", str(args.users),
             "--docs", str(args.docs), "--checkpoint", str(args.checkpoint),
             "--shards", str(args.shards), "--embeddings", args.embeddings,
             *(["--drop"] if args.drop else [])],
            capture_output=True, text=True, check=True, timeout=3600,
        )  # fmt: skip
        results[layout] = json.loads(child.stdout.splitlines()[-1])["points"]
    columns = ("rss_mb", "open_files", "add_p50_ms", "add_p95_ms", "query_p50_ms", "query_p95_ms")
    print(f"\nChroma {__import__('chromadb').__version__}, {args.docs} documents per user")
    print(f"{'users':>6}  {'measure':<14}" + "".join(f"{name:>16}" for name in layouts))
    for at, point in enumerate(results[layouts[0]]):
        for column in columns:
            row = [results[layout][at].get(column, float("nan")) for layout in layouts]
            if all(v != v for v in row):  # the first user's point has its RSS only
                continue
            print(f"{point['users']:>6}  {column:<14}" + "".join(f"{v:>16.1f}" for v in row))


if __name__ == "__main__":
    main()
