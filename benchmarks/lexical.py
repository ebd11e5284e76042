"""BM25 in the SQL recall index: postings as rows (the former layout) beside packed blocks.

Run from the repository root::

    python benchmarks/lexical.py [--turns 10000 100000] [--engines sqlite postgresql]

For each engine (SQLite in a temporary file; PostgreSQL from ``tests/postgres.py``
on loopback) and each size, one namespace of LoCoMo chat turns is indexed
twice in the same database, straight through :class:`RecallIndex` (no vector
store, no embeddings):

- *rows*: every posting a row of ``memories_recall_postings``, as the index
  was before blocks (``pack_after`` too high to ever pack);
- *packed*: built as a new index is today (postings in blocks).

Then, side by side in one run:

- lexical top-100 latency, p50/p95, of LoCoMo's questions, then of chat
  turns used as queries (as ``benchmarks/scale_out.py`` asks): the former
  search (document frequencies then BM25 summed by the database, GROUP BY
  over every posting of the query's terms), today's search on the rows-only
  index (it reads both tiers), and today's search on the packed index;
- a write's cost (one turn, its own transaction), rows-only vs packed with
  its compactions (how many, and their time), the two taking turns; then an
  edit's (an old turn written again with another text: its old postings are
  taken out of their blocks);
- the first write to the rows-only index with the packing index: it packs
  the whole space once (what an index written by an older version costs).

The scores of the former search's top hits and the packed one's are checked equal.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memories.stores.recall import RecallConfig
from memories.stores.sql import Database
from memories.stores.vector import outbox, recall_index
from memories.stores.vector.recall_index import IndexedDocument, RecallIndex, Space

DATA = Path("/work/shared/data/locomo/locomo_dev.json")
NAMESPACE = "users.bench"
LIMIT = 100


def chat_texts(count: int, data: Path) -> tuple[list[str], list[str]]:
    """``count`` chat turns (LoCoMo's, cycled and numbered) and LoCoMo's questions."""
    turns: list[str] = []
    questions: list[str] = []
    for sample in json.loads(data.read_text(encoding="utf-8")):
        for key, session in sample["conversation"].items():
            if key.startswith("session_") and isinstance(session, list):
                turns.extend(f"{t['speaker']}: {t['text']}" for t in session)
        questions.extend(q["question"] for q in sample["qa"])
    return [f"{turns[i % len(turns)]} ({i})" for i in range(count)], questions


def _documents(texts: list[str], start: int = 0) -> list[IndexedDocument]:
    """Turns numbered from ``start``: ids ``d{start}``..., sessions of 500 turns."""
    return [
        IndexedDocument(f"d{i}", text, {"session": f"s{i // 500}", "turn": i % 500})
        for i, text in enumerate(texts, start)
    ]


def former_lexical(
    index: RecallIndex, space: Space, query: str, config: RecallConfig, limit: int
) -> list[tuple[str, float]]:
    """The search before blocks: frequencies, then BM25 summed by the database."""
    postings = recall_index._postings
    terms = Counter(config.analyzer().terms(query))
    wanted = list(terms)[:64]
    with index.database.transaction() as connection:
        n_docs, total = connection.execute(
            sa.select(recall_index._spaces.c.documents, recall_index._spaces.c.total_length).where(
                recall_index._spaces.c.id == space.id
            )
        ).one()
        in_space = (postings.c.space == space.id, postings.c.term.in_(wanted))
        counted = sa.select(postings.c.term, sa.func.count()).where(*in_space)
        frequencies = dict(connection.execute(counted.group_by(postings.c.term)).all())
        if not frequencies:
            return []
        k1, b = config.bm25_k1, config.bm25_b
        weight = sa.case(
            *(
                (postings.c.term == term, terms[term] * _idf(n_docs, df) * (k1 + 1.0))
                for term, df in frequencies.items()
            ),
            else_=0.0,
        )
        tf = sa.cast(postings.c.tf, sa.Float)
        norm = k1 * (1.0 - b) + k1 * b / (total / n_docs) * sa.cast(postings.c.length, sa.Float)
        score = sa.func.sum(weight * tf / (tf + norm)).label("score")
        best = connection.execute(
            sa.select(postings.c.key, score)
            .where(*in_space)
            .group_by(postings.c.key)
            .order_by(score.desc(), postings.c.key)
            .limit(2 * limit + 8)
        ).all()
        keys = [key for key, _ in best]
        documents = recall_index._documents
        ids = dict(
            connection.execute(
                sa.select(documents.c.key, documents.c.doc_id).where(documents.c.key.in_(keys))
            ).all()
        )
    found = sorted(((ids[k], float(s)) for k, s in best if s > 0), key=lambda h: (-h[1], h[0]))
    return found[:limit]


def _idf(n_docs: int, df: int) -> float:
    import math

    return math.log(1.0 + (n_docs - df + 0.5) / (df + 0.5))


def _ms(samples: list[float]) -> str:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]
    return f"p50 {statistics.median(ordered) * 1000:7.2f} ms  p95 {p95 * 1000:7.2f} ms"


def _timed(call: Any, *args: Any) -> tuple[float, Any]:
    started = time.perf_counter()
    result = call(*args)
    return time.perf_counter() - started, result


@contextlib.contextmanager
def _database(engine: str) -> Iterator[str]:
    if engine == "sqlite":
        with tempfile.TemporaryDirectory() as folder:
            yield f"sqlite:///{folder}/recall.db"
    else:
        from tests.postgres import postgres_server

        with postgres_server() as url:
            yield url


def run(engine: str, turns: int, options: argparse.Namespace) -> None:
    texts, questions = chat_texts(turns + options.writes, options.data)
    stored, later = _documents(texts[:turns]), _documents(texts[turns:], turns)
    # An edited turn: an old id, another text (its postings are removed, then added).
    edited = [
        IndexedDocument(f"d{i * 7 % turns}", text, {"session": "edits", "turn": i})
        for i, text in enumerate(texts[turns : turns + options.writes // 4])
    ]
    config = RecallConfig()
    print(
        f"\n== {engine}, {turns:,} turns (pack after {options.pack_after:,} fresh postings, "
        f"blocks of {options.block_size:,}) =="
    )
    with _database(engine) as url:
        database = Database(url, outbox._metadata)  # the outbox table too: a build reads it
        packing = RecallIndex(
            database, pack_after=options.pack_after, block_size=options.block_size
        )
        rows_only = RecallIndex(database, pack_after=10**12)
        rows_only._settle = lambda connection, space: None  # type: ignore[method-assign]  # as before blocks
        if not options.packed_only:
            seconds, rows_space = _timed(
                lambda: rows_only.space("rows", NAMESPACE, config, stored=lambda: stored)
            )
            print(f"build, rows:   {seconds:6.1f} s")
        seconds, packed_space = _timed(
            lambda: packing.space("packed", NAMESPACE, config, stored=lambda: stored)
        )
        print(f"build, packed: {seconds:6.1f} s")
        # LoCoMo's questions (about 6 terms after stopwords), and chat turns used as
        # queries, as benchmarks/scale_out.py asks (about 14: more common terms).
        asked = {
            "questions": [questions[i % len(questions)] for i in range(options.searches)],
            "chat turns": [texts[(i * 7919) % turns] for i in range(options.searches)],
        }
        for kind, queries in asked.items():
            for query in queries[:10]:  # warm: caches, prepared statements
                packed = packing.lexical(packed_space, query, config, limit=LIMIT)
                if not options.packed_only:
                    former = former_lexical(rows_only, rows_space, query, config, LIMIT)
                    # The same scores (equal ones may be summed in another order, tie apart).
                    assert [round(h[1], 9) for h in former] == [round(s.score, 9) for s in packed]
            runs: dict[str, list[float]] = {"former, rows": [], "now, rows": [], "now, packed": []}
            for query in queries:
                if not options.packed_only:
                    runs["former, rows"].append(
                        _timed(former_lexical, rows_only, rows_space, query, config, LIMIT)[0]
                    )
                    runs["now, rows"].append(
                        _timed(
                            lambda q=query: rows_only.lexical(rows_space, q, config, limit=LIMIT)
                        )[0]
                    )
                runs["now, packed"].append(
                    _timed(lambda q=query: packing.lexical(packed_space, q, config, limit=LIMIT))[0]
                )
            for name, samples in runs.items():
                if samples:
                    print(
                        f"lexical top-{LIMIT} of {kind:10}, {name:13}: {_ms(samples)}"
                        f"  ({len(samples)} queries)"
                    )
        writers = {"packed": packing} | ({} if options.packed_only else {"rows": rows_only})
        _writes(database, writers, later, "new")
        _writes(database, writers, edited, "edited")
        if not options.packed_only:
            with database.transaction(write=True) as connection:
                fresh = connection.execute(
                    sa.select(sa.func.count()).where(
                        recall_index._postings.c.space == rows_space.id
                    )
                ).scalar_one()
            seconds, _ = _timed(_write, database, packing, "rows", _documents(["one more turn"]))
            print(f"first write packing a rows-only index of {fresh:,} postings: {seconds:6.2f} s")
        database.engine.dispose()


def _write(database: Database, index: RecallIndex, target: str, docs: list[Any]) -> None:
    with database.transaction(write=True) as connection:
        index.add(connection, target, NAMESPACE, docs)


def _writes(
    database: Database, indexes: dict[str, RecallIndex], docs: list[IndexedDocument], kind: str
) -> None:
    """One turn at a time into each index (target), taking turns, so both meet the same load."""
    compactions: dict[str, list[float]] = {name: [] for name in indexes}
    samples: dict[str, list[float]] = {name: [] for name in indexes}
    for name, index in indexes.items():
        compact = index._compact

        def timed_compact(
            connection: sa.Connection, space: int, compact: Any = compact, name: str = name
        ) -> int:
            seconds, moved = _timed(compact, connection, space)
            compactions[name].append(seconds)
            return int(moved)

        index._compact = timed_compact  # type: ignore[method-assign]
    order = list(indexes)
    for i, doc in enumerate(docs):
        for name in order if i % 2 else reversed(order):
            samples[name].append(_timed(_write, database, indexes[name], name, [doc])[0])
    for name, index in indexes.items():
        del index._compact
        done = compactions[name]
        packed = (
            f"; {len(done)} compactions, {statistics.mean(done) * 1000:.0f} ms each" if done else ""
        )
        mean = statistics.mean(samples[name]) * 1000
        print(
            f"write one {kind} turn, {name:6}: {_ms(samples[name])}  mean {mean:.2f} ms"
            f"  ({len(samples[name])} turns{packed})"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--engines", nargs="+", default=["sqlite", "postgresql"])
    parser.add_argument("--searches", type=int, default=200)
    parser.add_argument("--writes", type=int, default=1_000)
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--pack-after", type=int, default=recall_index._PACK_AFTER)
    parser.add_argument("--block-size", type=int, default=recall_index._BLOCK_SIZE)
    parser.add_argument(
        "--packed-only", action="store_true", help="skip the rows-only index (to tune blocks)"
    )
    options = parser.parse_args()
    if not options.data.is_file():
        sys.exit(f"{options.data} not found: pass --data LOCOMO_JSON")
    for engine in options.engines:
        for turns in options.turns:
            run(engine, turns, options)


if __name__ == "__main__":
    main()
