from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from memories.errors import ConfigError
from memories.stores.documents import BaseProfileStore, Op, ProfileStore
from tests.profile.fakes import DictProfileStore

NS = ("user-1", "profiles")


@pytest.fixture(params=["sql", "dict"])
def store(request: pytest.FixtureRequest, url: str) -> BaseProfileStore:
    """The SQL store, and a backend that implements only batch (so the base derives the rest)."""
    return ProfileStore(url) if request.param == "sql" else DictProfileStore()


def test_put_then_get_returns_the_document_with_its_version(store: BaseProfileStore) -> None:
    assert store.get(NS, "p") is None
    first = store.put(NS, "p", {"name": "Ada"})
    second = store.put(NS, "p", {"name": "Ada", "age": 36})
    assert (first.version, second.version) == (1, 2)
    item = store.get(NS, "p")
    assert item is not None and item.value == {"name": "Ada", "age": 36}
    assert item.namespace == NS and item.key == "p"
    assert item.created_at == first.created_at <= item.updated_at


def test_every_put_is_recorded_with_its_patch(store: BaseProfileStore) -> None:
    store.put(NS, "p", {"name": "Ada"})
    store.put(NS, "p", {"name": "Ada", "age": 36})
    changes = store.changes(NS, "p")
    assert [(c.version, c.kind) for c in changes] == [(1, "put"), (2, "put")]
    assert changes[1].patch == ({"op": "add", "path": "/age", "value": 36},)
    assert changes[1].document == {"name": "Ada", "age": 36}


def test_commit_writes_only_at_the_expected_version(store: BaseProfileStore) -> None:
    assert store.commit(NS, "p", {"a": 1}, expected_version=0, kind="update", patch=[])
    assert store.commit(NS, "p", {"a": 2}, expected_version=0, kind="update", patch=[]) is None
    assert store.commit(NS, "p", {"a": 2}, expected_version=5, kind="update", patch=[]) is None
    written = store.commit(NS, "p", {"a": 2}, expected_version=1, kind="update", patch=[])
    assert written is not None and written.version == 2 and written.value == {"a": 2}
    assert [c.version for c in store.changes(NS, "p")] == [1, 2]


def test_commit_drops_exactly_the_pending_turns_it_folded_in(store: BaseProfileStore) -> None:
    turn = [HumanMessage("hi"), AIMessage("hello")]
    ids = [store.add_pending(NS, "p", turn) for _ in range(3)]
    pending = store.pending(NS, "p")
    assert [t.id for t in pending] == ids and pending[0].messages == tuple(turn)
    # A turn with a smaller id that the update did not see must stay queued.
    folded = [pending[0], pending[2]]
    store.commit(NS, "p", {"a": 1}, expected_version=0, kind="update", patch=[], turns=folded)
    assert [t.id for t in store.pending(NS, "p")] == [ids[1]]
    assert store.changes(NS, "p")[0].turns == (tuple(turn), tuple(turn))
    store.drop_pending(NS, "p", [ids[1]])
    assert store.count_pending(NS, "p") == 0


def test_a_cleared_profile_is_hidden_from_get_but_keeps_its_version(
    store: BaseProfileStore,
) -> None:
    store.put(NS, "p", {"a": 1})
    store.commit(NS, "p", None, expected_version=1, kind="clear", patch=[])
    assert store.get(NS, "p") is None
    loaded = store.load(NS, "p")
    assert loaded is not None and loaded.value is None and loaded.version == 2
    assert store.search(NS) == []


def test_failures_are_recorded_without_a_version(store: BaseProfileStore) -> None:
    store.record_failure(NS, "p", error="bad", raw=["prose"])
    store.put(NS, "p", {"a": 1})
    (failure,) = store.changes(NS, "p", failed=True)
    assert (failure.version, failure.kind, failure.error, failure.raw) == (
        None,
        "failed",
        "bad",
        ("prose",),
    )
    assert not failure.ok
    assert [c.kind for c in store.changes(NS, "p", failed=False)] == ["put"]
    assert [c.kind for c in store.changes(NS, "p", last=1)] == ["put"]


def test_namespaces_isolate_profiles(store: BaseProfileStore) -> None:
    store.put(("user-1",), "p", {"who": 1})
    store.put(("user-2",), "p", {"who": 2})
    store.add_pending(("user-1",), "p", [HumanMessage("x")])
    assert store.get(("user-2",), "p").value == {"who": 2}  # type: ignore[union-attr]
    assert store.count_pending(("user-2",), "p") == 0
    store.delete(("user-1",), "p")
    assert store.get(("user-1",), "p") is None and store.changes(("user-1",), "p") == []
    assert store.count_pending(("user-1",), "p") == 0
    assert store.get(("user-2",), "p") is not None


