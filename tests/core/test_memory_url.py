"""An in-memory SQLite URL (``sqlite://``) is one database per store object.

Not one per thread, not one for every in-memory store of the process: a store
made on it keeps its rows for its life, from any thread and from asyncio (one
connection, one transaction at a time), and no other store sees them.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from memories import CollectionMemory, ProfileMemory
from memories.stores.documents import ProfileStore
from tests.retention.conftest import EMBEDDINGS, Clock

ADA = ("users", "ada")


@pytest.mark.parametrize("url", ["sqlite://", "sqlite:///:memory:"])
def test_two_in_memory_stores_do_not_see_each_others_items(url: str) -> None:
    one, two = ProfileStore(url), ProfileStore(url)
    one.put(ADA, "profile", {"city": "Rome"})
    assert two.get(ADA, "profile") is None and two.search(("users",)) == []
    two.put(ADA, "profile", {"city": "Oslo"})
    found = one.get(ADA, "profile")
    assert found is not None and found.value == {"city": "Rome"}


def test_an_in_memory_store_serves_every_thread_and_asyncio() -> None:
    store = ProfileStore("sqlite://")
    store.put(ADA, "profile", {"city": "Rome"})

    def in_a_thread() -> object:
        found = store.get(ADA, "profile")
        store.put(("users", "bo"), "profile", {"city": "Oslo"})
        return None if found is None else found.value

    with ThreadPoolExecutor(1) as pool:
        assert pool.submit(in_a_thread).result(timeout=30) == {"city": "Rome"}

    async def in_asyncio() -> object:
        await store.aput(("users", "cy"), "profile", {"city": "Lima"})
        found = await store.aget(("users", "bo"), "profile")
        return None if found is None else found.value

    assert asyncio.run(in_asyncio()) == {"city": "Oslo"}
    assert {item.namespace for item in store.search(("users",))} == {
        ADA,
        ("users", "bo"),
        ("users", "cy"),
    }


def test_concurrent_writers_on_one_in_memory_store_lose_nothing() -> None:
    store = ProfileStore("sqlite://")
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        try:
            for i in range(20):
                store.put(("users", f"u{n}-{i}"), "profile", {"n": i})
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == [] and len(store.search(("users",), limit=1000)) == 80


def test_a_memory_with_a_ttl_keeps_its_expiry_rows_in_its_own_in_memory_database() -> None:
    clock = Clock()
    profile = ProfileMemory(url="sqlite://", namespace=ADA, policy="manual", ttl=10, clock=clock)
    other = ProfileMemory(url="sqlite://", namespace=ADA, policy="manual", ttl=10, clock=clock)
    profile.put({"city": "Rome"})
    assert other.get() == {} and other.sweep(dry_run=True) == {}
    clock.minutes(11)
    assert profile.get() == {} and profile.sweep() == {"users/ada": 1}


def test_a_collection_on_an_in_memory_ledger_writes_edits_and_sweeps(tmp_path: Path) -> None:
    clock = Clock()
    memory = CollectionMemory(
        url="sqlite://",
        mode="memory",
        collection=f"t{uuid.uuid4().hex[:10]}",  # the process's in-memory Chroma is shared
        namespace=ADA,
        embeddings=EMBEDDINGS,
        policy="manual",
        ttl=10,
        clock=clock,
    )
    kept = memory.put("Ada likes tea", ttl=None)
    gone = memory.put("Ada is in Rome")
    memory.update(kept, "Ada likes green tea")
    clock.minutes(11)
    assert memory.sweep() == {"users/ada": 1}
    assert memory.get(gone) is None
    record = memory.get(kept)
    assert record is not None and record.content == "Ada likes green tea"


def test_an_in_memory_chat_history_is_its_own_and_async_reads_it() -> None:
    from langchain_core.messages import HumanMessage

    from memories.stores.history import SQLHistory

    one, two = SQLHistory("sqlite://", session_id="s"), SQLHistory("sqlite://", session_id="s")
    one.add_messages([HumanMessage("hi")])
    assert two.messages == []
    assert [m.content for m in asyncio.run(one.aget_messages())] == ["hi"]


def test_the_langgraph_profile_adapter_sweeps_an_in_memory_store() -> None:
    from memories.integrations.langgraph_store import ProfileStoreAdapter

    clock = Clock()
    adapter = ProfileStoreAdapter(ProfileStore("sqlite://"), ttl={"default_ttl": 1}, clock=clock)
    adapter.put(ADA, "profile", {"city": "Rome"})
    clock.minutes(2)
    assert adapter.sweep_ttl() == 1 and adapter.store.get(ADA, "profile") is None
