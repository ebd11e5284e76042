"""The memory contract, run against VectorMemory.

A vector memory keeps no chat log: the contract's history only names the
namespace, so the suite runs on one history kind. It recalls by relevance,
not recency, so "the latest turn is shown" does not apply, and the
round-trip of a huge input is checked in the store instead of the log.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.vectorstores import InMemoryVectorStore

from memories import VectorMemory, VectorStoreRetrieverMemory
from memories.core.base import BaseMemory
from memories.stores.history import ChatHistory, InMemoryHistory
from tests.contract.memory_contract import TURNS, MakeMemory, MemoryContract, run_turns
from tests.vector.conftest import MakeVector


class TestVectorMemoryContract(MemoryContract):
    memory_type = "vector"
    shows_latest_turn = False  # recall is by relevance to the input
    supports_return_messages = False  # LangChain's class has return_docs instead

    @pytest.fixture
    def history_factory(self) -> Callable[[str], ChatHistory]:
        return lambda session_id: InMemoryHistory(session_id=session_id)

    @pytest.fixture
    def make_memory(self, make_vector: MakeVector) -> MakeMemory:
        return lambda history: make_vector(namespace=("contract", history.session_id))

    def stored_data(self, memory: BaseMemory, history: ChatHistory) -> Any:
        """The namespace's documents in the store, queued ones written first."""
        assert isinstance(memory, VectorMemory)
        return sorted((r.id, r.text) for r in memory.backend.documents())

    def test_unicode_and_huge_input_round_trip(
        self, make_memory: MakeMemory, history: ChatHistory
    ) -> None:
        memory = make_memory(history)
        assert isinstance(memory, VectorMemory)
        huge = "ünïcødé 🧠 " * 50_000
        memory.save_context({"input": huge}, {"output": "noted, 日本語"})
        (found,) = memory.search("noted 日本語", k=1)
        assert found.text == f"input: {huge}\noutput: noted, 日本語"
        run_turns(memory, TURNS[:1])
        assert TURNS[0][0] in str(memory.search(TURNS[0][0], k=1)[0].text)


class TestPgVectorMemoryContract(TestVectorMemoryContract):
    """The same contract on PostgreSQL with pgvector (``vectors=``): one transaction per turn."""

    @pytest.fixture
    def make_memory(self, make_pg_vector: MakeVector) -> MakeMemory:
        return lambda history: make_pg_vector(namespace=("contract", history.session_id))


class TestVectorStoreRetrieverMemoryContract(MemoryContract):
    """LangChain's class over a LangChain vector store (its retriever), as users migrate it."""

    memory_type = "vector_store_retriever"
    shows_latest_turn = False  # recall is by relevance to the input
    supports_return_messages = False  # LangChain's class has return_docs instead
    configurable = False  # a retriever object has no config form
    # LangChain's format stores every input key and every output key as a line.
    valid_inputs = frozenset({"no-input", "two-inputs", "two-outputs"})

    @pytest.fixture
    def history_factory(self) -> Callable[[str], ChatHistory]:
        return lambda session_id: InMemoryHistory(session_id=session_id)

    @pytest.fixture
    def make_memory(self) -> MakeMemory:
        def make(history: ChatHistory) -> BaseMemory:
            store = InMemoryVectorStore(DeterministicFakeEmbedding(size=16))
            return VectorStoreRetrieverMemory(retriever=store.as_retriever(search_kwargs={"k": 3}))

        return make

    def stored_data(self, memory: BaseMemory, history: ChatHistory) -> Any:
        """The documents in the LangChain vector store."""
        assert isinstance(memory, VectorStoreRetrieverMemory) and memory.retriever is not None
        store = memory.retriever.vectorstore
        assert isinstance(store, InMemoryVectorStore)
        return sorted((key, record["text"]) for key, record in store.store.items())

    def test_unicode_and_huge_input_round_trip(
        self, make_memory: MakeMemory, history: ChatHistory
    ) -> None:
        memory = make_memory(history)
        huge = "ünïcødé 🧠 " * 50_000
        memory.save_context({"input": huge}, {"output": "noted, 日本語"})
        ((_, text),) = self.stored_data(memory, history)
        assert text == f"input: {huge}\noutput: noted, 日本語"
