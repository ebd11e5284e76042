"""ChromaStore's two placements: small namespaces share shards, large ones get a collection.

Real embedded Chroma, persistent (in tmp_path) and in memory. Two store
objects on one folder stand for two processes: each has its own placement
cache, and Chroma's data is the same.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from chromadb.errors import ChromaError
from memories.integrations import chroma
from memories.integrations.chroma import SHARDS, ChromaStore, moves, parts

from memories.errors import BackendError, ConfigError
from tests.vector.conftest import ChromaServer

MakeStore = Callable[..., ChromaStore]
DIM = 8


@pytest.fixture(params=["persistent", "memory"])
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MakeStore]:
    """Stores on one Chroma and one collection prefix, fresh for each test."""
    prefix = f"t{uuid.uuid4().hex[:10]}"

    def make(**options: Any) -> ChromaStore:
        options.setdefault("promote_at", 8)
        return ChromaStore(
            mode=request.param, path=str(tmp_path / "chroma"), collection=prefix, **options
        )

    yield make


#: Stores of the promotion tests: they promote small namespaces by hand, which opening
#: them again would move back into their shards (see the demotion tests).
PROMOTING: dict[str, Any] = {"promote_at": 1_000, "demote_on_open": False}


def vectors(n: int, seed: int) -> list[list[float]]:
    rows = np.random.default_rng(seed).normal(size=(n, DIM))
    unit: list[list[float]] = (rows / np.linalg.norm(rows, axis=1, keepdims=True)).tolist()
    return unit


def write(store: ChromaStore, namespace: str, ids: list[str], *, seed: int = 0, **kw: Any) -> None:
    store.upsert(
        namespace,
        ids=ids,
        texts=[f"{namespace} says {i}" for i in ids],
        embeddings=vectors(len(ids), seed),
        metadatas=[{"n": int(i) if i.isdigit() else -1, "who": namespace} for i in ids],
        **kw,
    )


def same_shard_pair(store: ChromaStore) -> tuple[str, str]:
    first = "users/u0"
    for n in range(1, 200):
        if store.shard_name(f"users/u{n}") == store.shard_name(first):
            return first, f"users/u{n}"
    raise AssertionError("no two namespaces share a shard")


def snapshot(
    store: ChromaStore, namespace: str
) -> dict[str, tuple[str, dict[str, Any], list[float]]]:
    return {
        r.id: (r.text, r.metadata, np.round(r.embedding or [], 5).tolist())
        for r in store.get(namespace, embeddings=True)
    }


def in_shard(store: ChromaStore, namespace: str) -> list[str]:
    ids: list[str] = store._shard(namespace).get(where={"namespace": namespace}, include=[])["ids"]
    return ids


def test_new_namespaces_share_the_shards_instead_of_a_collection_each(
    make_store: MakeStore,
) -> None:
    store = make_store()
    for n in range(40):
        write(store, f"users/u{n}", ["1"])
    prefix = store.collection_prefix
    names = {c.name for c in store._get_client().list_collections() if c.name.startswith(prefix)}
    assert names <= {f"{prefix}-shard-{i:02d}" for i in range(SHARDS)}
    assert store.placement("users/u3") == "shard"
    assert store.namespaces() == sorted(f"users/u{n}" for n in range(40))


def test_namespaces_sharing_a_shard_never_see_each_others_records(make_store: MakeStore) -> None:
    store = make_store(promote_at=1_000)
    a, b = same_shard_pair(store)
    write(store, a, ["1", "2", "3"], seed=1)
    write(store, b, ["1", "2", "3", "4"], seed=2)  # the same ids in the same collection

    assert store.count(a) == 3 and store.count(b) == 4
    assert {r.metadata["who"] for r in store.get(a)} == {a}
    assert [r.text for r in store.get(b, ids=["1"])] == [f"{b} says 1"]
    assert {r.id for r in store.get(a, where={"n": {"$gte": 2}})} == {"2", "3"}
    for hit in store.nearest(a, vectors(4, 2)[3], n=10):  # b's own vector: a must not find it
        assert store.get(a, ids=[hit.id])[0].metadata["who"] == a
    assert len(store.nearest(a, vectors(1, 2)[0], n=10)) == 3
    assert store.vectors(b, ["1"]) != store.vectors(a, ["1"])

    store.delete(a, ids=["1"])
    assert store.count(a) == 2 and store.count(b) == 4
    store.delete(a, where={"n": 2})
    assert [r.id for r in store.get(a)] == ["3"] and store.count(b) == 4
    store.delete(a)  # no ids, no filter: everything of a, nothing of b
    assert store.count(a) == 0
    assert sorted(r.id for r in store.get(b)) == ["1", "2", "3", "4"]


def test_promotion_moves_records_embeddings_and_metadata_unchanged(make_store: MakeStore) -> None:
    store = make_store(**PROMOTING)
    a, b = same_shard_pair(store)
    write(store, a, [str(i) for i in range(12)], seed=3)
    write(store, b, ["1"], seed=4)
    query = vectors(1, 5)[0]
    before, found = snapshot(store, a), store.nearest(a, query, n=5)

    store.promote(a)

    assert store.placement(a) == "own" and in_shard(store, a) == []
    assert snapshot(store, a) == before
    assert [s.id for s in store.nearest(a, query, n=5)] == [s.id for s in found]
    own = store._get_client().get_collection(store.collection_name(a))
    assert own.count() == 12 and "memories_incomplete" not in (own.metadata or {})
    assert store.count(b) == 1 and store.placement(b) == "shard"
    store.promote(a)  # again: nothing changes
    assert snapshot(store, a) == before and store.namespaces() == sorted([a, b])


def test_a_write_past_promote_at_promotes_the_namespace(make_store: MakeStore) -> None:
    store = make_store(promote_at=8)
    for batch in range(4):
        write(store, "big", [f"{batch}-{i}" for i in range(5)], seed=batch)
        write(store, "small", [f"{batch}"], seed=batch)
    assert store.placement("big") == "own" and store.count("big") == 20
    assert in_shard(store, "big") == []
    assert store.placement("small") == "shard" and store.count("small") == 4


class Crash(Exception):
    pass


def crash_after_pages(
    monkeypatch: pytest.MonkeyPatch, pages: int, then: Callable[[], None] | None = None
) -> None:
    """Promotions copy pages of 3 documents; after ``pages`` of them run ``then``, or crash."""
    monkeypatch.setattr(moves, "_PAGE", 3)
    copy = moves.copy_page
    done = [0]

    def copy_then(self: ChromaStore, *args: Any, **kwargs: Any) -> None:
        copy(self, *args, **kwargs)
        done[0] += 1
        if done[0] == pages:
            if then is None:
                raise Crash
            then()

    monkeypatch.setattr(moves, "copy_page", copy_then)


def test_a_promotion_that_crashed_after_a_page_loses_and_duplicates_nothing(
    make_store: MakeStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = make_store(**PROMOTING)
    write(store, "n", [str(i) for i in range(10)], seed=6)
    before = snapshot(store, "n")
    crash_after_pages(monkeypatch, 1)
    with pytest.raises(Crash):
        store.promote("n")

    # Half copied and marked: readers, this store and another, keep reading the shard.
    own = store._get_client().get_collection(store.collection_name("n"))
    assert own.count() == 3 and own.metadata["memories_incomplete"]
    for reader in (store, make_store(demote_on_open=False)):
        assert reader.placement("n") == "shard"
        assert snapshot(reader, "n") == before and reader.count("n") == 10
    write(store, "n", ["new"], seed=7)  # a write meanwhile reaches both
    before = snapshot(store, "n")

    monkeypatch.undo()
    make_store(demote_on_open=False).promote("n")  # the re-run, by another "process"
    assert store.placement("n") == "own" and snapshot(store, "n") == before
    assert in_shard(store, "n") == [] and own.count() == 11


def test_a_promotion_that_crashed_before_emptying_the_shard_is_finished_by_a_rerun(
    make_store: MakeStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = make_store(**PROMOTING)
    write(store, "n", [str(i) for i in range(5)])
    before = snapshot(store, "n")
    shard = store._shard("n")
    delete = type(shard).delete

    def refuse(collection: Any, *args: Any, **kwargs: Any) -> None:
        if collection.name == shard.name:
            raise Crash
        delete(collection, *args, **kwargs)

    monkeypatch.setattr(type(shard), "delete", refuse)
    with pytest.raises(Crash):
        store.promote("n")
    monkeypatch.undo()

    other = make_store(demote_on_open=False)
    assert other.placement("n") == "own" and snapshot(other, "n") == before  # no duplicates
    assert len(in_shard(store, "n")) == 5
    other.promote("n")
    assert in_shard(store, "n") == [] and snapshot(other, "n") == before


def test_a_store_that_cached_the_shard_reads_the_namespace_once_promoted(
    make_store: MakeStore,
) -> None:
    mover, reader = make_store(**PROMOTING), make_store(**PROMOTING)
    write(mover, "n", [str(i) for i in range(6)], seed=8)
    query = vectors(1, 9)[0]
    before, found = snapshot(reader, "n"), [s.id for s in reader.nearest("n", query, n=3)]
    assert reader._resolve("n").shard  # cached

    mover.promote("n")

    assert reader._resolve("n").shard  # still cached, yet every read finds the documents
    assert reader.count("n") == 6
    assert [s.id for s in reader.nearest("n", query, n=3)] == found
    assert snapshot(reader, "n") == before
    assert [r.id for r in reader.get("n", ids=["2"])] == ["2"]
    assert not reader._resolve("n").shard


def test_writes_and_deletes_of_another_store_during_a_promotion_are_kept(
    make_store: MakeStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    mover, writer = make_store(**PROMOTING), make_store(**PROMOTING)
    write(mover, "n", [str(i) for i in range(9)], seed=10)
    assert writer._resolve("n").shard  # cached

    def meanwhile() -> None:  # after the first page: 0, 1, 2 are copied
        write(writer, "n", ["new"], seed=11)
        writer.upsert("n", ids=["1"], texts=["changed"], embeddings=vectors(1, 12), metadatas=[{}])
        writer.delete("n", ids=["0", "5"])  # one copied already, one not yet

    crash_after_pages(monkeypatch, 1, then=meanwhile)
    mover.promote("n")

    assert mover.placement("n") == "own" and in_shard(mover, "n") == []
    records = {r.id: r.text for r in mover.get("n")}
    assert sorted(records) == ["1", "2", "3", "4", "6", "7", "8", "new"]
    assert records["1"] == "changed"
    assert writer.count("n") == 8


def test_a_write_by_a_store_that_cached_the_shard_after_a_promotion_moves_to_the_collection(
    make_store: MakeStore,
) -> None:
    mover, writer = make_store(**PROMOTING), make_store(**PROMOTING)
    write(mover, "n", ["1", "2"])
    assert writer._resolve("n").shard
    mover.promote("n")

    write(writer, "n", ["3"], seed=13)

    assert in_shard(mover, "n") == [] and sorted(r.id for r in mover.get("n")) == ["1", "2", "3"]
    assert not writer._resolve("n").shard


def test_legacy_collections_of_one_namespace_read_as_before(make_store: MakeStore) -> None:
    store = make_store(demote_on_open=False)
    legacy = store._get_client().get_or_create_collection(
        store.collection_name("old"),
        metadata={"memories_namespace": "old"},
        configuration={"hnsw": {"space": "cosine"}},
        embedding_function=store._embedding_function,
    )
    legacy.add(
        ids=["1", "2"],
        documents=["one", "two"],
        embeddings=vectors(2, 14),
        metadatas=[{"namespace": "old"}, {"namespace": "old"}],
    )
    assert store.placement("old") == "own" and store.count("old") == 2
    assert [s.id for s in store.nearest("old", vectors(2, 14)[1], n=1)] == ["2"]
    write(store, "old", ["3"])
    assert legacy.count() == 3 and sorted(r.id for r in store.get("old")) == ["1", "2", "3"]
    store.delete("old", ids=["1"])
    assert legacy.count() == 2 and store.namespaces() == ["old"]


def legacy_collection(store: ChromaStore, namespace: str, n: int, *, seed: int = 20) -> Any:
    """A namespace's collection as a store made before shards left it (metadata stamped)."""
    legacy = store._get_client().get_or_create_collection(
        store.collection_name(namespace),
        metadata={"memories_namespace": namespace},
        configuration={"hnsw": {"space": "cosine"}},
        embedding_function=store._embedding_function,
    )
    legacy.add(
        ids=[str(i) for i in range(n)],
        documents=[f"{namespace} said {i}" for i in range(n)],
        embeddings=vectors(n, seed),
        metadatas=[{"namespace": namespace, "n": i} for i in range(n)],
    )
    return legacy


