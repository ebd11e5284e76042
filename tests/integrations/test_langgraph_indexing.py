"""LangGraph's indexing on the store adapters: index configs, per-put fields, scores.

LangGraph's own SQLite suites (``test_langgraph_sqlite_suite.py``) check the
behaviour LangGraph's stores share; these check what is ours: the checks of
an index configuration, an item's texts kept in step with its value, list
namespaces, and the collection's refusal of an unindexed item.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from memories.integrations.langgraph_store import CollectionStoreAdapter, VectorStoreAdapter

from memories import CollectionMemory, InvalidInputError, VectorMemory
from memories.kernel.embeddings import cosine
from tests.integrations.test_langgraph_sqlite_suite import CharacterEmbeddings


def vector_store(tmp_path: Path, **options: object) -> VectorStoreAdapter:
    memory = VectorMemory(path=str(tmp_path / "chroma"), write="sync")
    return VectorStoreAdapter(memory, **options)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("index", "named"),
    [
        ({"dims": 0}, "dims"),
        ({"dims": True}, "dims"),
        ({"fields": "title", "distance_type": "l2"}, "distance_type"),
        ({"fields": [""]}, "fields"),
        ({"feilds": ["title"]}, "feilds"),
    ],
)
def test_a_bad_index_config_is_refused_naming_what_is_wrong(
    tmp_path: Path, index: dict[str, object], named: str
) -> None:
    with pytest.raises(InvalidInputError, match=named):
        vector_store(tmp_path, index=index)


def test_an_unknown_score_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="'calibrated', 'cosine'"):
        vector_store(tmp_path, score="dot")


def test_a_cosine_floor_may_be_negative_and_a_calibrated_one_may_not(tmp_path: Path) -> None:
    embeddings = CharacterEmbeddings(dims=64)
    index = {"embed": embeddings, "dims": 64, "fields": ["a"]}
    cosines = vector_store(tmp_path, index=index, score="cosine", min_score=-0.5)
    cosines.put(("n",), "k", {"a": "xxx"})
    assert [i.key for i in cosines.search(("n",), query="qqq", min_score=-1.0)] == ["k"]
    with pytest.raises(InvalidInputError, match=r"from -1 to 1 \(a cosine similarity\), got -1.5"):
        cosines.search(("n",), query="qqq", min_score=-1.5)
    with pytest.raises(InvalidInputError, match=r"from 0 to 1 \(a calibrated score\), got -0.5"):
        vector_store(tmp_path / "calibrated", min_score=-0.5)


def test_a_put_again_drops_the_texts_its_old_value_had(tmp_path: Path) -> None:
    embeddings = CharacterEmbeddings(dims=64)
    index = {"embed": embeddings, "dims": 64, "fields": ["a", "b", "c"]}
    store = vector_store(tmp_path, index=index, score="cosine")
    store.put(("n",), "k", {"a": "xxx", "b": "yyy", "c": "zzz"})
    store.put(("n",), "k", {"a": "qqq"})
    (item,) = store.search(("n",), query="zzz")
    assert item.score == pytest.approx(
        cosine(embeddings.embed_query("zzz"), embeddings.embed_query("qqq")), abs=1e-3
    )
    assert [r.id for r in store.memory.store.get("n")] == ["k"]
    store.delete(("n",), "k")
    assert store.memory.store.get("n") == []


def test_an_unindexed_item_comes_after_the_ranked_ones_without_a_score(tmp_path: Path) -> None:
    store = vector_store(tmp_path)
    store.put(("n",), "tea", {"text": "Maya drinks green tea"})
    store.put(("n",), "note", {"text": "Maya drinks green tea"}, index=False)
    found = store.search(("n",), query="what does Maya drink?")
    assert [(i.key, i.score is None) for i in found] == [("tea", False), ("note", True)]
    assert store.get(("n",), "note") is not None


@pytest.mark.parametrize("make", ["vector", "collection"])
def test_a_namespace_may_be_a_list(tmp_path: Path, make: str) -> None:
    store = (
        vector_store(tmp_path) if make == "vector" else CollectionStoreAdapter(collection(tmp_path))
    )
    store.put(["users", "maya"], "drink", {"text": "Maya drinks black coffee"})  # type: ignore[arg-type]
    assert [i.key for i in store.search(["users"])] == ["drink"]  # type: ignore[arg-type]
    assert store.get(["users", "maya"], "drink") is not None  # type: ignore[arg-type]


def collection(tmp_path: Path) -> CollectionMemory:
    return CollectionMemory(
        path=str(tmp_path / "chroma"), url=f"sqlite:///{tmp_path / 'ledger.db'}", policy="manual"
    )


def test_the_collection_makes_a_memory_of_the_fields_a_put_names(tmp_path: Path) -> None:
    store = CollectionStoreAdapter(collection(tmp_path))
    value = {"title": "Coffee", "body": {"text": "Maya drinks black coffee"}, "n": 1}
    store.put(("users",), "drink", value, index=["title", "body.text"])
    (record,) = store._memory(("users",)).list()
    assert record.content == "Coffee\nMaya drinks black coffee"
    assert store.get(("users",), "drink").value == value  # type: ignore[union-attr]
    with pytest.raises(InvalidInputError, match="no text in those fields"):
        store.put(("users",), "none", value, index=["missing"])


def test_the_collection_refuses_an_unindexed_item(tmp_path: Path) -> None:
    store = CollectionStoreAdapter(collection(tmp_path))
    with pytest.raises(NotImplementedError, match="CollectionStoreAdapter indexes every memory"):
        store.put(("users",), "note", {"content": "x"}, index=False)
    assert store.search(("users",)) == []


def test_the_collection_gives_langgraphs_cosine_score_when_asked(tmp_path: Path) -> None:
    embeddings = CharacterEmbeddings(dims=64)
    memory = CollectionMemory(
        path=str(tmp_path / "chroma"),
        url=f"sqlite:///{tmp_path / 'ledger.db'}",
        policy="manual",
        embeddings=embeddings,
    )
    store = CollectionStoreAdapter(memory, score="cosine")
    store.put(("users",), "tea", {"content": "aaa bbb"})
    store.put(("users",), "sea", {"content": "zzz yyy"})
    found = store.search(("users",), query="aab")
    assert [i.key for i in found] == ["tea", "sea"]
    for item, text in zip(found, ["aaa bbb", "zzz yyy"], strict=True):
        expected = cosine(embeddings.embed_query("aab"), embeddings.embed_query(text))
        assert item.score == pytest.approx(expected, abs=1e-3)
