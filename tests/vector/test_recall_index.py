"""The recall index in SQL: BM25 as the in-process index ranks, kept by every write, made once."""

from __future__ import annotations

import random
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import sqlalchemy as sa

from memories.errors import BackendError, BackendUnavailableError
from memories.stores.recall import BM25Index, RecallConfig
from memories.stores.vector import recall_index
from memories.stores.vector.outbox import OutboxRow, SQLOutbox
from memories.stores.vector.recall_index import IndexedDocument, Space
from tests import needs
from tests.postgres import find_pg_bin, postgres_server
from tests.vector.conftest import MakeVector

WORDS = [
    *("apple", "banana", "cherry", "river", "mountain", "guitar"),
    *("painting", "camping", "dog", "cat", "pottery"),
]


def _outbox(folder: Path) -> SQLOutbox:
    return SQLOutbox(f"sqlite:///{folder / 'outbox.db'}")


def _space(outbox: SQLOutbox, config: RecallConfig, namespace: str = "ns") -> Space:
    return outbox.recall.space("t", namespace, config, stored=list)


def _unique() -> str:
    return f"ns-{uuid.uuid4().hex[:12]}"


def _tiers(outbox: SQLOutbox, space: Space) -> tuple[int, int]:
    """How many postings of a space are fresh rows, how many are in blocks."""
    with outbox.recall.database.transaction() as connection:
        fresh = connection.execute(
            sa.select(sa.func.count()).where(recall_index._postings.c.space == space.id)
        ).scalar_one()
        packed = connection.execute(
            sa.select(sa.func.coalesce(sa.func.sum(recall_index._blocks.c.count), 0)).where(
                recall_index._blocks.c.space == space.id
            )
        ).scalar_one()
    return int(fresh), int(packed)