def collection_names(store: ChromaStore) -> set[str]:
    return {c.name for c in store._get_client().list_collections()}


def test_a_small_legacy_collection_moves_into_its_shard_unchanged(make_store: MakeStore) -> None:
    store = make_store()
    a, b = same_shard_pair(store)
    legacy_collection(store, a, 5)
    write(store, b, ["1", "2"], seed=21)
    query = vectors(1, 22)[0]
    before, found, other = snapshot(store, a), store.nearest(a, query, n=3), snapshot(store, b)
    reader = make_store()
    assert reader.placement(a) == "own"  # a store that cached the old placement

    done = store.demote(a)

    assert done.moved and done.documents == 5
    assert store.collection_name(a) not in collection_names(store)
    assert store.placement(a) == "shard" and len(in_shard(store, a)) == 5
    assert snapshot(store, a) == before and snapshot(store, b) == other
    assert [s.id for s in store.nearest(a, query, n=3)] == [s.id for s in found]
    assert snapshot(reader, a) == before and reader.count(a) == 5  # its collection is gone
    assert store.namespaces() == sorted([a, b])
    assert store.demote(a) == chroma.Demotion(a, 0, kept="in its shard already")


def test_a_legacy_collection_past_promote_at_keeps_its_collection(make_store: MakeStore) -> None:
    store = make_store(promote_at=8)
    legacy_collection(store, "big", 9)
    assert store.demote("big") == chroma.Demotion("big", 9, kept="more than 8 documents")
    assert store.placement("big") == "own" and store.count("big") == 9


