"""VectorMemory's behaviour: documents and metadata, search, bulk import, deletes, config."""

from __future__ import annotations

import asyncio

import pytest
from langchain_core.documents import Document

from memories import (
    BackendError,
    ConfigError,
    InvalidInputError,
    VectorMemory,
    create_memory,
)
from memories.core.config import MEMORY_TYPES
from memories.kernel.imports import install_command
from memories.stores.recall import RecallConfig
from tests.vector.conftest import MakeVector


def test_a_turn_is_stored_as_langchains_text_with_its_metadata(make_vector: MakeVector) -> None:
    memory = make_vector(namespace=("user-42", "chat"), session_id="s1", metadata={"app": "x"})
    memory.save_context({"input": "I adopted a dog"}, {"output": "What is its name?"})
    memory.save_context({"input": "Rex"}, {"output": "Nice name"}, metadata={"mood": "happy"})
    first, second = sorted(memory.search("dog Rex", k=5), key=lambda r: r.metadata["turn"])
    assert first.text == "input: I adopted a dog\noutput: What is its name?"
    assert first.metadata["namespace"] == "user-42/chat"
    assert (first.metadata["session"], first.metadata["turn"]) == ("s1", 0)
    assert first.metadata["speakers"] == ["human", "ai"]
    assert first.metadata["app"] == "x" and isinstance(first.metadata["timestamp"], float)
    assert (second.metadata["turn"], second.metadata["mood"]) == (1, "happy")


def test_turns_are_numbered_per_session(make_vector: MakeVector) -> None:
    one = make_vector(namespace="n", session_id="a")
    other = make_vector(namespace="n", session_id="b")
    for i in range(3):
        one.save_context({"input": f"a{i}"}, {"output": "ok"})
    other.save_context({"input": "b0"}, {"output": "ok"})
    turns = {(r.metadata["session"], r.metadata["turn"]) for r in one.search("ok", k=10)}
    assert turns == {("a", 0), ("a", 1), ("a", 2), ("b", 0)}


def test_load_joins_the_top_k_texts_with_newlines(make_vector: MakeVector) -> None:
    memory = make_vector(k=2)
    memory.save_context({"input": "my cat is called Tom"}, {"output": "ok"})
    memory.save_context({"input": "I live in Lyon"}, {"output": "nice"})
    memory.save_context({"input": "weather talk"}, {"output": "sunny"})
    value = memory.load_memory_variables({"input": "what is my cat called"})["history"]
    assert value.split("\n")[:2] == ["input: my cat is called Tom", "output: ok"]
    assert value.count("input: ") == 2


def test_return_docs_gives_documents(make_vector: MakeVector) -> None:
    memory = make_vector(return_docs=True)
    memory.save_context({"input": "hello"}, {"output": "hi"})
    (doc,) = memory.load_memory_variables({"input": "hello"})["history"]
    assert isinstance(doc, Document) and doc.page_content == "input: hello\noutput: hi"
    assert doc.metadata["turn"] == 0 and doc.id


def test_search_filter_narrows_within_the_namespace(make_vector: MakeVector) -> None:
    memory = make_vector()
    memory.add(
        ["apples in s1", "apples in s2", "pears in s2"],
        metadatas=[{"session": "s1"}, {"session": "s2"}, {"session": "s2"}],
    )
    found = memory.search("apples", k=5, filter={"session": "s2"})
    assert {r.text for r in found} == {"apples in s2", "pears in s2"}
    either = {"$or": [{"session": "s1"}, {"session": {"$eq": "nope"}}]}
    assert [r.text for r in memory.search("apples", filter=either)] == ["apples in s1"]


@pytest.mark.parametrize(
    "bad",
    [
        {"namespace": "other"},
        {"$or": [{"namespace": "other"}, {"session": "s1"}]},
        {"$and": [{"session": "s1"}, {"$or": [{"namespace": {"$ne": "x"}}, {"turn": 1}]}]},
        {"$not": {"session": "s1"}},
        {"session": {"$regex": ".*"}},
        {"$or": [{"session": "s1"}]},
        {},
        "session = s1",
    ],
)
def test_a_filter_naming_the_namespace_or_malformed_is_rejected(
    make_vector: MakeVector, bad: object
) -> None:
    memory = make_vector()
    memory.save_context({"input": "x"}, {"output": "y"})
    with pytest.raises(InvalidInputError):
        memory.search("x", filter=bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError):
        memory.delete(filter=bad)  # type: ignore[arg-type]


def test_caller_metadata_cannot_set_the_namespace_or_unstorable_values(
    make_vector: MakeVector,
) -> None:
    memory = make_vector()
    for metadata in ({"namespace": "other"}, {"x": None}, {"x": {"a": 1}}, {"x": []}):
        with pytest.raises(InvalidInputError):
            memory.save_context({"input": "a"}, {"output": "b"}, metadata=metadata)
        with pytest.raises(InvalidInputError):
            memory.add(["a"], metadatas=[metadata])
    assert memory.search("a") == []
    with pytest.raises(ValueError, match="reserved"):  # pydantic's ValidationError
        VectorMemory(metadata={"namespace": "x"})


