"""Item time to live on the LangGraph store adapters: LangGraph's own TTL tests, ported.

The cases are those of LangGraph's ``libs/checkpoint-sqlite/tests/test_ttl.py``
(``omit_expired`` on every read path, expired rows kept without it, refresh
only of live rows, filtering before paging, default and per-item TTLs,
search, async, the sweeper thread), run on each adapter: profiles on SQLite
and on PostgreSQL, the vector memory on Chroma, the collection on Chroma and
SQLite. LangGraph's tests sleep; here the clock is injected and moved.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from langgraph.store.base import TTLConfig
from memories.integrations.langgraph_store import (
    CollectionStoreAdapter,
    MemoryStoreAdapter,
    ProfileStoreAdapter,
    VectorStoreAdapter,
)

from memories import CollectionMemory, InvalidInputError, VectorMemory
from memories.kernel.namespaces import in_namespace
from memories.long_term.profile import ProfileStore
from tests.retention.conftest import Clock, expired_reads, rewritten_while_swept

TTL = 5.0  # minutes


Make = Callable[..., MemoryStoreAdapter]


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture(
    params=[
        "profile-sqlite",
        "profile-ledger-apart",
        "profile-postgresql",
        "vector-chroma",
        "collection",
    ]
)
def make(request: pytest.FixtureRequest, tmp_path: Path, clock: Clock) -> Make:
    kind = request.param
    if kind == "profile-sqlite":
        url = f"sqlite:///{tmp_path / 'profiles.db'}"
        return lambda **ttl: ProfileStoreAdapter(ProfileStore(url), clock=clock, **ttl)
    if kind == "profile-ledger-apart":  # the expiry times in another database (ttl_url)
        url, ledger = (f"sqlite:///{tmp_path / name}" for name in ("profiles.db", "ledger.db"))
        return lambda **ttl: ProfileStoreAdapter(
            ProfileStore(url), clock=clock, ttl_url=ledger, **ttl
        )
    if kind == "profile-postgresql":
        database = _fresh_database(request.getfixturevalue("postgres_url"))
        return lambda **ttl: ProfileStoreAdapter(ProfileStore(database), clock=clock, **ttl)
    if kind == "vector-chroma":
        memory = VectorMemory(path=str(tmp_path / "chroma"), namespace=("template",), clock=clock)
        return lambda **ttl: VectorStoreAdapter(memory, clock=clock, **ttl)
    memory_c = CollectionMemory(
        path=str(tmp_path / "chroma"),
        url=f"sqlite:///{tmp_path / 'ledger.db'}",
        namespace=("t",),
        clock=clock,
    )
    return lambda **ttl: CollectionStoreAdapter(memory_c, text_field="data", clock=clock, **ttl)


_databases = iter(range(10**6))


def _fresh_database(server: str) -> str:
    """A new empty database on the module's server: each test starts from nothing."""
    import sqlalchemy as sa

    name = f"ttl_{next(_databases)}"
    engine = sa.create_engine(server, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as connection:
            connection.execute(sa.text(f"CREATE DATABASE {name}"))
    finally:
        engine.dispose()
    return server.rsplit("/", 1)[0] + f"/{name}"


def value(text: str) -> dict[str, Any]:
    return {"data": text}


def keys(items: list[Any]) -> list[str]:
    return sorted(i.key for i in items)


def test_omit_expired_filters_every_read_path(make: Make, clock: Clock, request: Any) -> None:
    store = make(ttl={"default_ttl": TTL, "omit_expired": True})
    top = request.node.callspec.id.replace("-", "")
    expired_ns, control_ns = (top, "expired"), (top, "control")
    store.put(expired_ns, "e", value("gone"), ttl=TTL)
    store.put(control_ns, "c", value("keep"), ttl=None)
    clock.minutes(TTL + 1)

    # Expired but still stored (unswept).
    assert store.ledger.expires_at(expired_ns, "e") is not None
    assert store.get(expired_ns, "e") is None
    assert store.get(control_ns, "c") is not None
    assert store.search(expired_ns) == []
    assert keys(store.search(control_ns)) == ["c"]
    namespaces = store.list_namespaces(prefix=(top,))
    assert expired_ns not in namespaces and control_ns in namespaces


@pytest.mark.parametrize("omit", [None, False], ids=["default", "explicit-false"])
def test_without_omit_expired_expired_items_are_read_until_swept(
    make: Make, clock: Clock, omit: bool | None
) -> None:
    config: TTLConfig = {"default_ttl": TTL}
    if omit is not None:
        config["omit_expired"] = omit
    store = make(ttl=config)
    ns = ("keep",)
    store.put(ns, "k", value("still-here"), ttl=TTL)
    clock.minutes(TTL + 1)
    assert store.get(ns, "k", refresh_ttl=False) is not None
    assert keys(store.search(ns, refresh_ttl=False)) == ["k"]
    assert ns in store.list_namespaces(prefix=("keep",))
    assert store.sweep_ttl() == 1
    assert store.get(ns, "k") is None


def test_refresh_ttl_refreshes_only_live_items(make: Make, clock: Clock) -> None:
    store = make(ttl={"default_ttl": TTL, "omit_expired": True, "refresh_on_read": True})
    ns = ("refresh",)
    store.put(ns, "expired", value("0"), ttl=TTL / 5)
    store.put(ns, "live_get", value("1"), ttl=TTL)
    store.put(ns, "live_search", value("2"), ttl=TTL)
    clock.minutes(TTL / 2)
    before = {k: store.ledger.expires_at(ns, k) for k in ("expired", "live_get", "live_search")}

    assert store.get(ns, "expired", refresh_ttl=True) is None
    assert "expired" not in keys(store.search(ns, refresh_ttl=True))
    assert store.ledger.expires_at(ns, "expired") == before["expired"]
    assert store.get(ns, "live_get", refresh_ttl=True) is not None
    assert store.ledger.expires_at(ns, "live_get") == clock.now + TTL * 60 > before["live_get"]  # type: ignore[operator]
    assert store.ledger.expires_at(ns, "live_search") == clock.now + TTL * 60


def test_expired_items_are_left_out_before_paging(make: Make, clock: Clock) -> None:
    store = make(ttl={"default_ttl": TTL, "omit_expired": True})
    ns = ("page",)
    store.put(ns, "expired", value("x"), ttl=TTL / 5)
    for key in ("a", "b", "c"):
        store.put(ns, key, value(key))
    clock.minutes(TTL / 2)
    page1, page2 = store.search(ns, limit=2, offset=0), store.search(ns, limit=2, offset=2)
    assert len(page1) == 2 and len(page2) == 1
    assert keys(page1 + page2) == ["a", "b", "c"]


def test_default_ttl_expires_and_the_sweep_deletes_from_the_store(make: Make, clock: Clock) -> None:
    store = make(ttl={"default_ttl": TTL})
    store.put(("test",), "item1", value("test"))
    assert store.get(("test",), "item1").value == value("test")  # type: ignore[union-attr]
    clock.minutes(TTL + 1)
    assert store.sweep_ttl() == 1
    assert store.get(("test",), "item1") is None
    assert make().get(("test",), "item1") is None  # gone from the store, not only hidden
    assert store.ledger.count() == 0  # no orphan expiry rows
    assert store.sweep_ttl() == 0


def test_an_item_put_again_while_the_sweep_runs_is_kept(
    make: Make, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = make(ttl={"default_ttl": TTL})
    store.put(("users", "ada"), "trip", value("Ada is in Rome"))
    store.put(("users", "ada"), "visit", value("Ada is at the dentist"))
    clock.minutes(TTL + 1)
    other = make(ttl={"default_ttl": TTL})  # another process, after the sweep read the rows
    rewritten_while_swept(
        monkeypatch, lambda: other.put(("users", "ada"), "trip", value("Ada is in Oslo"))
    )
    assert store.sweep_ttl() == 2  # both read as expired: the put came after
    monkeypatch.undo()

    assert store.get(("users", "ada"), "trip").value == value("Ada is in Oslo")  # type: ignore[union-attr]
    assert store.get(("users", "ada"), "visit") is None
    assert store.ledger.expires_at(("users", "ada"), "trip") == clock.now + TTL * 60
    clock.minutes(TTL + 1)  # its new time to live holds: it expires in its turn
    assert store.sweep_ttl() == 1 and store.get(("users", "ada"), "trip") is None
    assert store.ledger.count() == 0


def test_refresh_on_read_keeps_a_read_item_alive(make: Make, clock: Clock) -> None:
    store = make(ttl={"default_ttl": TTL, "refresh_on_read": True})
    store.put(("test",), "item1", value("test"))
    clock.minutes(TTL - 1)
    assert store.sweep_ttl() == 0
    assert store.get(("test",), "item1", refresh_ttl=True) is not None
    clock.minutes(TTL - 1)
    assert store.sweep_ttl() == 0
    assert store.get(("test",), "item1") is not None  # refresh_on_read: this read refreshes too
    clock.minutes(TTL + 1)
    assert store.sweep_ttl() == 1
    assert store.get(("test",), "item1") is None


def test_each_item_its_own_ttl(make: Make, clock: Clock) -> None:
    store = make()
    store.put(("test",), "item1", value("short"), ttl=1)
    store.put(("test",), "item2", value("long"), ttl=3)
    clock.minutes(2)
    store.sweep_ttl()
    assert store.get(("test",), "item1") is None
    assert store.get(("test",), "item2") is not None
    clock.minutes(4)
    store.sweep_ttl()
    assert store.get(("test",), "item2") is None


def test_a_put_ttl_overrides_the_default_and_none_never_expires(make: Make, clock: Clock) -> None:
    store = make(ttl={"default_ttl": 5})
    store.put(("test",), "item1", value("override"), ttl=1)
    store.put(("test",), "item2", value("default"))
    store.put(("test",), "item3", value("permanent"), ttl=None)
    clock.minutes(2)
    store.sweep_ttl()
    # Read without refreshing: a refreshing read would start item2's five minutes again.
    assert store.get(("test",), "item1", refresh_ttl=False) is None
    assert store.get(("test",), "item2", refresh_ttl=False) is not None
    assert store.get(("test",), "item3", refresh_ttl=False) is not None
    clock.minutes(4)
    store.sweep_ttl()
    assert store.get(("test",), "item2") is None
    assert store.get(("test",), "item3") is not None


def test_search_after_expiry_finds_nothing(make: Make, clock: Clock) -> None:
    store = make(ttl={"default_ttl": 1})
    store.put(("test",), "item1", value("apple"))
    store.put(("test",), "item2", value("banana"))
    assert keys(store.search(("test",), filter={"data": "apple"})) == ["item1"]
    clock.minutes(2)
    store.sweep_ttl()
    assert store.search(("test",), filter={"data": "apple"}) == []


def test_a_put_again_without_ttl_never_expires(make: Make, clock: Clock) -> None:
    store = make(ttl={"omit_expired": True})
    store.put(("test",), "item1", value("a"), ttl=1)
    store.put(("test",), "item1", value("b"), ttl=None)
    clock.minutes(2)
    assert store.sweep_ttl() == 0
    assert store.get(("test",), "item1").value == value("b")  # type: ignore[union-attr]


def test_async_ttl_basic(make: Make, clock: Clock) -> None:
    store = make(ttl={"default_ttl": 1, "omit_expired": True})

    async def scenario() -> tuple[Any, Any, int, Any]:
        await store.aput(("test",), "item1", value("test"))
        before = await store.aget(("test",), "item1")
        clock.minutes(2)
        hidden = await store.aget(("test",), "item1")
        swept = await store.asweep_ttl()
        return before, hidden, swept, await store.asearch(("test",))

    before, hidden, swept, found = asyncio.run(scenario())
    assert before is not None and hidden is None and swept == 1 and found == []


def test_the_sweeper_thread_deletes_expired_items(make: Make, clock: Clock) -> None:
    store = make(ttl={"default_ttl": 1, "sweep_interval_minutes": 1})
    store.put(("test",), "item1", value("test"))
    clock.minutes(2)
    store.start_ttl_sweeper(sweep_interval_minutes=0.001)  # every 60 ms of real time
    try:
        deadline = time.monotonic() + 30  # bounded wait for the thread, not a timing check
        while store.ledger.count() and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        assert store.stop_ttl_sweeper(timeout=30)
    assert store.get(("test",), "item1") is None


def test_a_bad_ttl_config_is_refused_by_name(tmp_path: Path) -> None:
    from memories import InvalidInputError

    with pytest.raises(InvalidInputError, match="TTLConfig"):
        ProfileStoreAdapter(ProfileStore(f"sqlite:///{tmp_path / 'p.db'}"), ttl={"ttl": 5})  # type: ignore[typeddict-unknown-key]


def test_the_memory_under_the_adapter_hides_what_expired_through_it(
    make: Make, clock: Clock
) -> None:
    store = make()  # omit_expired unset: the adapter reads expired items until swept
    if not isinstance(store, VectorStoreAdapter | CollectionStoreAdapter):
        pytest.skip("a profile store has no search of its own")
    store.put(("users", "ada"), "trip", {"data": "Ada is in Porto"}, ttl=5)
    memory = in_namespace(store.memory, ("users", "ada"))  # the application's own memory
    assert [r.id for r in memory.search("Porto")] == ["trip"]
    clock.minutes(6)
    assert memory.search("Porto") == []
    assert store.get(("users", "ada"), "trip") is not None
    assert keys(store.search(("users", "ada"), query="Porto")) == ["trip"]
    assert store.sweep_ttl() == 1
    assert store.get(("users", "ada"), "trip") is None


def test_a_put_failing_after_its_expiry_row_leaves_no_item_without_it(
    make: Make, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = make(ttl={"default_ttl": TTL})

    def crash(*args: Any) -> None:
        raise RuntimeError("crash between the expiry row and the item")

    monkeypatch.setattr(store, "_put", crash)
    with pytest.raises(RuntimeError, match="crash"):
        store.put(("t",), "k", value("x"))
    monkeypatch.undo()
    assert store.get(("t",), "k") is None  # absent, with a row the sweep drops
    assert store.ledger.count() == 1
    clock.minutes(TTL + 1)
    assert store.sweep_ttl() == 1 and store.ledger.count() == 0


@pytest.mark.parametrize("asynchronous", [False, True])
@pytest.mark.parametrize(
    "refused",
    [value("\ud800"), "kept as text"],  # a lone surrogate: no store takes it; not a dict
    ids=["lone-surrogate", "not-a-dict"],
)
def test_a_refused_put_leaves_the_items_time_to_live_as_it_was(
    make: Make, clock: Clock, asynchronous: bool, refused: Any
) -> None:
    store = make(ttl={"default_ttl": TTL})
    store.put(("t",), "forever", value("kept for good"), ttl=None)
    store.put(("t",), "hour", value("kept an hour"), ttl=60)
    clock.minutes(10)
    for key, ttl in [("forever", 1), ("hour", None), ("new", None)]:
        with pytest.raises(InvalidInputError):
            if asynchronous:
                asyncio.run(store.aput(("t",), key, refused, index=["data"], ttl=ttl))
            else:
                store.put(("t",), key, refused, index=["data"], ttl=ttl)
    expiry = {k: store.ledger.expires_at(("t",), store.ttl_mark + k) for k in ("forever", "hour")}
    assert expiry == {"forever": None, "hour": clock() + 50 * 60}
    assert store.ledger.count() == 1  # no row for the refused new item
    clock.minutes(60)
    assert store.sweep_ttl() == 1
    assert store.get(("t",), "forever").value == value("kept for good")  # type: ignore[union-attr]
    assert store.get(("t",), "hour") is None


def test_the_adapter_ttl_is_not_overwritten_by_the_memory_default(
    tmp_path: Path, clock: Clock
) -> None:
    memory = VectorMemory(path=str(tmp_path / "chroma"), namespace=("t",), clock=clock, ttl=1)
    store = VectorStoreAdapter(memory, clock=clock, ttl={"default_ttl": TTL, "omit_expired": True})
    store.put(("users", "ada"), "k", value("Ada is in Porto"))
    clock.minutes(2)
    assert store.get(("users", "ada"), "k") is not None
    clock.minutes(TTL)
    assert store.get(("users", "ada"), "k") is None


def test_omit_expired_reads_only_the_expired_rows_of_the_items_found(
    make: Make, clock: Clock, request: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = make(ttl={"default_ttl": TTL, "omit_expired": True})
    top = request.node.callspec.id.replace("-", "")
    stale, mine = (top, "stale"), (top, "mine")
    for key in ("s1", "s2", "s3", "s4"):
        store.put(stale, key, value(key), ttl=TTL)
    store.put(mine, "old", value("old"), ttl=TTL)
    clock.minutes(TTL + 1)
    store.put(stale, "s5", value("s5"), ttl=TTL)
    store.put(mine, "new", value("new"), ttl=TTL)
    reads = expired_reads(monkeypatch)
    assert keys(store.search(mine)) == ["new"]
    assert sum(reads) == 1  # its own expired item's row (before: all 5 expired rows)
    reads.clear()
    assert set(store.list_namespaces(prefix=(top,))) == {stale, mine}
    assert sum(reads) <= 5  # the rows of the items found in the two namespaces
    store.delete(stale, "s5")
    reads.clear()
    assert store.list_namespaces(prefix=(top,)) == [mine]
    assert store.search(stale) == []


@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_min_score_search_refreshes_and_hides_as_any_search(
    tmp_path: Path, clock: Clock, asynchronous: bool
) -> None:
    memory = VectorMemory(path=str(tmp_path / "chroma"), namespace=("template",), clock=clock)
    store = VectorStoreAdapter(memory, clock=clock, ttl={"default_ttl": TTL, "omit_expired": True})
    ns = ("scored",)
    store.put(ns, "expired", {"text": "black coffee"}, ttl=TTL / 5)
    store.put(ns, "live", {"text": "black coffee"}, ttl=TTL)
    clock.minutes(TTL / 2)
    search = dict(query="black coffee", min_score=0.0, refresh_ttl=True)
    found = asyncio.run(store.asearch(ns, **search)) if asynchronous else store.search(ns, **search)
    assert keys(found) == ["live"]
    assert store.ledger.expires_at(ns, "live") == clock.now + TTL * 60