def test_a_dry_run_says_what_would_move_and_writes_nothing(make_store: MakeStore) -> None:
    store = make_store(promote_at=8)
    legacy_collection(store, "small", 3)
    legacy_collection(store, "big", 9)
    names = collection_names(store)

    planned = store.reshard(dry_run=True)

    assert planned == [
        chroma.Demotion("big", 9, kept="more than 8 documents"),
        chroma.Demotion("small", 3),
    ]
    assert collection_names(store) == names and in_shard(store, "small") == []
    assert store.reshard() == planned
    assert store.placement("small") == "shard" and store.placement("big") == "own"


def around_demotion_steps(
    monkeypatch: pytest.MonkeyPatch, store: ChromaStore, step: str, then: Callable[[], None]
) -> None:
    """Demotions copy pages of 3 documents; run ``then`` at ``step`` of ``store``'s demotion:
    ``"marked"`` (before the first page), ``"page"`` (after the first page) or ``"copied"``
    (every page copied, before the collection is deleted)."""
    monkeypatch.setattr(moves, "_PAGE", 3)
    copy = moves.copy_page
    pages = [0]

    def copy_then(self: ChromaStore, *args: Any, **kwargs: Any) -> None:
        if self is store and step == "marked" and pages[0] == 0:
            then()
        copy(self, *args, **kwargs)
        pages[0] += 1
        if self is store and step == "page" and pages[0] == 1:
            then()

    monkeypatch.setattr(moves, "copy_page", copy_then)
    client = store._get_client()
    delete_collection = client.delete_collection

    def delete_then(name: str) -> None:
        if step == "copied":
            then()
        delete_collection(name)

    monkeypatch.setattr(client, "delete_collection", delete_then)


