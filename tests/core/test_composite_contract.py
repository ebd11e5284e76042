"""The memory contract, run against the composite and fixed memories.

``CombinedMemory`` saves to every member and shows them all; a read-only
memory shows another memory and saves nothing (LangChain's behaviour, on
purpose: a sub-chain must not write); ``SimpleMemory`` shows fixed values.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from memories import (
    BufferMemory,
    CombinedMemory,
    InvalidInputError,
    MissingKeyError,
    ReadOnlySharedMemory,
    SimpleMemory,
    WindowMemory,
)
from memories.core.base import BaseMemory
from memories.stores.history import ChatHistory, InMemoryHistory
from tests.contract.memory_contract import MakeMemory, MemoryContract


class TestCombinedMemoryContract(MemoryContract):
    memory_type = "combined"
    supports_return_messages = False  # each member has its own return_messages

    @pytest.fixture
    def make_memory(self) -> MakeMemory:
        return lambda history: CombinedMemory(
            memories=[
                BufferMemory(chat_memory=history),
                WindowMemory(k=1, memory_key="recent"),  # its own history
            ]
        )

    def stored_data(self, memory: BaseMemory, history: ChatHistory) -> Any:
        """Every member's chat log."""
        assert isinstance(memory, CombinedMemory)
        return [[e.message for e in m.chat_memory.entries()] for m in memory.leaves()]  # type: ignore[attr-defined]

    def test_unicode_and_huge_input_round_trip(
        self, make_memory: MakeMemory, history: ChatHistory
    ) -> None:
        memory = make_memory(history)
        huge = "ünïcødé 🧠 " * 50_000
        memory.save_context({"input": huge}, {"output": "noted, 日本語"})
        for log in self.stored_data(memory, history):
            assert [m.content for m in log] == [huge, "noted, 日本語"]


class TestReadOnlySharedMemoryContract(MemoryContract):
    memory_type = "read_only"
    saves = False  # a read-only view writes nothing, by design
    shows_latest_turn = False
    supports_return_messages = False

    @pytest.fixture
    def make_memory(self) -> MakeMemory:
        return lambda history: ReadOnlySharedMemory(memory=BufferMemory(chat_memory=history))

    def stored_data(self, memory: BaseMemory, history: ChatHistory) -> Any:
        """The shared memory's chat log (which a read-only view must never write)."""
        return [e.message for e in history.entries()]


class TestSimpleMemoryContract(MemoryContract):
    memory_type = "simple"
    saves = False  # fixed values: a run changes nothing
    shows_latest_turn = False
    supports_return_messages = False

    @pytest.fixture
    def history_factory(self) -> Callable[[str], ChatHistory]:
        return lambda session_id: InMemoryHistory(session_id=session_id)  # it uses none

    @pytest.fixture
    def make_memory(self) -> MakeMemory:
        return lambda history: SimpleMemory(memories={"persona": "a patient tutor"})

    def stored_data(self, memory: BaseMemory, history: ChatHistory) -> Any:
        """Its fixed values are all it holds."""
        assert isinstance(memory, SimpleMemory)
        return dict(memory.memories)


def test_a_turn_one_member_rejects_is_written_by_none() -> None:
    """Issue 10's reproducer: the first member used to store the turn before the second failed."""
    first = BufferMemory(memory_key="a")
    memory = CombinedMemory(memories=[first, WindowMemory(memory_key="b", input_key="question")])
    with pytest.raises(MissingKeyError, match="question"):
        memory.save_context({"input": "hi"}, {"output": "hello"})
    assert first.chat_memory.entries() == []


class _Failing(SimpleMemory):
    """A member whose load fails with its name, the async one after ``wait`` seconds."""

    wait: float = 0.0

    def load_memory_variables(self, inputs: dict[str, Any]) -> dict[str, Any]:
        raise RuntimeError(next(iter(self.memories)))

    async def aload_memory_variables(self, inputs: dict[str, Any]) -> dict[str, Any]:
        await asyncio.sleep(self.wait)
        return self.load_memory_variables(inputs)


def test_a_failed_load_raises_the_first_members_error_sync_or_async() -> None:
    """The async members load at once: the error raised was the one that came first in time."""
    memory = CombinedMemory(
        memories=[_Failing(memories={"slow": ""}, wait=0.05), _Failing(memories={"quick": ""})]
    )
    with pytest.raises(RuntimeError, match="slow"):
        memory.load_memory_variables({"input": "hi"})
    with pytest.raises(RuntimeError, match="slow"):
        asyncio.run(memory.aload_memory_variables({"input": "hi"}))


def test_inputs_that_are_not_a_dict_are_an_input_error_not_an_attribute_error() -> None:
    memory = CombinedMemory(memories=[BufferMemory()])
    with pytest.raises(InvalidInputError, match="must be dicts, got str"):
        memory.save_context("hi", {"output": "hello"})  # type: ignore[arg-type]
