"""LangGraph store adapters, checked against LangGraph's own InMemoryStore behaviour."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from langgraph.store.base import BaseStore, ListNamespacesOp, MatchCondition
from langgraph.store.memory import InMemoryStore

from integrations.langgraph_store import ProfileStoreAdapter, matches_filter, select_namespaces
from memories import InvalidProfileError, ProfileMemory
from memories.profile import ProfileStore
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


def test_ttl_is_refused_by_name(tmp_path: Path) -> None:
    store = ProfileStoreAdapter(ProfileStore(f"sqlite:///{tmp_path / 'p.db'}"))
    with pytest.raises(NotImplementedError, match="ProfileStoreAdapter"):
        store.put(("u",), "k", {"a": 1}, ttl=5)


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
