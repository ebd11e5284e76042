"""Memories that share a database own their rows (issue 34, finding 3).

Every memory type with a store is put in one SQLite file, then in one
PostgreSQL database (with one Chroma folder beside each), for two users. Then
every LangGraph adapter and every document memory is driven against the
others' rows: an adapter lists, gets, writes and deletes only its own
memory's items, however a key is spelled, and a memory configured with
another kind's key is refused instead of reading or rewriting that kind's
document. Every row of the shared tables reads back exactly as it was.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from memories.integrations.langgraph_store import (
    CollectionStoreAdapter,
    ProfileStoreAdapter,
    VectorStoreAdapter,
)

from memories import InstructionsMemory, InvalidInputError, ProfileMemory
from memories.long_term.profile import ProfileStore
from memories.stores.sql import get_engine
from tests.core.test_erasure import _leaves, config_for, fill
from tests.retention.conftest import Clock

USERS = ("maya", "omar")
SHARED_TABLES = ("memories_store", "memories_profile_changes", "memories_profile_pending")


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def shared(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Any]]:
    """Every memory type on one SQL database and one Chroma folder, filled for two users."""
    folder = tmp_path_factory.mktemp(request.param)
    url = None
    if request.param == "postgresql":
        url = request.getfixturevalue("postgres_url")
    config = config_for(folder, entities=False, sql=url)
    fill(config)
    for user in USERS:  # an entity and a relation of the graph, written through its own store
        graph = _leaves(config, user)["EntityMemory"]
        graph.ledger.put(graph.namespace, "entity:jane", {"name": "Jane", "user": user})
        graph.ledger.put(graph.namespace, "relation:r1", {"source": "jane", "user": user})
    yield config


def _url(config: dict[str, Any]) -> str:
    return str(config["memories"][2]["url"])  # the profile's: every SQL memory's


def rows(config: dict[str, Any]) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of the shared tables, as stored."""
    engine = get_engine(_url(config))
    with engine.connect() as connection:
        return {
            name: sorted(
                (
                    tuple(map(repr, row))
                    for row in connection.execute(sa.text(f"SELECT * FROM {name}"))
                ),
                key=str,
            )
            for name in SHARED_TABLES
        }


def others_keys(config: dict[str, Any], user: str) -> list[str]:
    """The keys other kinds hold in the user's namespace (their current documents)."""
    query = sa.text("SELECT key FROM memories_store WHERE namespace = :ns AND key != 'profile'")
    with get_engine(_url(config)).connect() as connection:
        return sorted(connection.execute(query, {"ns": f"users.{user}"}).scalars())


def test_every_kind_holds_rows_in_the_shared_tables(shared: dict[str, Any]) -> None:
    keys = set(others_keys(shared, "maya"))
    assert {"instructions", "entity:jane", "relation:r1"} <= keys
    assert any(key.startswith("memory:") for key in keys)


def test_the_profile_adapter_lists_and_gets_only_profiles(shared: dict[str, Any]) -> None:
    leaves = _leaves(shared, "maya")
    store = ProfileStoreAdapter.from_memory(leaves["ProfileMemory"])
    found = store.search(("users",), limit=100)
    assert sorted((tuple(i.namespace), i.key) for i in found) == [
        (("users", user), "profile") for user in USERS
    ]
    assert all(store.get(("users", "maya"), key) is None for key in others_keys(shared, "maya"))
    assert store.list_namespaces() == [("users", user) for user in USERS]
    omitting = ProfileStoreAdapter.from_memory(leaves["ProfileMemory"], ttl={"omit_expired": True})
    assert {i.key for i in omitting.search(("users",), limit=100)} == {"profile"}


def test_the_profile_adapter_cannot_write_or_delete_anothers_row(shared: dict[str, Any]) -> None:
    before = rows(shared)
    leaves = _leaves(shared, "maya")
    for store in (
        ProfileStoreAdapter.from_memory(leaves["ProfileMemory"]),
        ProfileStoreAdapter(ProfileStore(_url(shared))),
    ):
        for key in others_keys(shared, "maya"):
            with pytest.raises(InvalidInputError, match=f"{key!r}.*another key"):
                store.put(("users", "maya"), key, {"text": "tampered"})
            store.delete(("users", "maya"), key)  # as a missing key: nothing to delete
    assert rows(shared) == before
    assert [r.content for r in leaves["CollectionMemory"].list()] == ["maya drinks green tea "
                                                                       "Zqmayasecret"]  # fmt: skip


