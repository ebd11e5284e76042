"""The memory contract, run against ProfileMemory.

A profile keeps no chat log: it learns from turns and shows a document. So
the contract's history only names the namespace, the suite runs on one
history kind, and two checks that read the chat log are restated for what a
profile stores (the queued and recorded turns).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from memories import ConfigError, ProfileMemory, create_memory
from memories.core.base import BaseMemory
from memories.stores.history import ChatHistory, InMemoryHistory
from tests.contract.memory_contract import TURNS, MakeMemory, MemoryContract, loaded, run_turns
from tests.profile.fakes import NotingChatModel


class TestProfileMemoryContract(MemoryContract):
    memory_type = "profile"
    shows_latest_turn = False  # it shows what the model made of the turns

    @pytest.fixture
    def history_factory(self) -> Callable[[str], ChatHistory]:
        return lambda session_id: InMemoryHistory(session_id=session_id)

    @pytest.fixture
    def make_memory(self, tmp_path: Path) -> MakeMemory:
        url = f"sqlite:///{tmp_path / 'profiles.db'}"
        return lambda history: ProfileMemory(
            llm=NotingChatModel(),
            url=url,
            namespace=(history.session_id,),
            memory_key="history",
        )

    def stored_data(self, memory: BaseMemory, history: ChatHistory) -> Any:
        """The profile's document, its queued turns and its recorded changes."""
        assert isinstance(memory, ProfileMemory)
        queued = memory.store.pending(memory.namespace, memory.key)
        changes = memory.history()
        return (
            memory.get(),
            [[m.content for m in turn.messages] for turn in queued],
            [(c.version, c.kind, c.error) for c in changes],
        )

    def test_config_round_trips(
        self, make_memory: MakeMemory, history: ChatHistory, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        memory = make_memory(history)
        with pytest.raises(ConfigError, match="has no config form"):
            memory.to_config()  # the fake model is an object
        # A model name is resolved at construction; no provider package is installed here.
        monkeypatch.setattr("memories.kernel.llm.resolve_llm", lambda spec, **_: NotingChatModel())
        named = memory.model_copy(update={"llm": "openai:gpt-4o-mini"})
        config = named.to_config()
        assert create_memory(config).to_config() == config

    def test_unicode_and_huge_input_round_trip(
        self, make_memory: MakeMemory, history: ChatHistory
    ) -> None:
        memory = make_memory(history)
        assert isinstance(memory, ProfileMemory)
        huge = "ünïcødé 🧠 " * 50_000
        memory.save_context({"input": huge}, {"output": "noted, 日本語"})
        (change,) = memory.history()
        assert [m.content for m in change.turns[0]] == [huge, "noted, 日本語"]
        run_turns(memory, TURNS[:1])
        assert TURNS[0][0] in str(loaded(memory))