def test_add_imports_in_bulk_and_returns_ids(make_vector: MakeVector) -> None:
    memory = make_vector()
    ids = memory.add([f"fact {i}" for i in range(600)], progress=True)
    assert len(set(ids)) == 600
    assert memory.search("fact 599", k=1)[0].id == ids[599]
    assert memory.add(["given"], ids=["my-id"]) == ["my-id"]
    assert memory.search("given", k=1)[0].id == "my-id"
    with pytest.raises(InvalidInputError):
        memory.add("not a list")  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError):
        memory.add(["a", "b"], ids=["same", "same"])


def test_neighbour_smoothing_follows_session_and_turn(make_vector: MakeVector) -> None:
    memory = make_vector(recall={"mode": "bm25", "neighbour_window": 1})
    texts = ["what did you cook", "a lasagna with spinach", "unrelated chat", "more chat"]
    memory.add(texts, metadatas=[{"session": "1", "turn": i} for i in range(4)])
    found = [r.text for r in memory.search("what did you cook", k=2)]
    assert found == ["what did you cook", "a lasagna with spinach"]


def test_delete_by_ids_and_by_filter(make_vector: MakeVector) -> None:
    memory = make_vector()
    ids = memory.add(
        ["red apple", "green apple", "blue apple"],
        metadatas=[{"colour": "red"}, {"colour": "green"}, {"colour": "blue"}],
    )
    memory.delete([ids[0]])
    memory.delete(filter={"colour": "green"})
    assert [r.text for r in memory.search("apple", k=5)] == ["blue apple"]
    with pytest.raises(InvalidInputError, match="clear"):
        memory.delete()


def test_clear_deletes_only_this_namespace(make_vector: MakeVector) -> None:
    mine, theirs = make_vector(namespace="mine"), make_vector(namespace="theirs")
    mine.save_context({"input": "secret plan"}, {"output": "ok"})
    theirs.save_context({"input": "secret plan"}, {"output": "ok"})
    mine.clear()
    assert mine.search("secret plan") == []
    assert mine.store.count("mine") == 0
    assert len(theirs.search("secret plan")) == 1


def test_async_twins_do_what_sync_does(make_vector: MakeVector) -> None:
    sync, asyn = make_vector(namespace="sync"), make_vector(namespace="async")
    texts = ["alpha beta", "gamma delta", "beta gamma"]
    metadatas = [{"session": "s", "turn": i} for i in range(3)]
    sync.add(texts, metadatas=metadatas, ids=["a", "b", "c"])
    sync.save_context({"input": "beta"}, {"output": "x"})

    async def run() -> list[tuple[str, float]]:
        await asyn.aadd(texts, metadatas=metadatas, ids=["a", "b", "c"])
        await asyn.asave_context({"input": "beta"}, {"output": "x"})
        found = await asyn.asearch("beta", k=4)
        await asyn.adelete(["a"])
        return [(r.text, round(r.score, 6)) for r in found]

    assert asyncio.run(run()) == [(r.text, round(r.score, 6)) for r in sync.search("beta", k=4)]
    assert "alpha beta" not in [r.text for r in asyn.search("alpha", k=4)]
    assert asyncio.run(asyn.aflush()) is True and asyn.pending() == 0


def test_collections_never_use_chromas_default_embedding_function(
    make_vector: MakeVector,
) -> None:
    from memories.integrations.chroma import LangChainEmbeddingFunction

    memory = make_vector(namespace="ef")
    memory.save_context({"input": "a"}, {"output": "b"})
    collection = memory.store._resolve("ef").collection
    assert isinstance(collection._embedding_function, LangChainEmbeddingFunction)


@pytest.mark.parametrize("write", ["sync", "background"])
def test_embeddings_of_another_width_give_a_clear_error(
    make_vector: MakeVector, write: str
) -> None:
    from tests.vector.conftest import WordEmbeddings

    make_vector(namespace="w").save_context({"input": "a"}, {"output": "b"})
    wider = make_vector(namespace="w", embeddings=WordEmbeddings(dim=32), write=write)
    if write == "sync":
        with pytest.raises(BackendError, match=r"dimension|width"):
            wider.save_context({"input": "c"}, {"output": "d"})
    else:
        wider.save_context({"input": "c"}, {"output": "d"})  # queued; the writer fails
        with pytest.raises(BackendError, match=r"dimension|width"):
            wider.flush()
    assert wider.pending() == 1  # kept, not lost
    with pytest.raises(BackendError):
        wider.clear()  # a session's clear writes what is queued first, so it fails too
    wider.erase_namespace()  # the way out: the namespace, queued rows included
    assert wider.pending() == 0


