"""EntityMemory passes the memory contract (LangChain's interface, async parity, clearing...)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from memories import EntityMemory, create_memory
from memories.core.base import BaseMemory
from memories.stores.history import ChatHistory, InMemoryHistory
from tests.contract.memory_contract import TURNS, MakeMemory, MemoryContract, run_turns
from tests.entity_graph.fakes import GraphScript

#: Each contract turn makes the user ask about a topic.
SCRIPT = {
    question: [
        {"op": "relate", "subject": "User", "predicate": "asked_about", "object": f"topic {i}"}
    ]
    for i, (question, _) in enumerate(TURNS)
}


class TestEntityMemoryContract(MemoryContract):
    memory_type = "entity"
    shows_latest_turn = False  # it shows the entities and relations the turns made

    @pytest.fixture
    def history_factory(self) -> Callable[[str], ChatHistory]:
        return lambda session_id: InMemoryHistory(session_id=session_id)

    @pytest.fixture
    def make_memory(self, tmp_path: Path) -> MakeMemory:
        return lambda history: EntityMemory(
            url=f"sqlite:///{tmp_path / 'graph.db'}",
            namespace=("contract", history.session_id),
            llm=GraphScript(script=SCRIPT),
            memory_key="history",
        )

    def stored_data(self, memory: BaseMemory, history: ChatHistory) -> Any:
        """The relations (current and ended), the entities and the queued turns."""
        assert isinstance(memory, EntityMemory)
        queued = memory.ledger.pending(memory.namespace, memory.key)
        return (
            sorted(
                (r.text(), r.invalid_at)
                for r in memory.store.recorded(memory.namespace).relations.values()
            ),
            [e.name for e in memory.entities()],
            [[m.content for m in t.messages] for t in queued],
        )

    def test_config_round_trips(self, make_memory: MakeMemory, history: ChatHistory) -> None:
        """The memory as made, less its scripted model (an object: no config form)."""
        memory = make_memory(history)
        assert isinstance(memory, EntityMemory)
        config = memory.model_copy(update={"llm": None}).to_config()
        assert config["type"] == "entity"
        assert create_memory(config).to_config() == config

    def test_unicode_and_huge_input_round_trip(
        self, make_memory: MakeMemory, history: ChatHistory
    ) -> None:
        memory = make_memory(history)
        assert isinstance(memory, EntityMemory)
        huge = "ünïcødé 🧠 " * 50_000
        memory.save_context({"input": huge}, {"output": "noted, 日本語"})
        assert memory.status().pending == 0  # folded in (the script proposed nothing)
        run_turns(memory, TURNS[:1])
        assert "User asked_about topic 0" in str(memory.load_memory_variables({"input": "日本語"}))
