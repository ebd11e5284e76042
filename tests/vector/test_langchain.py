"""LangChain compatibility: VectorStoreRetrieverMemory does what langchain_classic's does."""

from __future__ import annotations

import asyncio
import warnings
from typing import Any

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.vectorstores import InMemoryVectorStore

from memories import ConfigError, InvalidInputError, VectorStoreRetrieverMemory, create_memory
from tests.vector.conftest import MakeVector

RUNS = [
    ({"input": "my favourite food is pizza", "context": "chat"}, {"output": "Noted!"}),
    ({"input": "I play football on Sundays", "context": "chat"}, {"output": "Sounds fun"}),
    ({"input": "my sister is Ana", "context": "x", "history": "ignored"}, {"output": "Hi Ana"}),
]


def _retriever() -> Any:
    store = InMemoryVectorStore(DeterministicFakeEmbedding(size=32))
    return store.as_retriever(search_kwargs={"k": 2})


def _theirs(**options: Any) -> Any:
    from langchain_classic.memory import VectorStoreRetrieverMemory as LangChains

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return LangChains(retriever=_retriever(), **options)


@pytest.mark.parametrize(
    "options",
    [{}, {"return_docs": True}, {"exclude_input_keys": ["context"]}, {"input_key": "input"}],
)
def test_with_a_retriever_it_matches_langchain(options: dict[str, Any]) -> None:
    ours = VectorStoreRetrieverMemory(retriever=_retriever(), **options)
    theirs = _theirs(**options)
    for inputs, outputs in RUNS:
        ours.save_context(inputs, outputs)
        theirs.save_context(inputs, outputs)
    query = {"input": "what food do I like", "context": "chat"}
    if "input_key" not in options:
        query = {"input": "what food do I like"}

    def strip_ids(value: Any) -> Any:
        return [(d.page_content, d.metadata) for d in value] if isinstance(value, list) else value

    assert strip_ids(ours.load_memory_variables(query)["history"]) == strip_ids(
        theirs.load_memory_variables(query)["history"]
    )
    got = asyncio.run(ours.aload_memory_variables(query))
    assert strip_ids(got["history"]) == strip_ids(theirs.load_memory_variables(query)["history"])


def test_without_a_retriever_documents_have_langchains_text(make_vector: MakeVector) -> None:
    memory = VectorStoreRetrieverMemory(
        mode="memory",
        collection=make_vector().collection,
        namespace="lc",
        embeddings="tests.vector.conftest:WordEmbeddings",
        exclude_input_keys=["context"],
        k=1,
    )
    inputs, outputs = RUNS[2]
    memory.save_context(inputs, outputs)
    assert memory.load_memory_variables({"input": "sister"}) == {
        "history": "input: my sister is Ana\noutput: Hi Ana"
    }
    config = memory.to_config()
    assert config["type"] == "vector_store_retriever"
    assert create_memory(config).to_config() == config


def test_with_a_retriever_clear_deletes_what_this_memory_wrote_and_nothing_else() -> None:
    """LangChain's clear() does nothing (a bug): ours deletes its own documents by id."""
    retriever = _retriever()
    store = retriever.vectorstore
    store.add_texts(["someone else's document"], ids=["theirs"])
    memory = VectorStoreRetrieverMemory(retriever=retriever)
    for inputs, outputs in RUNS:
        memory.save_context(inputs, outputs)
    assert len(store.store) == 4
    memory.clear()
    assert list(store.store) == ["theirs"]
    assert memory.load_memory_variables({"input": "food"}) == {"history": "someone else's document"}
    asyncio.run(memory.asave_context(*RUNS[0]))
    assert len(store.store) == 2
    asyncio.run(memory.aclear())
    assert list(store.store) == ["theirs"]


def test_with_a_store_that_cannot_delete_clear_warns_and_keeps_them(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class NoDelete(InMemoryVectorStore):
        def delete(self, ids: Any = None, **kwargs: Any) -> None:
            raise NotImplementedError("delete")

    store = NoDelete(DeterministicFakeEmbedding(size=32))
    memory = VectorStoreRetrieverMemory(retriever=store.as_retriever())
    memory.save_context(*RUNS[0])
    with caplog.at_level("WARNING"):
        memory.clear()
    assert "cannot delete" in caplog.text and len(store.store) == 1


def test_with_a_retriever_the_vector_api_goes_through_the_store() -> None:
    """The LangChain backend implements the protocol: search, add, delete, async twins."""
    retriever = _retriever()
    store = retriever.vectorstore
    memory = VectorStoreRetrieverMemory(retriever=retriever)
    ids = memory.add(["I like green tea", "the cat is asleep"], metadatas=[{"topic": "tea"}, None])
    assert sorted(store.store) == sorted(ids)
    assert store.get_by_ids([ids[0]])[0].metadata == {"topic": "tea"}
    expected = [d.page_content for d in retriever.invoke("green tea", k=1)]
    assert [r.text for r in memory.search("green tea", k=1)] == expected
    assert [r.text for r in asyncio.run(memory.asearch("green tea", k=1))] == expected
    assert len(memory.search("green tea")) == 2  # the retriever's own k
    memory.delete([ids[1]])
    assert list(store.store) == [ids[0]]
    with pytest.raises(InvalidInputError, match="by id only"):
        memory.delete(filter={"topic": "tea"})
    with pytest.raises(NotImplementedError, match="no namespaces"):
        memory.erase_namespace()
    status = memory.status()
    assert (status.pending, status.failures, status.write) == (0, 0, "sync")
    assert memory.flush() is True and memory.close() is True  # nothing is ever queued
    with pytest.raises(ConfigError, match="no config form"):
        memory.to_config()
    memory.clear()  # what it added goes; the store is empty again
    assert store.store == {}


def test_with_a_retriever_a_turn_keeps_only_the_metadata_it_was_given() -> None:
    """The input part's mark is for embedders of ours: a LangChain store embeds the text itself."""
    retriever = _retriever()
    memory = VectorStoreRetrieverMemory(retriever=retriever, return_docs=True)
    inputs, outputs = RUNS[0]
    memory.save_context(inputs, outputs, metadata={"who": "ada"})
    (stored,) = retriever.vectorstore.store.values()
    assert stored["metadata"] == {"who": "ada"}
