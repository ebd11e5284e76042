"""The memory contract, run against VectorMemory.

A vector memory keeps no chat log: the contract's history only names the
namespace, so the suite runs on one history kind. It recalls by relevance,
not recency, so "the latest turn is shown" does not apply, and the
round-trip of a huge input is checked in the store instead of the log.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from memories import VectorMemory
from memories.history import ChatHistory, InMemoryHistory
from tests.contract.memory_contract import TURNS, MakeMemory, MemoryContract, run_turns
from tests.vector.conftest import MakeVector


class TestVectorMemoryContract(MemoryContract):
    shows_latest_turn = False  # recall is by relevance to the input
    supports_return_messages = False  # LangChain's class has return_docs instead

    @pytest.fixture
    def history_factory(self) -> Callable[[str], ChatHistory]:
        return lambda session_id: InMemoryHistory(session_id=session_id)

    @pytest.fixture
    def make_memory(self, make_vector: MakeVector) -> MakeMemory:
        return lambda history: make_vector(namespace=("contract", history.session_id))

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