def test_search_and_list_namespaces_follow_the_prefix(store: BaseProfileStore) -> None:
    store.put(("a", "x"), "p", {})
    store.put(("a", "y"), "p", {})
    store.put(("a_b",), "p", {})  # '_' must not act as a LIKE wildcard
    store.put(("ab",), "p", {})
    assert [i.namespace for i in store.search(("a",))] == [("a", "x"), ("a", "y")]
    assert store.list_namespaces(prefix=("a",)) == [("a", "x"), ("a", "y")]
    assert store.list_namespaces(max_depth=1) == [("a",), ("a_b",), ("ab",)]
    assert len(store.search(())) == 4


def test_key_namespaces_list_every_namespace_a_key_prefix_touched(
    store: BaseProfileStore,
) -> None:
    store.put(("u", "a"), "memory:1", {"content": "x"})
    store.put(("u", "a"), "memory:2", {"content": "y"})
    store.put(("u", "b"), "other", {})
    store.record_failure(("u", "c_"), "memory:1", error="bad reply")
    store.add_pending(("v",), "memory:queue", [HumanMessage("later")])
    page, total = store.key_namespaces("memory:")
    assert total == 3
    assert [(c.namespace, c.documents) for c in page] == [
        (("u", "a"), 2),
        (("u", "c_"), 0),
        (("v",), 0),
    ]
    assert store.key_namespaces("memory:", contains="c_")[1] == 1  # '_' is no wildcard
    page, total = store.key_namespaces("memory:", limit=1, offset=1)
    assert ([c.namespace for c in page], total) == ([("u", "c_")], 3)


def test_key_page_gives_a_page_by_key_and_filters_by_text(
    store: BaseProfileStore,
) -> None:
    for n in range(5):
        store.put(NS, f"memory:{n}", {"content": f"fact {n}%"})
    store.put(("elsewhere",), "memory:9", {"content": "fact 9"})
    page, total = store.key_page(NS, "memory:", limit=2)
    assert ([i.key for i in page], total) == (["memory:0", "memory:1"], 5)
    page, total = store.key_page(NS, "memory:", limit=2, offset=4)
    assert ([i.key for i in page], total) == (["memory:4"], 5)
    page, total = store.key_page(NS, "memory:", contains="2%")
    assert ([i.key for i in page], total) == (["memory:2"], 1)
    assert store.key_page(NS, "memory:", contains="%")[1] == 5


@pytest.mark.parametrize("crowd", [0, 120], ids=["mostly-this-namespace", "a-small-share"])
def test_key_page_filter_finds_exactly_the_keys_and_texts_that_hold_it(
    store: BaseProfileStore, crowd: int
) -> None:
    # A namespace that is a small share of the table is read through the key index;
    # one that is most of it, in the table's order: both find the same documents.
    texts = {
        "memory:a": 'She said "50% off" at 9_30',
        "memory:b": "a path C:\\temp\\x and O'Brien",
        "memory:c": "LISBON in capitals",
        "memory:d": "plain fact",
        "memory:e": "5 off, 9x30, C:temp",
    }
    for key, text in texts.items():
        store.put(NS, key, {"content": text, "metadata": {"source": "lisbon notes"}})
    store.put(NS, "memory:f", {"content": {"nested": "Lisbon too"}})
    store.put(NS, "other:g", {"content": "lisbon under another prefix"})
    store.put(("user-2", "profiles"), "memory:a", {"content": "lisbon, 50% off, C:\\temp"})
    for n in range(crowd):
        store.put(("user-3",), f"memory:{n}", {"content": f"Lisbon {n}"})

    def keys(text: str) -> list[str]:
        page, total = store.key_page(NS, "memory:", contains=text)
        assert total == len(page)
        return [item.key for item in page]

    assert keys("lisbon") == ["memory:c", "memory:f"]  # any case; not metadata, not elsewhere
    assert keys("50% off") == ["memory:a"]  # '%' is no wildcard
    assert keys("9_30") == ["memory:a"]  # nor is '_'
    assert keys('"50%') == ["memory:a"]  # a quote, as JSON escapes it
    assert keys("c:\\temp") == ["memory:b"]  # a backslash, likewise
    assert keys("O'Brien") == ["memory:b"]
    assert keys("content") == keys("metadata") == keys("source") == keys('", "') == []
    assert keys("E") == ["memory:a", "memory:b", "memory:e", "memory:f"]  # key "e", "nested"
    page, total = store.key_page(NS, "memory:", contains="a", limit=2, offset=2)
    assert ([item.key for item in page], total) == (["memory:c", "memory:d"], 4)
    assert store.key_page(NS, "memory:", contains="a", limit=2, offset=6) == ([], 4)
    assert store.key_page(NS, "memory:", contains="lisbon", limit=0)[1] == 2