def _packed_keys(outbox: SQLOutbox) -> dict[str, set[int]]:
    """Every key each term's blocks hold, in every space."""
    blocks = recall_index._blocks
    with outbox.recall.database.transaction() as connection:
        rows = connection.execute(sa.select(blocks.c.term, blocks.c.data)).all()
    keys: dict[str, set[int]] = {}
    for term, data in rows:
        keys.setdefault(term, set()).update(
            int(k) for k in np.frombuffer(data, "<i4")[: len(data) // 12]
        )
    return keys


def _keys_of(outbox: SQLOutbox, space: Space, ids: list[str]) -> set[int]:
    documents = recall_index._documents
    with outbox.recall.database.transaction() as connection:
        return set(
            connection.execute(
                sa.select(documents.c.key).where(
                    documents.c.space == space.id, documents.c.doc_id.in_(ids)
                )
            ).scalars()
        )


def _row(doc_id: str, text: str, **metadata: object) -> OutboxRow:
    return OutboxRow(doc_id, text, dict(metadata), needs_turn=False, replace=True)


@pytest.fixture(params=["sqlite", "postgresql"])
def engine_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """An outbox database on SQLite (a file of this test's) or on the module's PostgreSQL."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'outbox.db'}"
    url: str = request.getfixturevalue("postgres_url")
    return url


@pytest.mark.parametrize(
    ("engine", "packed"),
    [("sqlite", False), ("sqlite", True), ("postgresql", True)],
    ids=["sqlite-fresh", "sqlite-packed", "postgresql-packed"],
)
@pytest.mark.parametrize("b", [0.0, 0.75])
def test_sql_bm25_ranks_and_scores_as_the_in_process_index(
    request: pytest.FixtureRequest, tmp_path: Path, b: float, engine: str, packed: bool
) -> None:
    """Random adds, replacements and deletes: the same top hits and scores as BM25Index.

    Packed: a tiny threshold and blocks, so most postings are in blocks and
    deletes and replacements reach both tiers.
    """
    rng = random.Random(7)
    config = RecallConfig(bm25_b=b, stopwords="none", stem=False, lexical_dates=False)
    if engine == "sqlite":
        outbox, namespace = _outbox(tmp_path), "ns"
    else:
        outbox, namespace = SQLOutbox(request.getfixturevalue("postgres_url")), _unique()
    if packed:
        outbox.recall.pack_after, outbox.recall.block_size = 10, 4
    space = _space(outbox, config, namespace)
    reference = BM25Index(k1=config.bm25_k1, b=b, analyzer=config.analyzer())
    texts: dict[str, str] = {}
    for step in range(300):
        doc_id = f"d{rng.randrange(120)}"
        if step % 7 == 6 and doc_id in texts:
            outbox.unindex("t", namespace, ids=[doc_id])
            reference.delete("", doc_id)
            del texts[doc_id]
            continue
        text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 12)))
        outbox.put("t", namespace, [_row(doc_id, text)])
        reference.add("", doc_id, text)
        texts[doc_id] = text
    assert outbox.recall.count(space) == len(texts)
    if packed:
        fresh, packed_postings = _tiers(outbox, space)
        assert fresh <= 10 and packed_postings > 10 * fresh
    for query in ["apple river", "dog dog cat", "pottery painting guitar", "banana", "zebra"]:
        want = reference.search("", query, limit=10)
        got = outbox.recall.lexical(space, query, config, limit=10)
        assert [s.score for s in got] == pytest.approx([s.score for s in want], rel=1e-9)
        # Equal scores may be summed in another order: ids agree wherever scores differ.
        assert {(round(s.score, 9), s.id) for s in got} == {(round(s.score, 9), s.id) for s in want}


def test_namespaces_are_scored_and_searched_apart(tmp_path: Path) -> None:
    config = RecallConfig()
    outbox = _outbox(tmp_path)
    mine, theirs = _space(outbox, config, "mine"), _space(outbox, config, "theirs")
    outbox.put("t", "mine", [_row("a", "my dog Rex")])
    outbox.put("t", "theirs", [_row("b", "their dog Rex"), _row("c", "a dog")])
    assert [s.id for s in outbox.recall.lexical(mine, "dog Rex", config, limit=5)] == ["a"]
    assert [s.id for s in outbox.recall.lexical(theirs, "dog Rex", config, limit=5)] == ["b", "c"]
    outbox.clear("t", "theirs")
    assert outbox.recall.lexical(theirs, "dog", config, limit=5) == []
    assert outbox.recall.count(mine) == 1


def test_turns_are_numbered_per_session_in_the_database(tmp_path: Path) -> None:
    outbox = _outbox(tmp_path)
    space = _space(outbox, RecallConfig())
    turn = lambda i, s: OutboxRow(f"{s}{i}", f"turn {i}", {"session": s}, needs_turn=True)  # noqa: E731
    queued = outbox.put("t", "ns", [turn(0, "a"), turn(1, "b"), turn(2, "a")])
    assert [r.metadata["turn"] for r in queued] == [0, 0, 1]
    (later,) = outbox.put("t", "ns", [turn(3, "a")])
    assert later.metadata["turn"] == 2 and not later.needs_turn
    positions, _ = outbox.recall.positions(space, ["a3"], window=1)
    assert {i: (p.session, p.index) for i, p in positions.items()} == {
        "a3": ("a", 2),
        "a2": ("a", 1),
    }


def test_an_older_store_is_indexed_once_and_turns_queued_meanwhile_are_numbered_after(
    tmp_path: Path,
) -> None:
    """Rows queued before the index exists (the store was down) wait unnumbered, then follow."""
    outbox = _outbox(tmp_path)
    waiting = OutboxRow("new", "a late turn", {"session": "s"}, needs_turn=True)
    (queued,) = outbox.put("t", "ns", [waiting])
    assert queued.needs_turn  # no index yet: the stored turns are unknown
    stored = [
        IndexedDocument(f"old{i}", f"old turn {i}", {"session": "s", "turn": i}) for i in range(3)
    ]
    reads: list[int] = []

    def read_store() -> list[IndexedDocument]:
        reads.append(1)
        return stored

    config = RecallConfig()
    space = outbox.recall.space("t", "ns", config, stored=read_store)
    assert outbox.recall.count(space) == 4
    (numbered,) = outbox.pending("t", "ns")
    assert numbered.metadata["turn"] == 3 and not numbered.needs_turn
    again = _outbox(tmp_path)  # another process: finds it made
    assert again.recall.space("t", "ns", config, stored=read_store) == space
    assert reads == [1]


def test_a_legacy_namespace_in_chroma_is_indexed_on_first_use(make_vector: MakeVector) -> None:
    memory = make_vector(namespace="legacy", write="sync")
    vectors = memory.embedder.embed_documents(["zebra crossing", "a quiet street"])
    memory.store.upsert(  # as an older version left it: in Chroma, no recall index
        "legacy",
        ids=["z", "q"],
        texts=["zebra crossing", "a quiet street"],
        embeddings=vectors,
        metadatas=[{"session": "old", "turn": 0}, {"session": "old", "turn": 1}],
    )
    assert [r.id for r in memory.search("zebra", k=1)] == ["z"]
    memory.save_context({"input": "next"}, {"output": "turn"}, metadata={"session": "old"})
    turns = {r.metadata["turn"] for r in memory.search("next", k=3)}
    assert turns == {0, 1, 2}


def test_the_index_in_sql_finds_a_compound_asked_open_and_written_closed(
    make_vector: MakeVector,
) -> None:
    """The stored index reads a query as BM25Index does: "ice cream" also asks for "icecream"."""
    memory = make_vector(namespace="compounds", write="sync", recall={"mode": "bm25"})
    memory.save_context({"input": "What do you make?"}, {"output": "Coconut milk icecream"})
    memory.save_context({"input": "Any plans?"}, {"output": "A walk by the river"})
    assert [r.text for r in memory.search("ice cream", k=3)] == [
        "input: What do you make?\noutput: Coconut milk icecream"
    ]


def test_a_store_down_at_the_first_save_still_queues_the_turn(tmp_path: Path) -> None:
    from memories.long_term.vector import VectorMemory

    memory = VectorMemory(
        mode="http",
        port=1,
        timeout=2,
        outbox=str(tmp_path / "outbox.db"),
        embeddings="tests.vector.conftest:WordEmbeddings",
    )
    with pytest.raises(BackendUnavailableError):
        memory.save_context({"input": "keep me"}, {"output": "ok"})
    assert memory.pending() == 1


@pytest.mark.skipif(find_pg_bin() is None, reason=needs.NO_POSTGRES)
def test_the_outbox_and_its_index_on_postgresql_rank_as_on_sqlite(tmp_path: Path) -> None:
    """Several hosts share one PostgreSQL outbox: the same numbering, index and ranking."""
    config = RecallConfig(bm25_b=0.75)
    rows = [
        OutboxRow(f"d{i}", text, {"session": "s", "speakers": ["Mel"]}, needs_turn=True)
        for i, text in enumerate(["my dog Rex", "a cat", "Rex and the dog park", "rain"])
    ]
    with postgres_server() as url:
        results = []
        for outbox in (_outbox(tmp_path), SQLOutbox(url)):
            space = _space(outbox, config)
            queued = outbox.put("t", "ns", rows)
            positions, speakers = outbox.recall.positions(space, ["d2"], window=1)
            results.append(
                (
                    [r.metadata["turn"] for r in queued],
                    [
                        (s.id, round(s.score, 9))
                        for s in outbox.recall.lexical(space, "dog Rex", config, limit=3)
                    ],
                    sorted(positions),
                    speakers["d2"],
                    outbox.recall.named_speakers(space, "what did Mel say"),
                )
            )
            outbox.unindex("t", "ns", ids=["d0"])
            assert outbox.recall.count(space) == 3
    assert results[0] == results[1]
    assert results[0][0] == [0, 1, 2, 3]


@pytest.mark.parametrize("engine", ["sqlite", "postgresql"])
def test_processes_making_one_new_index_at_once_all_get_it(tmp_path: Path, engine: str) -> None:
    """The first build of a space is taken in turns: one builds, the others find it built."""
    import threading
    import time

    if engine == "postgresql" and find_pg_bin() is None:
        pytest.skip(needs.NO_POSTGRES)
    config = RecallConfig()
    stored = [IndexedDocument("a", "an old turn", {"session": "s", "turn": 0})]

    def slow_store() -> list[IndexedDocument]:
        time.sleep(0.2)  # a store read long enough for the others to arrive meanwhile
        return stored

    def build_all(url: str) -> None:
        outboxes = [SQLOutbox(url) for _ in range(4)]  # as four processes would
        spaces: list[Space] = []
        errors: list[BaseException] = []

        def build(outbox: SQLOutbox) -> None:
            try:
                spaces.append(outbox.recall.space("t", "new", config, stored=slow_store))
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=build, args=(o,)) for o in outboxes]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert errors == []
        assert len(spaces) == 4 and len({s.id for s in spaces}) == 1
        assert outboxes[0].recall.count(spaces[0]) == 1

    if engine == "sqlite":
        build_all(f"sqlite:///{tmp_path / 'outbox.db'}")
    else:
        with postgres_server() as url:
            build_all(url)


def _reference(texts: dict[str, str], config: RecallConfig) -> BM25Index:
    reference = BM25Index(k1=config.bm25_k1, b=config.bm25_b, analyzer=config.analyzer())
    for doc_id, text in texts.items():
        reference.add("", doc_id, text)
    return reference


def _assert_ranks_as(
    outbox: SQLOutbox, space: Space, texts: dict[str, str], config: RecallConfig
) -> None:
    reference = _reference(texts, config)
    for query in ["apple river", "dog dog cat", "pottery painting guitar", "banana"]:
        want = reference.search("", query, limit=10)
        got = outbox.recall.lexical(space, query, config, limit=10)
        assert [s.score for s in got] == pytest.approx([s.score for s in want], rel=1e-9)
        assert {(round(s.score, 9), s.id) for s in got} == {(round(s.score, 9), s.id) for s in want}


def _texts(count: int, seed: int = 3) -> dict[str, str]:
    rng = random.Random(seed)
    return {
        f"d{i}": " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 8))) for i in range(count)
    }


def test_a_compaction_moves_exactly_the_rows_it_read(postgres_url: str) -> None:
    """Another connection's rows committed while a compaction runs stay fresh, and count once."""
    config = RecallConfig(stopwords="none", stem=False, lexical_dates=False)
    outbox, namespace = SQLOutbox(postgres_url), _unique()
    outbox.recall.pack_after = 10**6  # only the compaction below packs
    space = _space(outbox, config, namespace)
    texts = _texts(40)
    outbox.put("t", namespace, [_row(i, t) for i, t in texts.items()])
    late = {"late1": "apple apple river", "late2": "dog pottery"}
    read = outbox.recall._fresh

    def read_then_another_writer_commits(connection: sa.Connection, space_id: int) -> list[Any]:
        rows = read(connection, space_id)
        outbox.put("t", namespace, [_row(i, t) for i, t in late.items()])  # its own connection
        return rows

    outbox.recall._fresh = read_then_another_writer_commits  # type: ignore[method-assign]
    with outbox.recall.database.transaction(write=True) as connection:
        moved = outbox.recall._compact(connection, space.id)
    del outbox.recall._fresh
    postings = sum(len(set(t.split())) for t in texts.values())
    assert moved == postings
    assert _tiers(outbox, space) == (4, postings)  # the late turns: 2 + 2 terms, still fresh
    _assert_ranks_as(outbox, space, texts | late, config)


@pytest.mark.parametrize("packed_by", ["first write", "first use"])
def test_an_index_of_rows_only_is_searched_then_packed_once(
    engine_url: str, caplog: pytest.LogCaptureFixture, packed_by: str
) -> None:
    """An index an older version wrote (every posting a row) works, and is packed once.

    A process packs it on its first use of the space, or a write does.
    """
    config = RecallConfig(stopwords="none", stem=False, lexical_dates=False)
    namespace = _unique()
    older = SQLOutbox(engine_url)
    older.recall.pack_after = 10**6  # as before blocks: rows only
    space = _space(older, config, namespace)
    texts = _texts(60)
    older.put("t", namespace, [_row(i, t) for i, t in texts.items()])
    postings = sum(len(set(t.split())) for t in texts.values())
    assert _tiers(older, space) == (postings, 0)
    now = SQLOutbox(engine_url)
    now.recall.pack_after, now.recall.block_size = 20, 16
    _assert_ranks_as(now, space, texts, config)  # read from rows
    with caplog.at_level("DEBUG", logger="memories.stores.vector.recall_index"):
        if packed_by == "first write":
            now.put("t", namespace, [_row("new", "cherry cat")])
            texts["new"] = "cherry cat"
            postings += 2
        else:
            assert _space(now, config, namespace) == space
    assert _tiers(now, space) == (0, postings)
    assert f"Packed {postings} recall postings" in caplog.text
    _assert_ranks_as(now, space, texts, config)
    caplog.clear()
    with caplog.at_level("DEBUG", logger="memories.stores.vector.recall_index"):
        assert _space(SQLOutbox(engine_url), config, namespace) == space
    assert "Packed" not in caplog.text  # once


def test_erasing_a_session_or_a_namespace_leaves_no_packed_posting(engine_url: str) -> None:
    """No block keeps an erased document's key or word; held() counts packed postings."""
    config = RecallConfig(stopwords="none", stem=False, lexical_dates=False)
    namespace = _unique()
    outbox = SQLOutbox(engine_url)
    outbox.recall.pack_after, outbox.recall.block_size = 8, 4
    space = _space(outbox, config, namespace)
    texts = _texts(30)
    rows = [
        OutboxRow(i, t, {"session": "kept" if n % 3 else "gone"}, needs_turn=True)
        for n, (i, t) in enumerate(texts.items())
    ]
    secret = OutboxRow("secret", "zanzibarian apple", {"session": "gone"}, needs_turn=True)
    outbox.put("t", namespace, [*rows, secret])
    gone_ids = [r.doc_id for r in [*rows, secret] if r.metadata["session"] == "gone"]
    gone_keys = _keys_of(outbox, space, gone_ids)
    assert "zanzibarian" in _packed_keys(outbox)  # packed, not only fresh
    fresh, packed = _tiers(outbox, space)
    assert packed > fresh
    gone_postings = sum(len(set(texts.get(i, "zanzibarian apple").split())) for i in gone_ids)
    held = outbox.held("t", namespace, session="gone")["recall index rows"]
    assert held == len(gone_ids) + gone_postings
    whole = outbox.held("t", namespace)["recall index rows"]
    assert whole >= len(texts) + 1 + fresh + packed
    outbox.erase_session("t", namespace, "gone")
    assert outbox.held("t", namespace, session="gone")["recall index rows"] == 0
    assert outbox.held("t", namespace)["recall index rows"] == whole - held
    left = _packed_keys(outbox)
    assert "zanzibarian" not in left
    assert not set().union(*left.values()) & gone_keys
    kept = {i: t for i, t in texts.items() if i not in gone_ids}
    _assert_ranks_as(outbox, space, kept, config)
    outbox.clear("t", namespace)
    assert outbox.held("t", namespace)["recall index rows"] == 0
    assert _tiers(outbox, space) == (0, 0)


def test_scores_are_summed_alike_whether_keys_are_near_or_far_apart() -> None:
    """Keys close together are summed by offset; keys far apart (many spaces) are sorted."""
    rng = np.random.default_rng(5)
    count = 3_000
    near = rng.integers(1, 400, count)
    far = near * 100_000  # the same documents, numbered far apart
    term = rng.integers(0, 4, count)
    tf = rng.integers(1, 4, count)
    length = rng.integers(1, 30, count)
    weights = np.array([1.5, 0.5, 2.0, 0.25])
    best = {}
    for name, keys in (("near", near), ("far", far)):
        postings = recall_index._Postings(term, keys, tf, length)
        best[name] = postings.best(weights, c=0.3, slope=0.05, n=50)
    brute: dict[int, float] = {}
    for t, k, f, n in zip(term, near, tf, length, strict=True):
        brute[int(k)] = brute.get(int(k), 0.0) + weights[t] * f / (f + 0.3 + 0.05 * n)
    want = sorted(brute.items(), key=lambda item: (-item[1], item[0]))[:50]
    assert list(best["near"]) == [k for k, _ in want]
    assert list(best["far"]) == [k * 100_000 for k, _ in want]
    assert list(best["near"].values()) == pytest.approx([s for _, s in want], rel=1e-12)
    assert list(best["far"].values()) == list(best["near"].values())


def test_a_key_past_32_bits_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    """Packed postings hold int32: a key past it would wrap silently into another document's."""
    config = RecallConfig(stopwords="none", stem=False, lexical_dates=False)
    outbox = _outbox(tmp_path)
    outbox.recall.pack_after, outbox.recall.block_size = 0, 4
    space = _space(outbox, config)
    outbox.put("t", "ns", [_row("a", "apple river")])
    with outbox.recall.database.transaction(write=True) as connection:
        connection.execute(
            sa.text(
                "UPDATE sqlite_sequence SET seq = :seq WHERE name = 'memories_recall_documents'"
            ),
            {"seq": 2**31 - 1},
        )
    before = outbox.held("t", "ns")["recall index rows"]
    with pytest.raises(BackendError, match="32-bit"):
        outbox.put("t", "ns", [_row("b", "apple guitar")])
    assert outbox.held("t", "ns")["recall index rows"] == before
    assert [s.id for s in outbox.recall.lexical(space, "apple", config, limit=5)] == ["a"]