@pytest.mark.parametrize("kind", [ProfileMemory, InstructionsMemory])
def test_a_memory_given_anothers_key_is_refused_and_reads_none_of_it(
    shared: dict[str, Any], kind: type[Any]
) -> None:
    before = rows(shared)
    for key in others_keys(shared, "maya"):
        if kind is InstructionsMemory and key == "instructions":
            continue
        memory = kind(url=_url(shared), namespace=("users", "maya"), key=key, policy="manual")
        assert memory.history() == []
        with pytest.raises(InvalidInputError, match=f"{key!r}"):
            memory.put({"name": "x"} if kind is ProfileMemory else "Answer in French")
    assert rows(shared) == before


def test_the_collection_and_vector_adapters_see_only_their_memorys_items(
    shared: dict[str, Any],
) -> None:
    before = rows(shared)
    leaves = _leaves(shared, "maya")
    collection = CollectionStoreAdapter(leaves["CollectionMemory"])
    vector = VectorStoreAdapter(leaves["VectorMemory"])
    ids = {r.id for r in leaves["CollectionMemory"].list()}
    assert {i.key for i in collection.search(("users", "maya"), limit=100)} == ids
    turns = {r.id for r in leaves["VectorMemory"].export_documents()}
    assert {i.key for i in vector.search(("users", "maya"), limit=100)} <= turns | {"maya-queued"}
    for key in ("profile", "instructions", "entity:jane", *turns):
        assert collection.get(("users", "maya"), key) is None
        collection.delete(("users", "maya"), key)
    for key in ("profile", "instructions", *ids):
        assert vector.get(("users", "maya"), key) is None
        vector.delete(("users", "maya"), key)
    assert rows(shared) == before
    assert {r.id for r in leaves["VectorMemory"].export_documents()} == turns


def test_the_profile_adapter_gets_and_searches_an_expired_profile_alike(
    shared: dict[str, Any],
) -> None:
    clock = Clock()
    namespace = ("users", "expiring")
    profile = ProfileMemory(
        url=_url(shared), namespace=namespace, policy="manual", ttl=1.0, clock=clock
    )
    profile.put({"name": "Ada"})
    store = ProfileStoreAdapter.from_memory(profile)
    assert store.get(namespace, "profile") is not None
    assert [i.key for i in store.search(namespace)] == ["profile"]
    clock.minutes(2)
    assert store.get(namespace, "profile") is None
    assert store.search(namespace) == []
    assert namespace not in store.list_namespaces()


def test_rows_an_older_version_wrote_are_claimed_by_their_kind(tmp_path: Path) -> None:
    """A database made before rows had owners: each kind's rows are its own on opening."""
    file = tmp_path / "old.db"
    with sqlite3.connect(file) as connection:
        connection.executescript(OLD_SCHEMA)
        for key, value in [
            ("profile", '{"name": "Ada"}'),
            ("instructions", '{"instructions": "Be brief"}'),
            ("memory:abc", '{"content": "Ada drinks tea"}'),
            ("entity:jane", '{"name": "Jane"}'),
            ("notes", '{"text": "an adapter item"}'),
        ]:
            connection.execute(
                "INSERT INTO memories_store VALUES ('users.ada', ?, ?, 1, 0.0, 0.0)", (key, value)
            )
    store = ProfileStoreAdapter(ProfileStore(f"sqlite:///{file}"))
    assert sorted(i.key for i in store.search(("users",))) == ["notes", "profile"]
    with pytest.raises(InvalidInputError, match="'memory:abc'"):
        store.put(("users", "ada"), "memory:abc", {"text": "tampered"})
    store.put(("users", "ada"), "notes", {"text": "edited"})  # an unowned row is taken
    with sqlite3.connect(file) as connection:
        owners = dict(connection.execute("SELECT key, owner FROM memories_store"))
    assert owners == {
        "profile": "profile",
        "instructions": "instructions",
        "memory:abc": "collection",
        "entity:jane": "entity_graph",
        "notes": "profile",
    }


#: The three tables as the release before owners made them (SQLite).
OLD_SCHEMA = """
CREATE TABLE memories_store (
    namespace VARCHAR(512) NOT NULL, key VARCHAR(255) NOT NULL, value TEXT,
    version INTEGER NOT NULL, created_at FLOAT NOT NULL, updated_at FLOAT NOT NULL,
    PRIMARY KEY (namespace, key));
CREATE TABLE memories_profile_changes (
    id INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, namespace VARCHAR(512) NOT NULL,
    key VARCHAR(255) NOT NULL, version INTEGER, kind VARCHAR(16) NOT NULL, document TEXT,
    patch TEXT, turns TEXT, error TEXT, raw TEXT, created_at FLOAT NOT NULL);
CREATE TABLE memories_profile_pending (
    id INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, namespace VARCHAR(512) NOT NULL,
    key VARCHAR(255) NOT NULL, messages TEXT NOT NULL, created_at FLOAT NOT NULL);
"""