def crash() -> None:
    raise Crash


@pytest.mark.parametrize("step", ["marked", "page", "copied"])
def test_a_demotion_that_crashed_is_finished_by_a_rerun_losing_and_duplicating_nothing(
    make_store: MakeStore, monkeypatch: pytest.MonkeyPatch, step: str
) -> None:
    store = make_store()
    legacy_collection(store, "n", 7)
    before = snapshot(store, "n")
    around_demotion_steps(monkeypatch, store, step, crash)
    with pytest.raises(Crash):
        store.demote("n")
    monkeypatch.undo()

    # Marked, maybe half copied: every reader still reads the collection, whole.
    for reader in (store, make_store()):
        assert reader.placement("n") == "own" and snapshot(reader, "n") == before
    write(store, "n", ["new"], seed=7)  # a write meanwhile reaches both
    store.delete("n", ids=["0"])  # a delete too
    before = snapshot(store, "n")
    # Another store leaves a fresh mark to its owner, then takes over a stale one.
    assert "another process" in make_store().demote("n").kept
    monkeypatch.setattr(moves, "_LEAVING_SECONDS", 0.0)
    assert make_store().demote("n").moved  # the re-run, by another "process"

    assert store.placement("n") == "shard" and snapshot(store, "n") == before
    assert store.collection_name("n") not in collection_names(store)
    expected = [parts._tag("n") + i for i in ["1", "2", "3", "4", "5", "6", "new"]]
    assert sorted(in_shard(store, "n")) == sorted(expected)  # no duplicate, none lost


