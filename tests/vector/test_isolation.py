"""Namespace isolation: no search, filter or delete of one user reaches another's documents."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memories import InvalidInputError
from memories.kernel.namespaces import namespace_key

USERS = [(f"user-{i}", "chat") for i in range(12)] + [("user/1",), ("user", "1"), ("user%2F1",)]
WORDS = ["apple", "river", "guitar", "secret", "plan", "dog", "paris", "turn"]

sessions = st.sampled_from(["s1", "s2", "s3"])
leaf = st.one_of(
    st.builds(lambda s: {"session": s}, sessions),
    st.builds(lambda s: {"session": {"$ne": s}}, sessions),
    st.builds(lambda n: {"turn": {"$gte": n}}, st.integers(0, 3)),
    st.builds(lambda s: {"session": {"$in": [s, "s9"]}}, sessions),
)
filters = st.recursive(
    leaf,
    lambda inner: st.one_of(
        st.builds(lambda xs: {"$or": xs}, st.lists(inner, min_size=2, max_size=3)),
        st.builds(lambda xs: {"$and": xs}, st.lists(inner, min_size=2, max_size=3)),
    ),
    max_leaves=5,
)


def _with_namespace(where: dict[str, Any], other: str) -> dict[str, Any]:
    """An adversarial filter: the caller's filter OR'd with another namespace."""
    return {"$or": [where, {"namespace": other}]}


@pytest.fixture(scope="module")
def populated(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, ...], Any]:
    """Every user with the same texts in three sessions, one persistent store."""
    import uuid

    from memories import VectorMemory

    path = str(tmp_path_factory.mktemp("isolation"))
    collection = f"iso{uuid.uuid4().hex[:8]}"
    memories = {}
    for user in USERS:
        memory = VectorMemory(
            path=path,
            collection=collection,
            namespace=user,
            embeddings="tests.vector.conftest:WordEmbeddings",
            k=50,
        )
        texts = [f"{w} {user[0]}" for w in WORDS]
        metadatas = [{"session": f"s{1 + i % 3}", "turn": i // 3} for i in range(len(texts))]
        memory.add(texts, metadatas=metadatas)
        memory.save_context({"input": "secret plan"}, {"output": f"only for {user}"})
        memories[user] = memory
    return memories


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    user=st.sampled_from(USERS),
    other=st.sampled_from(USERS),
    query=st.sampled_from([*WORDS, "secret plan", "user-3", ""]),
    where=st.none() | filters,
)
def test_a_search_only_ever_returns_its_own_namespace(
    populated: dict[tuple[str, ...], Any],
    user: tuple[str, ...],
    other: tuple[str, ...],
    query: str,
    where: dict[str, Any] | None,
) -> None:
    memory = populated[user]
    own = namespace_key(user)
    for result in memory.search(query, filter=where):
        assert result.metadata["namespace"] == own
    adversarial = _with_namespace(where or {"session": "s1"}, namespace_key(other))
    with pytest.raises(InvalidInputError, match="reserved"):
        memory.search(query, filter=adversarial)
    with pytest.raises(InvalidInputError, match="reserved"):
        memory.delete(filter=adversarial)


def test_deleting_with_any_filter_leaves_other_namespaces_alone(
    populated: dict[tuple[str, ...], Any],
) -> None:
    victim, bystanders = USERS[0], USERS[1:]
    before = {u: populated[u].store.count(namespace_key(u)) for u in bystanders}
    populated[victim].delete(filter={"$or": [{"session": "s1"}, {"session": {"$ne": "s1"}}]})
    assert populated[victim].search("secret plan") == []
    assert {u: populated[u].store.count(namespace_key(u)) for u in bystanders} == before
    populated[victim].delete([r.id for r in populated[USERS[1]].search("apple")])
    assert populated[USERS[1]].store.count(namespace_key(USERS[1])) == before[USERS[1]]


def test_similar_namespaces_are_distinct() -> None:
    keys = {namespace_key(u) for u in USERS}
    assert len(keys) == len(USERS)
    assert namespace_key(("user/1",)) != namespace_key(("user", "1"))
