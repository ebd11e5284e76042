"""Two collections of one namespace, told apart by their ``key``, never see each other's rows."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from memories.integrations.langgraph_store import CollectionStoreAdapter

from memories import CollectionMemory, InvalidInputError
from tests.retention.conftest import Clock, ledger_url  # noqa: F401  (SQLite and PostgreSQL)

EMBEDDINGS = "tests.vector.conftest:WordEmbeddings"
Make = Callable[..., CollectionMemory]


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def make(tmp_path: Path, clock: Clock, ledger_url: str) -> Make:  # noqa: F811
    def made(key: str, **options: Any) -> CollectionMemory:
        options.setdefault("namespace", ("users", "ada"))
        options.setdefault("url", ledger_url)
        return CollectionMemory(
            key=key,
            path=str(tmp_path / "chroma"),
            embeddings=EMBEDDINGS,
            policy="manual",
            clock=clock,
            **options,
        )

    return made


@pytest.mark.parametrize(
    "other", ["collection", "home", "Work"]
)  # Work: SQLite's LIKE ignores case
def test_collections_with_different_keys_keep_their_own_memories(make: Make, other: str) -> None:
    work, home = make("work"), make(other)
    x = work.put("Ada writes Rust at work")
    y = home.put("Ada grows tomatoes at home")
    work.put("work's note on diet", memory_id="diet")
    home.put("home's note on diet", memory_id="diet")

    assert sorted(r.id for r in work.list()) == sorted([x, "diet"])
    assert sorted(r.id for r in home.list()) == sorted([y, "diet"])
    assert {r.id for r in work.search("Ada tomatoes Rust diet", k=10)} == {x, "diet"}
    assert {r.id for r in home.search("Ada tomatoes Rust diet", k=10)} == {y, "diet"}
    assert home.get(x) is None and work.get("diet").content == "work's note on diet"
    with pytest.raises(InvalidInputError, match="No memory"):
        home.update(x, "tampered")
    with pytest.raises(InvalidInputError, match="No memory"):
        asyncio.run(home.adelete(x))
    assert [v.version for v in work.history("diet")] == [1]
    assert {d.id for d in work.export_documents()} == {x, "diet"}

    home.clear()
    assert home.list() == [] and sorted(r.id for r in work.list()) == sorted([x, "diet"])
    assert {r.id for r in work.search("Ada tomatoes Rust diet", k=10)} == {x, "diet"}


def test_one_collections_expiry_never_touches_anothers(make: Make, clock: Clock) -> None:
    work, home = make("work"), make("collection")
    work.put("work's note on diet", memory_id="diet", ttl=None)
    home.put("home's note on diet", memory_id="diet", ttl=10)
    clock.minutes(11)

    assert home.get("diet") is None and work.get("diet") is not None
    assert work.sweep() == {"users/ada": 1}  # sweeps the store: home's expired one
    assert home.history("diet") == []
    assert work.get("diet").content == "work's note on diet"
    assert work.history("diet") and work.expiry.count() == 0


def test_the_langgraph_adapter_sees_only_its_collections_items(make: Make) -> None:
    work, home = make("work"), make("home")
    work.put("Ada writes Rust at work", memory_id="job")
    home.put("Ada grows tomatoes at home", memory_id="garden")
    store = CollectionStoreAdapter(work)
    assert [i.key for i in store.search(("users",))] == ["job"]
    assert store.get(("users", "ada"), "garden") is None
    store.delete(("users", "ada"), "garden")
    assert home.get("garden") is not None


def test_a_database_of_one_keyed_collection_reads_back_after_the_upgrade(
    make: Make, clock: Clock, tmp_path: Path
) -> None:
    """An older version kept every key's memories under ``memory:<id>``: claimed on open."""
    older = make("collection", url=f"sqlite:///{tmp_path / 'ledger.db'}")  # as an older version
    x = older.put("Ada writes Rust at work", ttl=None)
    y = older.put("Ada is on call this week", ttl=60)
    older.update(x, "Ada writes Rust and Go at work")
    before = sqlite3.connect(tmp_path / "ledger.db")
    with sqlite3.connect(tmp_path / "older.db") as copy:
        before.backup(copy)
        copy.execute("DROP TABLE memories_collection_legacy")  # not made by an older version
    before.close()
    url = f"sqlite:///{tmp_path / 'older.db'}"

    work = make("work", url=url)
    assert sorted(r.id for r in work.list()) == sorted([x, y])
    assert [v.version for v in work.history(x)] == [1, 2]
    assert {r.id for r in work.search("Ada Rust on call", k=5)} == {x, y}
    assert make("home", url=url).list() == []  # claimed once
    assert make("collection", url=url).list() == []
    clock.minutes(61)
    assert work.get(y) is None and work.get(x) is not None  # y kept its time to live
    assert work.sweep() == {"users/ada": 1} and work.history(y) == []


def test_the_langgraph_adapters_times_to_live_are_its_collections(make: Make, clock: Clock) -> None:
    work, home = make("work"), make("collection")
    home.put("home's note on diet", memory_id="diet", ttl=None)
    store = CollectionStoreAdapter(work, ttl={"omit_expired": True}, clock=clock)
    store.put(("users", "ada"), "diet", {"content": "work's note on diet"}, ttl=10)
    clock.minutes(11)
    assert store.get(("users", "ada"), "diet") is None and work.get("diet") is None
    assert store.sweep_ttl() == 1
    assert work.history("diet") == [] and home.get("diet") is not None


def test_erasing_a_namespace_leaves_no_note_of_it(make: Make, tmp_path: Path) -> None:
    """The upgrade's note of which namespaces held collection rows names a person too."""
    older = make("collection", url=f"sqlite:///{tmp_path / 'ledger.db'}")  # as an older version
    older.put("Ada writes Rust at work")
    before = sqlite3.connect(tmp_path / "ledger.db")
    with sqlite3.connect(tmp_path / "older.db") as copy:
        before.backup(copy)
        copy.execute("DROP TABLE memories_collection_legacy")  # not made by an older version
    before.close()
    reopened = make("collection", url=f"sqlite:///{tmp_path / 'older.db'}")
    assert reopened.list()  # opened by this version: the note is made

    def noted() -> list[str]:
        with sqlite3.connect(tmp_path / "older.db") as db:
            return [ns for (ns,) in db.execute("SELECT namespace FROM memories_collection_legacy")]

    assert noted() == ["users.ada"]
    for share in reopened.erasure_shares(session=False, namespace=True):  # as erase_user does
        share.erase()
    assert noted() == [] and reopened.list() == []
