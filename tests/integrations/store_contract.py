"""LangGraph ``BaseStore`` behaviour, as checks every store adapter passes.

:class:`StoreContract` runs first against LangGraph's own ``InMemoryStore``
(``test_langgraph_store.py``), so each check states what LangGraph does; an
adapter's test class subclasses it with a ``store`` fixture and passes the
same checks.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import re
import time

import pytest
from langchain_core.embeddings import Embeddings
from langgraph.store.base import BaseStore, GetOp, InvalidNamespaceError, PutOp, SearchOp

DOCS = {
    (("users", "maya"), "drink"): {"text": "Maya drinks black coffee, no sugar", "kind": "pref"},
    (("users", "maya"), "city"): {"text": "Maya lives in Lisbon by the sea", "kind": "fact"},
    (("users", "maya"), "trip"): {"text": "Maya goes to a conference in Kyoto", "kind": "plan"},
    (("users", "mayank"), "city"): {"text": "Mayank lives in Pune", "kind": "fact"},
    (("teams", "bio"), "topic"): {"text": "The team studies octopus behaviour", "kind": "fact"},
}


def fill(store: BaseStore) -> None:
    for (namespace, key), value in DOCS.items():
        store.put(namespace, key, value)


class WordEmbeddings(Embeddings):
    """Hashed bag of words: texts sharing words are close. Offline, deterministic."""

    size = 256

    def _embed(self, text: str) -> list[float]:
        vector = [0.0] * self.size
        for word in re.findall(r"\w+", text.lower()):
            digest = hashlib.sha1(word.encode(), usedforsecurity=False).digest()
            vector[int.from_bytes(digest[:4], "big") % self.size] += 1.0
        norm = math.sqrt(sum(v * v for v in vector)) or 1.0
        return [v / norm for v in vector]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._embed(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._embed(text)


class StoreContract:
    """Subclass with a ``store`` fixture returning an empty store."""

    #: The store ranks ``search(query=...)`` results by meaning, with scores.
    supports_query = True

    @pytest.fixture
    def store(self) -> BaseStore:  # pragma: no cover - overridden
        raise NotImplementedError

    def test_get_of_a_missing_key_is_none(self, store: BaseStore) -> None:
        assert store.get(("users", "maya"), "nothing") is None

    def test_put_then_get_gives_the_item(self, store: BaseStore) -> None:
        value = {"text": "Maya drinks tea", "kind": "pref", "nested": {"a": [1, 2]}}
        store.put(("users", "maya"), "drink", value)
        item = store.get(("users", "maya"), "drink")
        assert item is not None
        assert item.value == value
        assert item.namespace == ("users", "maya") and item.key == "drink"
        assert item.created_at <= item.updated_at

    def test_put_again_replaces_the_value_and_moves_updated_at(self, store: BaseStore) -> None:
        # created_at is left unchecked: LangGraph's InMemoryStore resets it on
        # every put, its PostgresStore keeps the first one.
        store.put(("users", "maya"), "drink", {"text": "Maya drinks green tea"})
        first = store.get(("users", "maya"), "drink")
        time.sleep(0.01)
        store.put(("users", "maya"), "drink", {"text": "Maya drinks black coffee"})
        second = store.get(("users", "maya"), "drink")
        assert first is not None and second is not None
        assert second.value == {"text": "Maya drinks black coffee"}
        assert second.updated_at > first.updated_at
        assert second.created_at <= second.updated_at

    def test_delete_removes_the_item_and_a_missing_delete_is_fine(self, store: BaseStore) -> None:
        fill(store)
        store.delete(("users", "maya"), "drink")
        store.delete(("users", "maya"), "never-there")
        assert store.get(("users", "maya"), "drink") is None
        assert store.get(("users", "maya"), "city") is not None

    def test_search_covers_a_namespace_and_those_below_it_by_whole_labels(
        self, store: BaseStore
    ) -> None:
        fill(store)
        found = {(i.namespace, i.key) for i in store.search(("users", "maya"))}
        assert found == {(("users", "maya"), k) for k in ("drink", "city", "trip")}
        assert len(store.search(("users",))) == 4
        assert store.search(("nobody",)) == []

    def test_search_tells_labels_apart_by_case_below_the_prefix_too(self, store: BaseStore) -> None:
        store.put(("Team", "bio"), "k", {"text": "upper"})
        store.put(("team",), "k", {"text": "lower"})
        assert [i.namespace for i in store.search(("team",))] == [("team",)]
        assert [i.namespace for i in store.search(("Team",))] == [("Team", "bio")]

    def test_search_filter_matches_values_exactly(self, store: BaseStore) -> None:
        fill(store)
        found = store.search(("users",), filter={"kind": "fact"})
        assert {(i.namespace[1], i.key) for i in found} == {("maya", "city"), ("mayank", "city")}
        assert all(i.score is None for i in found)

    def test_search_pages_with_limit_and_offset(self, store: BaseStore) -> None:
        fill(store)
        pages = [store.search(("users",), limit=2, offset=n) for n in (0, 2, 4)]
        assert [len(p) for p in pages] == [2, 2, 0]
        keys = [(i.namespace, i.key) for page in pages for i in page]
        assert len(set(keys)) == 4

    def test_search_with_a_query_ranks_the_closest_item_first(self, store: BaseStore) -> None:
        if not self.supports_query:
            pytest.skip("this store has no semantic search")
        fill(store)
        found = store.search(("users", "maya"), query="what coffee does Maya drink?")
        assert found[0].key == "drink"
        assert all(i.score is not None for i in found)
        assert [i.score for i in found] == sorted((i.score for i in found), reverse=True)

    def test_list_namespaces_with_prefix_suffix_and_depth(self, store: BaseStore) -> None:
        fill(store)
        users = [("users", "maya"), ("users", "mayank")]
        assert store.list_namespaces() == sorted([*users, ("teams", "bio")])
        assert store.list_namespaces(prefix=("users",)) == users
        assert store.list_namespaces(suffix=("bio",)) == [("teams", "bio")]
        assert store.list_namespaces(max_depth=1) == [("teams",), ("users",)]
        assert store.list_namespaces(limit=1, offset=1) == [("users", "maya")]

    @pytest.mark.parametrize("namespace", [(), ("a.b",), ("",)])
    def test_a_bad_namespace_is_rejected(self, store: BaseStore, namespace: tuple) -> None:  # type: ignore[type-arg]
        with pytest.raises(InvalidNamespaceError):
            store.put(namespace, "k", {"text": "x"})

    def test_batch_answers_each_operation_in_order(self, store: BaseStore) -> None:
        fill(store)
        results = store.batch(
            [
                GetOp(("users", "maya"), "city"),
                SearchOp(("teams",)),
                GetOp(("users", "maya"), "missing"),
            ]
        )
        assert results[0] is not None and results[0].value == DOCS[(("users", "maya"), "city")]
        assert [i.key for i in results[1]] == ["topic"]  # type: ignore[union-attr]
        assert results[2] is None
        assert store.batch([PutOp(("x",), "k", {"text": "y"})]) == [None]

    def test_async_twins_do_what_the_sync_methods_do(self, store: BaseStore) -> None:
        async def scenario() -> None:
            for (namespace, key), value in DOCS.items():
                await store.aput(namespace, key, value)
            item = await store.aget(("users", "maya"), "city")
            assert item is not None and item.value == DOCS[(("users", "maya"), "city")]
            assert len(await store.asearch(("users",))) == 4
            assert await store.alist_namespaces(prefix=("teams",)) == [("teams", "bio")]
            await store.adelete(("users", "maya"), "city")
            assert await store.aget(("users", "maya"), "city") is None

        asyncio.run(scenario())