def test_the_store_survives_a_restart(url: str) -> None:
    ProfileStore(url).put(NS, "p", {"a": 1})
    ProfileStore(url).add_pending(NS, "p", [HumanMessage("later")])
    reopened = ProfileStore(url)
    assert reopened.get(NS, "p").value == {"a": 1}  # type: ignore[union-attr]
    assert reopened.count_pending(NS, "p") == 1


@pytest.mark.parametrize("namespace", [(), ("a.b",), ("",), (1,), None])
def test_bad_namespaces_are_config_errors(store: BaseProfileStore, namespace: object) -> None:
    with pytest.raises(ConfigError, match="amespace"):
        store.get(namespace, "p")  # type: ignore[arg-type]


def test_a_bad_url_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="not a usable SQLAlchemy database URL"):
        ProfileStore("not a url")


async def test_async_twins_do_the_same_work(store: BaseProfileStore) -> None:
    await store.aput(NS, "p", {"a": 1})
    await store.aadd_pending(NS, "p", [HumanMessage("x")])
    pending = await store.apending(NS, "p")
    written = await store.acommit(
        NS,
        "p",
        {"a": 2},
        expected_version=1,
        kind="update",
        patch=[],
        turns=pending,
    )
    assert written is not None and written.version == 2
    assert (await store.aget(NS, "p")).value == {"a": 2}  # type: ignore[union-attr]
    assert await store.acount_pending(NS, "p") == 0
    assert [c.kind for c in await store.achanges(NS, "p")] == ["put", "update"]
    assert await store.alist_namespaces() == [NS]
    assert len(await store.asearch(NS)) == 1
    await store.adelete(NS, "p")
    assert await store.aload(NS, "p") is None


def test_each_async_twin_takes_the_arguments_its_sync_method_takes() -> None:
    for name in ["search", "list_namespaces", "commit", "changes", "commit_many", "record_failure"]:
        sync, twin = getattr(ProfileStore, name), getattr(ProfileStore, f"a{name}")
        assert inspect.signature(twin).parameters == inspect.signature(sync).parameters, name


async def test_async_methods_go_through_abatch_so_a_native_async_backend_serves_them() -> None:
    performed: list[str] = []

    class NativeAsync(DictProfileStore):
        async def abatch(self, ops: Sequence[Op], /) -> list[Any]:
            performed.extend(type(op).__name__ for op in ops)
            return self.batch(ops)

    store = NativeAsync()
    await store.aput(NS, "p", {"a": 1})
    assert (await store.aget(NS, "p")).value == {"a": 1}  # type: ignore[union-attr]
    await store.arecord_failure(NS, "p", error="bad")
    assert [c.kind for c in await store.achanges(NS, "p")] == ["put", "failed"]
    assert performed == ["Load", "Commit", "Load", "RecordFailure", "Changes"]


def test_a_backend_must_implement_batch() -> None:
    with pytest.raises(TypeError, match="batch"):
        BaseProfileStore()  # type: ignore[abstract]


def test_a_sqlite_file_deleted_under_the_store_fails_with_one_clear_error(tmp_path: Any) -> None:
    from memories.errors import BackendUnavailableError

    path = tmp_path / "profiles.db"
    store = ProfileStore(f"sqlite:///{path}")
    store.put(NS, "p", {"name": "Ada"})
    path.unlink()
    with pytest.raises(BackendUnavailableError, match="is gone"):
        store.put(NS, "p", {"name": "Grace"})
    with pytest.raises(BackendUnavailableError, match="is gone"):
        store.get(NS, "p")


def test_a_text_search_of_a_page_reads_only_the_stores_own_documents(url: str) -> None:
    mine, theirs = ProfileStore(url, owner="collection"), ProfileStore(url, owner="entity_graph")
    mine.put(NS, "memory:1", {"content": "tea in Lisbon"})
    theirs.put(NS, "memory:2", {"content": "coffee in Lisbon"})
    # The namespace is the whole table: SQLite's page reads the table in its own order.
    for contains, found in (("lisbon", ["memory:1"]), ("2", [])):
        page, total = mine.key_page(NS, "memory:", contains=contains, limit=10)
        assert ([item.key for item in page], total) == (found, len(found))
