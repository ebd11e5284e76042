"""PostgreSQL with pgvector as the vector backend: one database, one transaction per turn.

The contract suite runs on it too (tests/vector/test_contract.py); these
check what is its own: the same hybrid ranking and filters as Chroma, namespace
isolation in one table, turn numbers across objects, and a server that dies
in the middle of a write.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy import event

from memories import (
    BackendError,
    BackendUnavailableError,
    CollectionMemory,
    ConfigError,
    ExampleMemory,
    VectorMemory,
    create_memory,
)
from memories.kernel.namespaces import namespace_key
from memories.stores.sql import get_engine
from memories.stores.vector.pgvector_backend import PgVectorBackend
from tests.helpers import joined
from tests.postgres import PostgresServer
from tests.retention.conftest import (
    Clock,
    check_deletions_discard_expiry_rows,
    rewritten_while_swept,
)
from tests.vector.conftest import MakeVector

EMBEDDINGS = "tests.vector.conftest:WordEmbeddings"

TURNS = [
    ("My sister Ines lives in Porto.", "Nice, Porto is lovely."),
    ("I'm allergic to peanuts.", "Noted: no peanuts."),
    ("I'm training for a half marathon in May.", "Good luck with the training!"),
    ("My dog Rex loves the beach.", "Dogs and beaches go together."),
    ("I work as a nurse in Lisbon.", "That is demanding work."),
    ("We talked about the marathon route.", "The route follows the river."),
    ("Rex ate my running shoes.", "Oh no, Rex!"),
    ("Ines is visiting next week.", "Enjoy your time with your sister."),
]
QUERIES = [
    "Where does my sister live?",
    "Any food I should avoid?",
    "What race am I training for?",
    "What did the dog do?",
    "what is my job",
]


def _count_rows(url: str, namespace: str) -> tuple[int, int]:
    """(documents, recall index rows) of a namespace, read straight from the tables."""
    with get_engine(url).connect() as connection:
        documents = connection.execute(
            sa.text("SELECT count(*) FROM memories_pgvector_documents WHERE namespace = :n"),
            {"n": namespace},
        ).scalar_one()
        indexed = connection.execute(
            sa.text(
                "SELECT count(*) FROM memories_recall_documents d "
                "JOIN memories_recall_spaces s ON s.id = d.space "
                "WHERE s.target = 'pgvector' AND s.namespace = :n"
            ),
            {"n": namespace},
        ).scalar_one()
    return int(documents), int(indexed)


def _key(memory: VectorMemory) -> str:
    return str(memory.backend._key)  # type: ignore[attr-defined]


def test_turns_are_saved_searched_and_loaded(make_pg_vector: MakeVector) -> None:
    memory = make_pg_vector(k=2)
    for human, ai in TURNS:
        memory.save_context({"input": human}, {"output": ai})
    assert isinstance(memory.backend, PgVectorBackend)
    shown = memory.load_memory_variables({"input": "Where does my sister live?"})["history"]
    assert shown.splitlines()[0] == f"input: {TURNS[0][0]}"
    (best, _) = memory.search("peanuts allergy")
    assert best.text == f"input: {TURNS[1][0]}\noutput: {TURNS[1][1]}"
    assert best.metadata["turn"] == 1 and best.metadata["session"] == "default"
    assert best.metadata["namespace"] == _key(memory) and 0 < best.score <= 1
    assert [r.metadata["turn"] for r in memory.export_documents()] == list(range(len(TURNS)))
    status = memory.status()
    assert (status.write, status.pending, memory.pending(), memory.flush()) == ("sync", 0, 0, True)
    assert asyncio.run(memory.asearch("peanuts allergy", k=1))[0].id == best.id


def test_hybrid_ranking_is_chromas_on_the_same_turns(make_pg_vector: MakeVector) -> None:
    collection = f"t{uuid.uuid4().hex[:12]}"
    chroma = VectorMemory(
        mode="memory", collection=collection, embeddings=EMBEDDINGS, write="sync", k=5
    )
    postgres = make_pg_vector(k=5)
    for memory in (chroma, postgres):
        for human, ai in TURNS:
            memory.save_context({"input": human}, {"output": ai})
    for query in QUERIES:
        want, got = chroma.search(query), postgres.search(query)
        assert [r.text for r in got] == [r.text for r in want], query
        assert [r.score for r in got] == pytest.approx([r.score for r in want], abs=1e-5)
    filtered = {"turn": {"$gte": 3}}
    want, got = chroma.search("Rex", filter=filtered), postgres.search("Rex", filter=filtered)
    assert [r.text for r in got] == [r.text for r in want]


METADATA: list[dict[str, Any]] = [
    {"x": 1, "s": "foo", "tags": ["p", "q"]},
    {"x": 2.5, "s": "bar"},
    {"s": "baz", "flag": True},
    {"x": "str"},
    {"x": True, "tags": ["q"]},
    {"x": 7, "s": "foo", "flag": False},
]
FILTERS: list[dict[str, Any]] = [
    {"x": 1},
    {"x": 1.0},
    {"x": True},
    {"s": "foo"},
    {"x": {"$ne": 1}},
    {"x": {"$gt": 1}},
    {"x": {"$gte": 1}},
    {"x": {"$lt": 3}},
    {"x": {"$lte": 2.5}},
    {"x": {"$in": [1, 7]}},
    {"x": {"$nin": [1, 7]}},
    {"s": {"$in": ["foo", "baz"]}},
    {"tags": "q"},
    {"tags": {"$contains": "q"}},
    {"tags": {"$not_contains": "q"}},
    {"flag": {"$ne": False}},
    {"$and": [{"s": "foo"}, {"x": {"$gt": 2}}]},
    {"$or": [{"s": "bar"}, {"flag": True}, {"x": "str"}]},
    {"$and": [{"$or": [{"s": "foo"}, {"s": "bar"}]}, {"x": {"$lt": 5}}]},
]


def test_filters_select_what_chromas_select(make_pg_vector: MakeVector) -> None:
    texts = [f"document number {i}" for i in range(len(METADATA))]
    ids = [f"d{i}" for i in range(len(METADATA))]
    chroma = VectorMemory(
        mode="memory", collection=f"t{uuid.uuid4().hex[:12]}", embeddings=EMBEDDINGS, write="sync"
    )
    postgres = make_pg_vector()
    for memory in (chroma, postgres):
        memory.add(texts, metadatas=METADATA, ids=ids)
    for where in FILTERS:
        want = sorted(r.id for r in chroma.backend.find(where))
        assert sorted(r.id for r in postgres.backend.find(where)) == want, where
        found = postgres.search("document number", k=10, filter=where)
        assert sorted(r.id for r in found) == want, where


def test_a_namespace_never_sees_anothers_documents(make_pg_vector: MakeVector) -> None:
    mine, theirs = make_pg_vector(namespace=("mine",)), make_pg_vector(namespace=("theirs",))
    # The other namespace is larger and holds the same texts: it would win any unscoped search.
    theirs.add([f"{human} {ai} copy {i}" for i in range(40) for human, ai in TURNS[:3]])
    ids = mine.add([f"{human} {ai}" for human, ai in TURNS])
    other = [r.id for r in theirs.export_documents()]
    for query in QUERIES:
        assert {r.id for r in mine.search(query, k=8)} <= set(ids)
    assert mine.backend.get(other[:5]) == [] and mine.backend.vectors(other[:5]) == {}
    assert mine.backend.find({"session": "default"}) != []
    assert {r.id for r in mine.backend.find({"session": "default"})} == set(ids)
    mine.delete(other[:5])
    mine.delete(filter={"session": "default"})
    assert mine.backend.count() == 0 and theirs.backend.count() == 120
    theirs.add(["one more"])
    mine.erase_namespace()
    assert theirs.backend.count() == 121
    assert _count_rows(mine.vectors or "", _key(theirs)) == (121, 121)


def test_delete_clear_and_erase_take_the_index_rows_with_them(make_pg_vector: MakeVector) -> None:
    memory = make_pg_vector(session_id="s1")
    other_session = make_pg_vector(session_id="s2")
    for human, ai in TURNS[:4]:
        memory.save_context({"input": human}, {"output": ai})
    other_session.save_context({"input": "I collect stamps."}, {"output": "Fun."})
    url, key = memory.vectors or "", _key(memory)
    assert _count_rows(url, key) == (5, 5)
    (first,) = memory.search("sister Porto", k=1)
    memory.delete([first.id])
    assert _count_rows(url, key) == (4, 4) and memory.backend.get([first.id]) == []
    memory.delete(filter={"turn": 1})
    assert _count_rows(url, key) == (3, 3)
    memory.clear()  # this session's turns only
    assert _count_rows(url, key) == (1, 1)
    assert [r.text for r in other_session.search("stamps")] == [
        "input: I collect stamps.\noutput: Fun."
    ]
    other_session.erase_namespace()
    assert _count_rows(url, key) == (0, 0) and memory.search("stamps") == []


def test_two_memory_objects_number_a_sessions_turns_without_gaps(
    make_pg_vector: MakeVector,
) -> None:
    one, two = make_pg_vector(session_id="chat"), make_pg_vector(session_id="chat")

    def talk(memory: VectorMemory, label: str) -> None:
        for i in range(10):
            memory.save_context({"input": f"{label} says {i}"}, {"output": "ok"})

    threads = [threading.Thread(target=talk, args=(m, n)) for m, n in ((one, "a"), (two, "b"))]
    for thread in threads:
        thread.start()
    joined(*threads)
    turns = sorted(r.metadata["turn"] for r in one.export_documents())
    assert turns == list(range(20))


def test_different_embedding_widths_live_side_by_side_but_never_in_one_namespace(
    make_pg_vector: MakeVector,
) -> None:
    wide = make_pg_vector(namespace=("wide",))
    narrow = make_pg_vector(namespace=("narrow",))
    narrow.embedder.dim = 16  # type: ignore[attr-defined]
    wide.save_context({"input": "I like tea"}, {"output": "ok"})
    narrow.save_context({"input": "I like coffee"}, {"output": "ok"})
    assert len(wide.backend.vectors([wide.search("tea")[0].id]).popitem()[1]) == 64
    assert len(narrow.backend.vectors([narrow.search("coffee")[0].id]).popitem()[1]) == 16
    wide.embedder.dim = 16  # type: ignore[attr-defined]
    with pytest.raises(BackendError, match=r"holds embeddings 64 wide; this embedder gives 16"):
        wide.save_context({"input": "I like cocoa"}, {"output": "ok"})
    with pytest.raises(BackendError, match=r"gives 16\. Search with the embedder the namespace"):
        wide.search("cocoa")
    assert wide.backend.count() == 1
    wide.erase_namespace()  # frees the width
    wide.save_context({"input": "I like cocoa"}, {"output": "ok"})
    assert wide.search("cocoa")[0].text.startswith("input: I like cocoa")


def test_a_server_stopped_mid_write_raises_and_leaves_nothing_half_written(
    pgvector_server: PostgresServer,
) -> None:
    # The password is ignored by the test server (trust) and must never be shown.
    url = pgvector_server.url.replace("postgres@", "postgres:s3cret@")
    memory = VectorMemory(vectors=url, embeddings=EMBEDDINGS, namespace=(uuid.uuid4().hex,))
    for human, ai in TURNS[:3]:
        memory.save_context({"input": human}, {"output": ai})
    key = _key(memory)
    assert _count_rows(url, key) == (3, 3)
    engine = get_engine(url)

    def stop_before_indexing(connection: Any, cursor: Any, statement: str, *args: Any) -> None:
        # The document row is in; the server dies before the index rows go in.
        if statement.startswith("INSERT INTO memories_recall_postings"):
            pgvector_server.stop()

    event.listen(engine, "before_cursor_execute", stop_before_indexing)
    try:
        with pytest.raises(BackendUnavailableError) as raised:
            memory.save_context({"input": TURNS[3][0]}, {"output": TURNS[3][1]})
    finally:
        event.remove(engine, "before_cursor_execute", stop_before_indexing)
    message = str(raised.value)
    assert "s3cret" not in message and "postgres:***@127.0.0.1" in message
    with pytest.raises(BackendUnavailableError):  # down: every call says so
        memory.search("dog")
    pgvector_server.start()
    # The pools' connections died with the server; they are replaced on checkout
    # (pool_pre_ping), with no dispose() here: the memory works again as it is.
    assert _count_rows(url, key) == (3, 3)
    memory.save_context({"input": TURNS[3][0]}, {"output": TURNS[3][1]})
    assert _count_rows(url, key) == (4, 4)
    assert sorted(r.metadata["turn"] for r in memory.export_documents()) == [0, 1, 2, 3]


def test_a_restarted_server_is_used_again_without_a_failed_call(
    pgvector_server: PostgresServer,
) -> None:
    # The pool holds connections from before the restart: each is pinged on checkout
    # and replaced, so the first save and search after the restart succeed.
    memory = VectorMemory(
        vectors=pgvector_server.url, embeddings=EMBEDDINGS, namespace=(uuid.uuid4().hex,)
    )
    memory.save_context({"input": TURNS[0][0]}, {"output": TURNS[0][1]})
    assert get_engine(pgvector_server.url).pool.checkedin() >= 1
    pgvector_server.stop()
    pgvector_server.start()
    memory.save_context({"input": TURNS[1][0]}, {"output": TURNS[1][1]})
    assert [r.metadata["turn"] for r in memory.search(TURNS[1][0], k=1)] == [1]


def test_example_memory_keeps_its_examples_in_postgres(pgvector_server: PostgresServer) -> None:
    examples = ExampleMemory(
        vectors=pgvector_server.url, embeddings=EMBEDDINGS, namespace=(uuid.uuid4().hex,), k=1
    )
    examples.add_example({"input": "what is the capital of France", "output": "Paris"})
    examples.add_example({"input": "write a haiku about rain", "output": "soft rain"})
    (chosen,) = examples.select("capital of Japan")
    assert chosen.values == {"input": "what is the capital of France", "output": "Paris"}
    assert isinstance(examples.backend, PgVectorBackend)


def test_collection_memory_indexes_its_memories_in_postgres(
    pgvector_server: PostgresServer, tmp_path: Any
) -> None:
    from tests.collection.fakes import CollectionScript

    model = CollectionScript(
        script={
            "I live in Lisbon.": [("insert", None, "User lives in Lisbon")],
            "I moved to Porto.": [("update", "lives in", "User lives in Porto")],
        }
    )
    memory = CollectionMemory(
        vectors=pgvector_server.url,
        embeddings=EMBEDDINGS,
        namespace=(uuid.uuid4().hex,),
        url=f"sqlite:///{tmp_path / 'ledger.db'}",
        update_method="json",
        llm=model,
    )
    for line in ("I live in Lisbon.", "I moved to Porto."):
        memory.save_context({"input": line}, {"output": "ok"})
    assert [r.content for r in memory.search("where does the user live")] == ["User lives in Porto"]
    assert memory.backend.count() == 1 and isinstance(memory.backend, PgVectorBackend)


def test_the_vectors_url_round_trips_through_config(pgvector_server: PostgresServer) -> None:
    memory = VectorMemory(vectors=pgvector_server.url, embeddings=EMBEDDINGS, k=3)
    config = memory.to_config()
    assert config["vectors"] == pgvector_server.url
    again = create_memory(config)
    assert isinstance(again, VectorMemory) and again.to_config() == config
    assert isinstance(again.backend, PgVectorBackend)


@pytest.mark.parametrize(
    "url",
    ["sqlite:///memories.db", "mysql://u:pw@host/db", "postgresql+asyncpg://u@h/db", "nonsense"],
)
def test_a_vectors_url_that_is_not_postgres_is_a_config_error(url: str) -> None:
    with pytest.raises(ConfigError, match=r"vectors must be a PostgreSQL SQLAlchemy URL") as raised:
        VectorMemory(vectors=url, embeddings=EMBEDDINGS)
    assert "pw" not in str(raised.value)


@pytest.fixture
def unprivileged_url(pgvector_server: PostgresServer) -> Iterator[str]:
    """A fresh database without pgvector, and a role that may not create it."""
    name = f"d{uuid.uuid4().hex[:10]}"
    admin = get_engine(pgvector_server.url).execution_options(isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.exec_driver_sql(f"CREATE ROLE {name} LOGIN")
        connection.exec_driver_sql(f"CREATE DATABASE {name} OWNER {name}")
    yield pgvector_server.url.replace("postgres@", f"{name}@").replace("/postgres", f"/{name}")


def test_a_database_without_pgvector_says_to_install_it(unprivileged_url: str) -> None:
    memory = VectorMemory(vectors=unprivileged_url, embeddings=EMBEDDINGS)
    with pytest.raises(BackendError, match=r"has no pgvector extension") as raised:
        memory.save_context({"input": "hi"}, {"output": "hello"})
    message = str(raised.value)
    assert "Install pgvector" in message and unprivileged_url.split("@")[1] in message


def test_the_databases_namespaces_are_listed_with_their_counts(
    make_pg_vector: MakeVector,
) -> None:
    first = make_pg_vector(namespace=("u", "1"))
    second = make_pg_vector(namespace=("u", "2"))
    first.save_context({"input": "a"}, {"output": "b"})
    for _ in range(2):
        second.save_context({"input": "c"}, {"output": "d"})
    listed = first.backend.namespaces()  # (the fixture puts a test's namespaces under a prefix)
    assert listed[namespace_key(first.namespace)] == 1
    assert listed[namespace_key(second.namespace)] == 2


def test_a_document_written_again_while_the_sweep_runs_is_kept(
    make_pg_vector: MakeVector, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock()
    memory = make_pg_vector(clock=clock)
    [rewritten, gone] = memory.add(["Ada is in Rome", "Ada is at the dentist"], ttl=10)
    clock.minutes(11)
    other = make_pg_vector(clock=clock)
    rewritten_while_swept(
        monkeypatch, lambda: other.add(["Ada is in Oslo"], ids=[rewritten], ttl=10)
    )
    memory.sweep()
    monkeypatch.undo()
    assert [r.text for r in memory.backend.get([rewritten, gone])] == ["Ada is in Oslo"]
    assert memory.expiry.expires_at(memory.namespace, rewritten) == clock.now + 600


def test_the_inspector_counts_no_expired_document_of_pgvector(
    pgvector_server: PostgresServer, tmp_path: Path
) -> None:
    from memories.faces.server.service import Inspector

    prefix = f"t{uuid.uuid4().hex[:12]}"
    options = {"vectors": pgvector_server.url, "embeddings": "tests.vector.conftest:WordEmbeddings"}
    past = VectorMemory(namespace=(prefix, "ada"), clock=lambda: time.time() - 7200, **options)
    past.add(["Ada is in Rome", "Ada is at the dentist"], ttl=60)  # expired an hour ago
    [live] = past.add(["Ada plays chess"])
    config = {"type": "vector", "namespace": [prefix, "{user_id}"], **options}
    inspector = Inspector(config)
    listed = {row["namespace"]: row["memories"] for row in inspector.namespaces()["namespaces"]}
    assert listed[f"{prefix}.ada"] == {"vector": 1}
    [row] = inspector.namespace(f"{prefix}.ada")["memories"]
    assert row["documents"] == 1 and past.backend.get([live]) != []


def test_a_bulk_add_refreshes_the_planners_statistics(
    make_pg_vector: MakeVector, pgvector_server: PostgresServer
) -> None:
    """Without it the planner takes the freshly filled table for small and sorts every
    document of a namespace exactly instead of using the HNSW index (benchmarks/scale_out.py)."""
    engine = get_engine(pgvector_server.url)
    statements: list[str] = []

    def seen(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        statements.append(statement)

    event.listen(engine, "before_cursor_execute", seen)
    try:
        memory = make_pg_vector(namespace=("bulk",))
        memory.add([f"note {i} about the garden" for i in range(10)])
        small = [s for s in statements if s.startswith("ANALYZE")]
        memory.add([f"line {i} of the imported diary" for i in range(1_000)])
        large = [s for s in statements if s.startswith("ANALYZE")]
    finally:
        event.remove(engine, "before_cursor_execute", seen)
    assert small == []
    assert len(large) == 1
    assert "memories_pgvector_documents" in large[0] and "memories_recall_blocks" in large[0]
    with engine.connect() as connection:
        estimated = connection.execute(
            sa.text("SELECT reltuples FROM pg_class WHERE relname = 'memories_pgvector_documents'")
        ).scalar_one()
    assert estimated >= 1_000
    assert len(memory.search("imported diary", k=3)) == 3


def test_deletions_discard_the_expiry_rows_of_what_they_deleted(make_pg_vector: MakeVector) -> None:
    clock = Clock()
    check_deletions_discard_expiry_rows(lambda **options: make_pg_vector(clock=clock, **options))


def test_the_commands_name_a_pgvector_memory_by_its_database(make_pg_vector: MakeVector) -> None:
    """`memories inspect` and `clear` read a pgvector memory's place from its backend (they
    raised NotImplementedError: ``memory.store`` is Chroma's only)."""
    import io

    from memories.faces.commands import clear_targets, inspect

    memory = make_pg_vector(session_id="s1")
    memory.save_context({"input": "I collect stamps."}, {"output": "Fun."})
    out = io.StringIO()
    inspect(memory, out)
    assert f"in the {memory.backend.location}: 1 documents" in out.getvalue()
    assert "PostgreSQL (pgvector)" in memory.backend.location
    [target] = clear_targets(memory, namespaces=True)
    assert target.endswith(f"(every session) in the {memory.backend.location}")