def test_clear_erases_this_sessions_documents_and_keeps_the_others(
    make_vector: MakeVector,
) -> None:
    """Issue 10, item 2: a "new chat" that calls clear() wiped every session's memories."""
    first = make_vector(namespace="shared-user", session_id="s1")
    second = make_vector(namespace="shared-user", session_id="s2")
    first.save_context({"input": "I live in Lisbon"}, {"output": "noted"})
    second.save_context({"input": "I play the cello"}, {"output": "nice"})
    first.clear()
    texts = [r.text for r in second.search("Lisbon cello", k=5)]
    assert texts == ["input: I play the cello\noutput: nice"]
    asyncio.run(second.aerase_namespace())
    assert first.search("cello", k=5) == []


def test_config_round_trips_and_is_registered() -> None:
    memory = VectorMemory(
        mode="http",
        host="127.0.0.1",
        port=9000,
        collection="mine",
        namespace=["user-1", "chat"],
        k=10,
        recall=RecallConfig(mode="bm25", candidates=50),
        metadata={"app": "demo"},
        embeddings="tests.vector.conftest:WordEmbeddings",
    )
    config = memory.to_config()
    assert config["namespace"] == ["user-1", "chat"]
    assert config["recall"] == {"mode": "bm25", "candidates": 50}
    rebuilt = create_memory(config)
    assert isinstance(rebuilt, VectorMemory) and rebuilt.to_config() == config
    assert rebuilt.recall == memory.recall
    assert VectorMemory().to_config() == {"type": "vector"}
    assert VectorMemory(write="sync").to_config() == {"type": "vector", "write": "sync"}
    with pytest.raises(ConfigError, match="write"):
        VectorMemory(write="later")  # type: ignore[arg-type]
    assert install_command(MEMORY_TYPES["vector"][0]) == "pip install 'chat-memories[chroma]'"
    with pytest.raises(ConfigError):
        create_memory({"type": "vector", "recall": {"mode": "nope"}})
    with pytest.raises(ConfigError):
        create_memory({"type": "vector", "mode": "cloud"})


def test_a_lone_surrogate_is_refused_before_the_outbox(make_vector: MakeVector) -> None:
    from memories import InvalidInputError

    memory = make_vector(namespace="surrogates")
    with pytest.raises(InvalidInputError, match="lone surrogate"):
        memory.save_context({"input": "bad \ud800"}, {"output": "ok"})
    assert memory.pending() == 0 and memory.search("bad", k=3) == []


@pytest.mark.parametrize(
    ("metadata", "message"),
    [
        ({"chroma:document": "x"}, "vector store's own keys"),
        ({"#document": "x"}, "vector store's own keys"),
        ({"big": 2**70}, "int within 64 bits"),
        ({"bad": "\ud800"}, "valid UTF-8"),
    ],
)
def test_metadata_the_store_would_reject_or_alter_is_refused_up_front(
    make_vector: MakeVector, metadata: dict[str, object], message: str
) -> None:
    """Issue 10, items 4 and 12: such a row used to block the namespace's outbox for good."""
    from memories import InvalidInputError

    memory = make_vector(namespace="meta-check")
    with pytest.raises(InvalidInputError, match=message):
        memory.save_context({"input": "hi"}, {"output": "ok"}, metadata=metadata)
    assert memory.pending() == 0
    memory.save_context({"input": "hi"}, {"output": "ok"}, metadata={"big": 2**62})
    assert memory.search("hi", k=1)[0].metadata["big"] == 2**62


@pytest.mark.parametrize(
    ("options", "name"),
    [({"max_token_limit": True}, "max_token_limit"), ({"k": False}, "k")],
)
def test_a_bool_is_not_taken_for_a_number(options: dict[str, object], name: str) -> None:
    """Issue 10, item 12: `max_token_limit: true` quietly became a limit of 1."""
    from memories import ConfigError, TokenBufferMemory, WindowMemory

    cls = TokenBufferMemory if name == "max_token_limit" else WindowMemory
    with pytest.raises(ConfigError, match=f"{name} must be a number, got"):
        cls(**options)


def test_a_query_naming_a_speaker_favours_their_turns(make_vector: MakeVector) -> None:
    memory = make_vector(recall={"speaker_weight": 1.0, "neighbour_weight": 0.0})
    memory.add(  # the same text: only who said it differs
        ["the trip to the lake was fun", "the trip to the lake was fun"],
        metadatas=[{"speakers": ["Caroline"]}, {"speakers": ["Melanie"]}],
    )
    for name in ("Caroline", "Melanie"):
        found = memory.search(f"how was the lake trip for {name}?", k=2)
        assert found[0].metadata["speakers"] == [name]