def test_the_store_that_crashed_mid_demotion_finishes_it_at_once(
    make_store: MakeStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = make_store()
    legacy_collection(store, "n", 7)
    before = snapshot(store, "n")
    around_demotion_steps(monkeypatch, store, "page", crash)
    with pytest.raises(Crash):
        store.demote("n")
    monkeypatch.undo()
    assert store.demote("n").moved  # its own mark: no wait
    assert store.placement("n") == "shard" and snapshot(store, "n") == before


@pytest.mark.parametrize("step", ["marked", "page", "copied"])
def test_writes_and_deletes_of_another_store_during_a_demotion_are_kept(
    make_store: MakeStore, monkeypatch: pytest.MonkeyPatch, step: str
) -> None:
    mover = make_store(promote_at=20)
    writer = make_store(promote_at=20, demote_on_open=False)
    legacy_collection(mover, "n", 9)
    assert writer.placement("n") == "own" and not writer._resolve("n").shard  # cached

    def meanwhile() -> None:
        write(writer, "n", ["new"], seed=11)
        writer.upsert("n", ids=["1"], texts=["changed"], embeddings=vectors(1, 12), metadatas=[{}])
        writer.upsert("n", ids=["7"], texts=["late"], embeddings=vectors(1, 13), metadatas=[{}])
        writer.delete("n", ids=["0", "5"])  # after the first page: one copied, one not yet
        writer.delete("n", where={"n": 8})

    around_demotion_steps(monkeypatch, mover, step, meanwhile)
    assert mover.demote("n").moved

    assert mover.placement("n") == "shard"
    assert mover.collection_name("n") not in collection_names(mover)
    records = {r.id: r.text for r in mover.get("n")}
    assert sorted(records) == ["1", "2", "3", "4", "6", "7", "new"]
    assert records["1"] == "changed" and records["7"] == "late"
    assert len(in_shard(mover, "n")) == 7  # no duplicate
    assert {r.id: r.text for r in writer.get("n")} == records  # its cached collection is gone


def test_a_delete_or_a_write_between_reading_a_page_and_copying_it_into_the_shard_is_kept(
    make_store: MakeStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    mover, other = make_store(), make_store(demote_on_open=False)
    legacy_collection(mover, "n", 4)
    assert other.placement("n") == "own"
    shard_name = mover.shard_name("n")
    collection = type(mover._shard("n"))
    add = collection.add

    def add_after_a_delete(self: Any, *args: Any, **kwargs: Any) -> None:
        if self.name == shard_name and parts._tag("n") + "2" in kwargs["ids"]:
            other.delete("n", ids=["2"])  # the page in hand still holds 2 and the old 3
            other.upsert("n", ids=["3"], texts=["new"], embeddings=vectors(1, 16), metadatas=[{}])
        add(self, *args, **kwargs)

    monkeypatch.setattr(collection, "add", add_after_a_delete)
    assert mover.demote("n").moved

    assert mover.placement("n") == "shard"
    assert sorted(r.id for r in mover.get("n")) == ["0", "1", "3"]
    assert [r.text for r in mover.get("n", ids=["3"])] == ["new"]
    assert len(in_shard(mover, "n")) == 3


def test_a_write_racing_the_collections_deletion_reaches_the_shard(
    make_store: MakeStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    mover = make_store()
    early, late = make_store(demote_on_open=False), make_store(demote_on_open=False)
    legacy_collection(mover, "n", 3)
    for store in (early, late):
        assert not store._resolve("n").shard  # both cached the collection

    def just_before_the_deletion() -> None:
        write(early, "n", ["early"], seed=17)  # lands in the collection, then in the shard

    around_demotion_steps(monkeypatch, mover, "copied", just_before_the_deletion)
    assert mover.demote("n").moved
    write(late, "n", ["late"], seed=18)  # its collection is gone: it looks again
    late.delete("n", ids=["0"])

    assert sorted(r.id for r in mover.get("n")) == ["1", "2", "early", "late"]
    assert len(in_shard(mover, "n")) == 4 and late._resolve("n").shard


def test_two_stores_demoting_one_namespace_at_once_leave_one_copy(
    make_store: MakeStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = make_store(), make_store()
    legacy_collection(first, "n", 7)
    before = snapshot(first, "n")
    kept: list[chroma.Demotion] = []
    around_demotion_steps(monkeypatch, first, "page", lambda: kept.append(second.demote("n")))

    assert first.demote("n").moved
    assert kept and "another process" in kept[0].kept  # the second left it to the first
    assert second.placement("n") == "shard" and snapshot(second, "n") == before
    assert len(in_shard(first, "n")) == 7


def test_a_legacy_collection_of_another_width_than_its_shard_stays(
    make_store: MakeStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = make_store()
    a, b = same_shard_pair(store)
    write(store, b, ["1"])  # the shard holds 8-wide vectors
    wide = store._get_client().get_or_create_collection(
        store.collection_name(a),
        metadata={"memories_namespace": a},
        configuration={"hnsw": {"space": "cosine"}},
        embedding_function=store._embedding_function,
    )
    wide.add(ids=["1"], documents=["x"], embeddings=[[1.0] * 4], metadatas=[{"namespace": a}])
    assert store.demote(a) == chroma.Demotion(a, 1, kept="embeddings of another width")
    assert store.placement(a) == "own" and store.count(a) == 1

    opener = make_store()
    checks = [0]
    check = moves.other_shard_width

    def counted(self: ChromaStore, *args: Any) -> bool:
        checks[0] += 1
        return check(self, *args)

    monkeypatch.setattr(moves, "other_shard_width", counted)
    assert opener.placement(a) == "own" and opener.placement(a) == "own"
    assert checks == [1]  # a first look finds it stays; later looks do not ask again


@pytest.mark.parametrize("bad", [0, -5, 2.5, "100", True])
def test_promote_at_must_be_a_positive_whole_number(bad: Any) -> None:
    with pytest.raises(ConfigError, match=f"promote_at .*got {bad!r}"):
        ChromaStore(mode="memory", promote_at=bad)


def test_a_delete_or_a_write_between_reading_a_page_and_copying_it_is_kept(
    make_store: MakeStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    mover, deleter = make_store(**PROMOTING), make_store(**PROMOTING)
    write(mover, "n", [str(i) for i in range(4)], seed=15)
    own_name = mover.collection_name("n")
    collection = type(mover._shard("n"))
    add = collection.add

    def add_after_a_delete(self: Any, *args: Any, **kwargs: Any) -> None:
        if self.name == own_name and "2" in kwargs["ids"]:
            deleter.delete("n", ids=["2"])  # the page in hand still holds 2 and the old 3
            deleter.upsert("n", ids=["3"], texts=["new"], embeddings=vectors(1, 16), metadatas=[{}])
        add(self, *args, **kwargs)

    monkeypatch.setattr(collection, "add", add_after_a_delete)
    mover.promote("n")

    assert mover.placement("n") == "own"
    assert sorted(r.id for r in mover.get("n")) == ["0", "1", "3"]
    assert [r.text for r in mover.get("n", ids=["3"])] == ["new"]


def test_namespaces_of_another_embedding_width_than_their_shard_get_a_collection(
    make_store: MakeStore,
) -> None:
    store = make_store(promote_at=1_000)
    a, b = same_shard_pair(store)
    write(store, a, ["1", "2"])  # DIM wide
    assert store.nearest(b, [1.0, 0.0, 0.0], n=3) == []
    store.upsert(b, ids=["1"], texts=["wide"], embeddings=[[1.0, 0.0, 0.0]], metadatas=[{}])

    assert store.placement(a) == "shard" and store.placement(b) == "own"
    assert [s.id for s in store.nearest(b, [1.0, 0.0, 0.0], n=3)] == ["1"]
    assert store.count(a) == 2 and store.namespaces() == sorted([a, b])
    with pytest.raises(BackendError, match="another width"):  # a itself changed models
        store.upsert(a, ids=["3"], texts=["x"], embeddings=[[1.0, 0.0, 0.0]], metadatas=[{}])


def test_chroma_can_rebuild_our_embedding_function_from_a_collection_configuration() -> None:
    """A client reading a collection's configuration (a server sends it) rebuilds ours by name.

    Unregistered, Chroma printed "Could not reconstruct embedding function
    memories-langchain" on stderr in every worker of benchmarks/scale_out.py.
    """
    from chromadb.utils.embedding_functions import known_embedding_functions
    from memories.integrations.chroma import LangChainEmbeddingFunction

    ours = LangChainEmbeddingFunction(spec="tests.vector.conftest:WordEmbeddings")
    rebuilt = known_embedding_functions[ours.name()].build_from_config(ours.get_config())
    assert isinstance(rebuilt, LangChainEmbeddingFunction)
    assert rebuilt.get_config() == ours.get_config()


# -- demotion on first look: stores written before shards ----------------------------


def test_a_store_written_before_shards_moves_a_small_namespace_into_its_shard_on_first_look(
    make_store: MakeStore, caplog: pytest.LogCaptureFixture
) -> None:
    old = make_store(promote_at=8, demote_on_open=False)  # reads the layout as it was
    a, b = same_shard_pair(old)
    legacy_collection(old, a, 4, seed=30)
    legacy_collection(old, b, 4, seed=31)  # the same ids, in the same shard once moved
    legacy_collection(old, "big", 5, seed=32)  # past promote_at // 2: worth its collection
    query = vectors(1, 33)[0]
    before = {n: snapshot(old, n) for n in (a, b, "big")}
    found = {n: [(s.id, round(s.score, 5)) for s in old.nearest(n, query, n=3)] for n in (a, b)}

    new = make_store(promote_at=8)
    with caplog.at_level("INFO", logger=chroma.__name__):
        assert snapshot(new, a) == before[a]

    assert new.placement(a) == "shard" and new.collection_name(a) not in collection_names(new)
    assert [r.message for r in caplog.records if "Moved namespace" in r.message] == [
        f"Moved namespace {a!r} of the {new.location} (4 documents) from its own collection "
        f"into {new.shard_name(a)} in {caplog.records[-1].args[-1]:.2f} s."  # type: ignore[index]
    ]
    for n in (a, b):
        assert [(s.id, round(s.score, 5)) for s in new.nearest(n, query, n=3)] == found[n]
        assert snapshot(new, n) == before[n] and new.count(n) == 4
        assert {r.metadata["namespace"] for r in new.get(n)} == {n}  # never the other's
    assert len(in_shard(new, a)) == 4 and len(in_shard(new, b)) == 4
    assert new.placement("big") == "own" and snapshot(new, "big") == before["big"]
    assert new.namespaces() == sorted([a, b, "big"])


def test_a_namespace_promoted_past_promote_at_is_not_moved_back_on_opening(
    make_store: MakeStore,
) -> None:
    store = make_store(promote_at=8)
    write(store, "n", [str(i) for i in range(9)])
    assert store.placement("n") == "own"
    store.delete("n", ids=["0", "1", "2", "3"])  # 5 left: over promote_at // 2
    assert make_store(promote_at=8).placement("n") == "own"
    store.delete("n", ids=["4"])  # 4 left
    assert make_store(promote_at=8).placement("n") == "shard" and store.count("n") == 4


@pytest.mark.parametrize("bad", [0, None, "yes"])
def test_demote_on_open_must_be_true_or_false(bad: Any) -> None:
    with pytest.raises(ConfigError, match=f"demote_on_open must be True or False; got {bad!r}"):
        ChromaStore(mode="memory", demote_on_open=bad)


def test_stores_opening_one_old_namespace_at_once_move_it_once(make_store: MakeStore) -> None:
    legacy_collection(make_store(), "n", 4)
    stores = [make_store() for _ in range(4)]
    barrier = threading.Barrier(len(stores))

    def open_and_read(store: ChromaStore) -> list[str]:
        barrier.wait()
        return sorted(r.id for r in store.get("n"))

    with ThreadPoolExecutor(len(stores)) as pool:
        seen = list(pool.map(open_and_read, stores))

    assert seen == [[str(i) for i in range(4)]] * len(stores)
    assert stores[0].placement("n") == "shard" and len(in_shard(stores[0], "n")) == 4
    assert stores[0].collection_name("n") not in collection_names(stores[0])


_OPEN_WRITE_AND_READ = """
import sys
from memories.integrations.chroma import ChromaStore

port, prefix, who = int(sys.argv[1]), sys.argv[2], sys.argv[3]
store = ChromaStore(mode="http", host="127.0.0.1", port=port, collection=prefix)
store.upsert("n", ids=[who], texts=[who], embeddings=[[1.0] + [0.0] * 7], metadatas=[{}])
store.delete("n", ids=["d" + who])
print(",".join(sorted(r.id for r in store.get("n"))))
"""


def test_processes_opening_one_old_namespace_on_a_server_at_once_lose_nothing(
    chroma_server: ChromaServer,
) -> None:
    prefix = f"t{uuid.uuid4().hex[:10]}"
    store = ChromaStore(mode="http", host="127.0.0.1", port=chroma_server.port, collection=prefix)
    store.demote_on_open = False
    legacy = legacy_collection(store, "n", 4)
    who = [f"p{i}" for i in range(4)]
    legacy.add(ids=["d" + w for w in who], embeddings=vectors(4, 40), documents=who)

    command = [sys.executable, "-c", _OPEN_WRITE_AND_READ, str(chroma_server.port), prefix]
    pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True}
    processes = [subprocess.Popen([*command, w], **pipes) for w in who]
    ended = [p.communicate(timeout=120) for p in processes]
    outputs = [out for out, _ in ended]

    assert [p.returncode for p in processes] == [0] * len(who), [err for _, err in ended]
    for w, out in zip(who, outputs, strict=True):
        seen = out.strip().split(",")
        assert "d" + w not in seen and w in seen  # its own delete and write, at least
    fresh = ChromaStore(mode="http", host="127.0.0.1", port=chroma_server.port, collection=prefix)
    fresh.demote_on_open = False  # the processes moved it
    assert sorted(r.id for r in fresh.get("n")) == sorted(["0", "1", "2", "3", *who])
    assert fresh.placement("n") == "shard" and len(in_shard(fresh, "n")) == 8
    assert fresh.collection_name("n") not in collection_names(fresh)


def test_a_vector_memory_on_a_store_written_before_shards_finds_the_same_after_the_move(
    tmp_path: Path,
) -> None:
    from memories import VectorMemory

    options: dict[str, Any] = {
        "path": str(tmp_path / "chroma"),
        "namespace": "maya",
        "embeddings": "tests.vector.conftest:WordEmbeddings",
        "write": "sync",
    }
    old = VectorMemory(**options)
    old.store.demote_on_open = False  # the version before shards
    for question, answer in [
        ("My sister lives in Porto.", "Nice."),
        ("I like jazz and the cello.", "Cool."),
        ("We moved to Bergen last year.", "Oh."),
    ]:
        old.save_context({"input": question}, {"output": answer})
    [key] = old.store.namespaces()
    old.store.promote(key)  # a collection of its own, as every namespace had before shards
    assert old.store.placement(key) == "own"
    question = "Where does my sister live?"
    before = [(d.text, d.metadata) for d in old.search(question, k=3)]
    old.close()

    new = VectorMemory(**options)
    assert [(d.text, d.metadata) for d in new.search(question, k=3)] == before
    assert new.store.placement(key) == "shard" and len(in_shard(new.store, key)) == 3
    assert new.store.collection_name(key) not in collection_names(new.store)
    new.save_context({"input": "My brother lives in Lyon."}, {"output": "Fine."})
    assert "Lyon" in new.search("Where does my brother live?", k=1)[0].text
    new.close()


def test_a_move_on_first_look_that_fails_is_logged_and_the_namespace_still_reads(
    make_store: MakeStore, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    legacy_collection(make_store(), "n", 3)
    before = snapshot(make_store(demote_on_open=False), "n")
    store = make_store()

    def fail(*args: Any, **kwargs: Any) -> None:
        raise ChromaError("the disk is full")

    monkeypatch.setattr(moves, "copy_page", fail)
    with caplog.at_level("WARNING", logger=chroma.__name__):
        assert snapshot(store, "n") == before  # read from its collection
    assert "Could not move namespace 'n'" in caplog.text and "the disk is full" in caplog.text
    write(store, "n", ["new"], seed=41)  # marked: reaches the shard too

    monkeypatch.undo()
    assert store.placement("n") == "shard"  # a later look moves it (its own mark: no wait)
    assert sorted(r.id for r in store.get("n")) == ["0", "1", "2", "new"]
    assert len(in_shard(store, "n")) == 4
