"""LangGraph store adapters, checked against LangGraph's own InMemoryStore behaviour."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from langgraph.store.base import BaseStore, ListNamespacesOp, MatchCondition, PutOp
from langgraph.store.memory import InMemoryStore
from memories.integrations.langgraph_store import (
    CollectionStoreAdapter,
    ProfileStoreAdapter,
    VectorStoreAdapter,
    matches_filter,
    select_namespaces,
)

from memories import (
    CollectionMemory,
    InvalidInputError,
    InvalidProfileError,
    ProfileMemory,
    VectorMemory,
)
from memories.long_term.profile import ProfileStore
from tests.integrations.store_contract import StoreContract, WordEmbeddings


class TestLangGraphInMemoryStore(StoreContract):
    """The reference: each check states what LangGraph's own store does."""

    @pytest.fixture
    def store(self) -> BaseStore:
        return InMemoryStore(index={"dims": WordEmbeddings.size, "embed": WordEmbeddings()})


class TestProfileStoreAdapter(StoreContract):
    supports_query = False

    @pytest.fixture
    def store(self, tmp_path: Path) -> BaseStore:
        return ProfileStoreAdapter(ProfileStore(f"sqlite:///{tmp_path / 'profiles.db'}"))


def test_a_query_on_the_profile_store_is_ignored_as_langgraph_does_without_an_index(
    tmp_path: Path,
) -> None:
    ours = ProfileStoreAdapter(ProfileStore(f"sqlite:///{tmp_path / 'p.db'}"))
    theirs = InMemoryStore()
    for store in (ours, theirs):
        store.put(("u",), "a", {"text": "tea"})
        store.put(("u",), "b", {"text": "coffee"})
    got = [(i.key, i.score) for i in ours.search(("u",), query="coffee")]
    assert got == [(i.key, i.score) for i in theirs.search(("u",), query="coffee")]
    assert got == [("a", None), ("b", None)]


def test_puts_through_a_profile_memorys_store_are_checked_and_recorded(tmp_path: Path) -> None:
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
        "additionalProperties": False,
    }
    memory = ProfileMemory(
        schema=schema, policy="manual", namespace=("maya",), url=f"sqlite:///{tmp_path / 'p.db'}"
    )
    store = ProfileStoreAdapter.from_memory(memory)
    store.put(("maya",), "profile", {"name": "Maya", "age": 34})
    assert memory.get() == {"name": "Maya", "age": 34}
    with pytest.raises(InvalidProfileError, match="/age"):
        store.put(("maya",), "profile", {"name": "Maya", "age": "old"})
    memory.update([{"op": "replace", "path": "/age", "value": 35}])
    item = store.get(("maya",), "profile")
    assert item is not None and item.value["age"] == 35
    assert [c.kind for c in memory.history()] == ["put", "patch"]


@pytest.mark.parametrize("bad", ["text", 3])
def test_a_value_that_is_not_a_dict_is_refused_by_name_and_its_batch_writes_nothing(
    tmp_path: Path, bad: object
) -> None:
    """It raised a raw ValueError or TypeError, from dict() deep in the profile store."""
    store = ProfileStoreAdapter(ProfileStore(f"sqlite:///{tmp_path / 'p.db'}"))
    refused = rf"value must be a dict, as in LangGraph's stores; got {bad!r} for key 'b'"
    with pytest.raises(InvalidInputError, match=refused):
        store.batch([PutOp(("u",), "a", {"ok": 1}), PutOp(("u",), "b", bad)])  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match=refused):
        asyncio.run(store.abatch([PutOp(("u",), "a", {"ok": 1}), PutOp(("u",), "b", bad)]))  # type: ignore[arg-type]
    assert store.search(("u",)) == []


def test_a_profile_store_works_in_a_compiled_graph(tmp_path: Path) -> None:
    from langgraph.graph import END, START, StateGraph
    from langgraph.runtime import Runtime
    from typing_extensions import TypedDict

    class State(TypedDict):
        name: str
        greeting: str

    def greet(state: State, runtime: Runtime) -> dict[str, str]:  # type: ignore[type-arg]
        assert runtime.store is not None
        runtime.store.put(("users", state["name"]), "profile", {"name": state["name"]})
        found = runtime.store.search(("users",))
        return {"greeting": f"hello {found[0].value['name']}"}

    graph = StateGraph(State)
    graph.add_node("greet", greet)
    graph.add_edge(START, "greet")
    graph.add_edge("greet", END)
    store = ProfileStoreAdapter(ProfileStore(f"sqlite:///{tmp_path / 'p.db'}"))
    app = graph.compile(store=store)
    assert app.invoke({"name": "maya", "greeting": ""})["greeting"] == "hello maya"
    assert asyncio.run(app.ainvoke({"name": "maya", "greeting": ""}))["greeting"] == "hello maya"


