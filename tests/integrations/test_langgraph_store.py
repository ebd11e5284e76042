"""LangGraph store adapters, checked against LangGraph's own InMemoryStore behaviour."""

from __future__ import annotations

import pytest
from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore

from tests.integrations.store_contract import StoreContract, WordEmbeddings


class TestLangGraphInMemoryStore(StoreContract):
    """The reference: each check states what LangGraph's own store does."""

    @pytest.fixture
    def store(self) -> BaseStore:
        return InMemoryStore(index={"dims": WordEmbeddings.size, "embed": WordEmbeddings()})