@pytest.mark.parametrize(
    ("value", "condition"),
    [
        (3, 3),
        (3, {"$gt": 2, "$lte": 3}),
        ("a", {"$ne": "b"}),
        ({"x": {"y": 1}, "z": 2}, {"x": {"y": 1}}),
        ([1, {"a": 2}], [1, {"a": 2}]),
        (None, {"$ne": 1}),
        ("a", {"$gt": 1}),
        ("2", {"$gt": 1}),
        (None, {"$gt": 1}),
        ([1, 2], [1]),
        ({"x": 1}, {"x": 2}),
    ],
)
def test_filters_match_as_langgraphs_in_memory_store_matches(
    value: object, condition: object
) -> None:
    theirs = InMemoryStore()
    theirs.put(("n",), "k", {"f": value})
    try:
        expected = len(theirs.search(("n",), filter={"f": condition})) == 1
    except (TypeError, ValueError):
        expected = False  # LangGraph raises on a value that is not a number; we do not match
    assert matches_filter(value, condition) is expected


def test_namespace_selection_with_wildcards_matches_langgraph() -> None:
    namespaces = [("a", "b", "c"), ("a", "x", "c"), ("b", "b"), ("a",)]
    theirs = InMemoryStore()
    for ns in namespaces:
        theirs.put(ns, "k", {"v": 1})
    for op in [
        ListNamespacesOp(match_conditions=(MatchCondition("prefix", ("a", "*")),)),
        ListNamespacesOp(match_conditions=(MatchCondition("suffix", ("*", "c")),)),
        ListNamespacesOp(match_conditions=(MatchCondition("suffix", ("b",)),), max_depth=1),
        ListNamespacesOp(limit=2, offset=1),
    ]:
        assert select_namespaces(namespaces, op) == theirs.batch([op])[0]


def vector_memory(path: Path, **options: object) -> VectorMemory:
    return VectorMemory(path=str(path / "chroma"), namespace=("template",), **options)  # type: ignore[arg-type]


class TestVectorStoreAdapter(StoreContract):
    """The vector memory as a store, with its default (offline MiniLM, hybrid) recall."""

    @pytest.fixture
    def store(self, tmp_path: Path) -> BaseStore:
        return VectorStoreAdapter(vector_memory(tmp_path))


def test_turns_the_vector_memory_saved_are_items_of_its_namespace(tmp_path: Path) -> None:
    memory = vector_memory(tmp_path)
    user = VectorMemory(path=str(tmp_path / "chroma"), namespace=("users", "maya"))
    user.save_context({"input": "I drink black coffee"}, {"output": "Noted."})
    store = VectorStoreAdapter(memory)
    (item,) = store.search(("users", "maya"))
    assert item.value["text"] == "input: I drink black coffee\noutput: Noted."
    assert item.value["session"] == "default"
    assert store.get(("users", "maya"), item.key) == item
    found = store.search(("users",), query="coffee")
    assert found[0].key == item.key and found[0].score is not None
    assert store.list_namespaces() == [("users", "maya")]


def test_items_put_through_the_store_are_recalled_by_the_memory(tmp_path: Path) -> None:
    store = VectorStoreAdapter(vector_memory(tmp_path))
    store.put(("users", "maya"), "drink", {"text": "Maya drinks black coffee", "kind": "pref"})
    store.put(("users", "maya"), "city", {"text": "Maya lives in Lisbon", "kind": "fact"})
    user = VectorMemory(path=str(tmp_path / "chroma"), namespace=("users", "maya"), k=1)
    assert user.load_memory_variables({"input": "what coffee?"})["history"] == (
        "Maya drinks black coffee"
    )


def test_a_value_without_a_text_field_is_embedded_as_json(tmp_path: Path) -> None:
    store = VectorStoreAdapter(vector_memory(tmp_path))
    store.put(("n",), "a", {"city": "Lisbon", "sea": True})
    store.put(("n",), "b", {"city": "Madrid", "sea": False})
    assert store.search(("n",), query="Lisbon")[0].key == "a"
    assert store.get(("n",), "a").value == {"city": "Lisbon", "sea": True}  # type: ignore[union-attr]


def test_search_with_a_query_and_a_filter_ranks_only_matching_items(tmp_path: Path) -> None:
    store = VectorStoreAdapter(vector_memory(tmp_path))
    store.put(("n",), "coffee", {"text": "black coffee every morning", "kind": "pref"})
    store.put(("n",), "coffee-fact", {"text": "coffee grows in Brazil", "kind": "fact"})
    found = store.search(("n",), query="coffee", filter={"kind": "fact"})
    assert [i.key for i in found] == ["coffee-fact"]


@pytest.mark.parametrize("namespace", [("a",), ("a", "b"), ("a/b", "c%2Fd", "100%")])
def test_namespace_keys_decode_to_their_tuples(namespace: tuple[str, ...]) -> None:
    from memories.integrations.langgraph_store import namespace_tuple

    from memories.kernel.namespaces import namespace_key

    assert namespace_tuple(namespace_key(namespace)) == namespace


def collection_memory(path: Path) -> CollectionMemory:
    return CollectionMemory(
        path=str(path / "chroma"), url=f"sqlite:///{path / 'ledger.db'}", namespace=("template",)
    )


class TestCollectionStoreAdapter(StoreContract):
    """The collection memory as a store: items are memories, versions kept in the ledger."""

    @pytest.fixture
    def store(self, tmp_path: Path) -> BaseStore:
        return CollectionStoreAdapter(collection_memory(tmp_path), text_field="text")


def test_a_collections_own_memories_are_items_and_puts_are_versions(tmp_path: Path) -> None:
    store = CollectionStoreAdapter(collection_memory(tmp_path))
    user = CollectionMemory(
        path=str(tmp_path / "chroma"),
        url=f"sqlite:///{tmp_path / 'ledger.db'}",
        namespace=("users", "maya"),
    )
    memory_id = user.put("Maya drinks black coffee", metadata={"kind": "pref"})
    item = store.get(("users", "maya"), memory_id)
    assert item is not None and item.value == {
        "content": "Maya drinks black coffee",
        "kind": "pref",
    }
    store.put(("users", "maya"), memory_id, {"content": "Maya drinks green tea"})
    assert [v.kind for v in user.history(memory_id)] == ["put", "put"]
    (found,) = store.search(("users",), query="what does Maya drink")
    assert found.value == {"content": "Maya drinks green tea"} and found.score is not None


def test_vector_store_scores_compare_across_namespaces(tmp_path: Path) -> None:
    store = VectorStoreAdapter(vector_memory(tmp_path))
    store.put(("users", "maya"), "drink", {"text": "Maya drinks black coffee"})
    store.put(("users", "ines"), "drink", {"text": "Maya drinks black coffee"})
    for n, text in enumerate(["Ines likes green tea", "Ines drinks coffee with milk"]):
        store.put(("users", "ines"), f"other-{n}", {"text": text})
    found = store.search(("users",), query="what coffee does Maya drink?")
    scores = {(i.namespace, i.key): i.score for i in found}
    assert scores[("users", "maya"), "drink"] == pytest.approx(scores[("users", "ines"), "drink"])
    assert found[0].key == "drink"


def test_vector_store_min_score_leaves_out_unrelated_items(tmp_path: Path) -> None:
    store = VectorStoreAdapter(vector_memory(tmp_path))
    store.put(("users", "maya"), "drink", {"text": "Maya drinks black coffee"})
    assert store.search(("users",), query="quantum chromodynamics", min_score=0.01) == []
    assert [i.key for i in store.search(("users",), query="Maya's coffee", min_score=0.01)] == [
        "drink"
    ]
    assert len(store.search(("users",), query="quantum chromodynamics")) == 1  # no floor
    strict = VectorStoreAdapter(vector_memory(tmp_path), min_score=0.01)
    assert strict.search(("users",), query="quantum chromodynamics") == []
    assert asyncio.run(strict.asearch(("users",), query="quantum chromodynamics")) == []
    assert (
        asyncio.run(store.asearch(("users",), query="quantum chromodynamics", min_score=0.01)) == []
    )


def test_min_score_keeps_langgraphs_namespace_rules(tmp_path: Path) -> None:
    from langgraph.store.base import InvalidNamespaceError

    store = VectorStoreAdapter(vector_memory(tmp_path))
    store.put(("users", "maya"), "drink", {"text": "Maya drinks black coffee"})
    for bad in (("users.maya",), ("",), ("users", "a\x00b"), (3,)):
        with pytest.raises(InvalidNamespaceError):
            store.search(bad, query="coffee")  # type: ignore[arg-type]
        with pytest.raises(InvalidNamespaceError):
            store.search(bad, query="coffee", min_score=0.01)  # type: ignore[arg-type]
        with pytest.raises(InvalidNamespaceError):
            asyncio.run(store.asearch(bad, query="coffee", min_score=0.01))  # type: ignore[arg-type]


def test_vector_store_min_score_needs_a_query(tmp_path: Path) -> None:
    store = VectorStoreAdapter(vector_memory(tmp_path))
    with pytest.raises(InvalidInputError, match="needs a query"):
        store.search(("users",), min_score=0.5)
    with pytest.raises(InvalidInputError, match="min_score"):
        store.search(("users",), query="x", min_score=3)
