"""The battery of checks every memory class passes, on every history backend.

A memory's test module subclasses :class:`MemoryContract` and provides a
``make_memory`` fixture: ``(history) -> memory``. The checks cover LangChain's
interface and output formats, async parity, clearing, configuration round
trips, bad input, and use inside a classic chain.
"""

from __future__ import annotations

import asyncio
import copy
import pickle
from collections.abc import Callable
from typing import Any, ClassVar

import pytest
from langchain_core.language_models import FakeListLLM
from langchain_core.messages import AIMessage, BaseMessage

from memories import ConfigError, InvalidInputError, LangChainHistory, create_memory
from memories.core.base import BaseMemory
from memories.kernel.capabilities import capabilities_of
from memories.stores.history import ChatHistory

MakeMemory = Callable[[ChatHistory], BaseMemory]

TURNS = [
    (f"question {i}: what about topic {i}?", f"answer {i}: topic {i} is fine.") for i in range(6)
]


def run_turns(memory: BaseMemory, turns: list[tuple[str, str]] = TURNS) -> None:
    for question, answer in turns:
        memory.save_context({"input": question}, {"output": answer})


async def arun_turns(memory: BaseMemory, turns: list[tuple[str, str]] = TURNS) -> None:
    for question, answer in turns:
        await memory.asave_context({"input": question}, {"output": answer})


def loaded(memory: BaseMemory) -> Any:
    variables = memory.load_memory_variables({"input": "next"})
    assert set(variables) == set(memory.memory_variables)
    return variables


class MemoryContract:
    """Subclass with a ``make_memory(history) -> memory`` fixture and the type it checks."""

    #: The registered config type this run covers (tests/core/test_contract_coverage.py
    #: fails when a registered type has no run).
    memory_type: str
    #: ``save_context`` stores the turn (False: a read-only or fixed memory, by design).
    saves = True
    #: Why the memory as this run makes it cannot be copied (an object it was given
    #: holds threads or locks), or "" when it can.
    not_copyable = ""
    #: The newest exchange must show up in what the memory loads.
    shows_latest_turn = True
    #: The memory can give messages instead of a string.
    supports_return_messages = True
    #: The memory as made by ``make_memory`` can be described by a config.
    configurable = True
    #: Memory variables whose value is a dict, not a string, in this memory's format
    #: (the entity memory's ``entities``, as LangChain's).
    dict_variables: frozenset[str] = frozenset()
    #: The turns the checks save: questions by default; a memory that keeps only what the
    #: user states (an offline collection) runs them on statements.
    turns: ClassVar[list[tuple[str, str]]] = TURNS

    @pytest.fixture
    def make_memory(self) -> MakeMemory:  # pragma: no cover - overridden
        raise NotImplementedError

    def stored_data(self, memory: BaseMemory, history: ChatHistory) -> Any:
        """Everything the memory has stored, read from its own store.

        The chat log for a memory that keeps one; a memory without a chat log
        (vector documents, profile rows) must override this, so that the
        "stored data untouched" check reads what it really stores.
        """
        if not capabilities_of(memory).chat_log:
            raise NotImplementedError(
                f"{type(self).__name__}: {type(memory).__name__} keeps no chat log; "
                "override stored_data() to read its own store."
            )
        return [e.message for e in history.entries()]

    def test_memory_variables_are_loaded(
        self, make_memory: MakeMemory, history: ChatHistory
    ) -> None:
        memory = make_memory(history)
        run_turns(memory, self.turns)
        variables = loaded(memory)
        strings = {k: v for k, v in variables.items() if k not in self.dict_variables}
        assert all(isinstance(v, str) for v in strings.values())
        assert all(isinstance(variables[k], dict) for k in self.dict_variables)

    def test_latest_turn_is_shown(self, make_memory: MakeMemory, history: ChatHistory) -> None:
        if not self.shows_latest_turn:
            pytest.skip("this memory does not show turns verbatim")
        memory = make_memory(history)
        run_turns(memory, self.turns)
        text = " ".join(str(v) for v in loaded(memory).values())
        assert self.turns[-1][0] in text and self.turns[-1][1] in text

    def test_async_does_what_sync_does(
        self, make_memory: MakeMemory, history_factory: Callable[[str], ChatHistory]
    ) -> None:
        sync_memory = make_memory(history_factory("sync"))
        async_memory = make_memory(history_factory("async"))
        run_turns(sync_memory, self.turns)
        asyncio.run(arun_turns(async_memory, self.turns))
        expected = sync_memory.load_memory_variables({"input": "next"})
        got = asyncio.run(async_memory.aload_memory_variables({"input": "next"}))
        assert got == expected
        assert loaded(async_memory) == expected

    def test_clear_forgets_everything(self, make_memory: MakeMemory, history: ChatHistory) -> None:
        memory = make_memory(history)
        empty = loaded(memory)
        run_turns(memory, self.turns)
        if self.saves:
            assert loaded(memory) != empty
        else:
            assert loaded(memory) == empty  # it saved nothing, as it says
        memory.clear()
        assert loaded(memory) == empty

    def test_aclear_forgets_everything(self, make_memory: MakeMemory, history: ChatHistory) -> None:
        memory = make_memory(history)
        empty = loaded(memory)
        run_turns(memory, self.turns)
        asyncio.run(memory.aclear())
        assert loaded(memory) == empty

    def test_copies_and_pickles_as_langchains_do(
        self, make_memory: MakeMemory, history: ChatHistory
    ) -> None:
        """``copy.deepcopy`` and ``pickle`` work on LangChain's classes; code relies on them."""
        if self.not_copyable:
            pytest.skip(self.not_copyable)
        memory = make_memory(history)
        run_turns(memory, self.turns[:2])
        expected = loaded(memory)
        assert loaded(copy.deepcopy(memory)) == expected
        assert loaded(pickle.loads(pickle.dumps(memory))) == expected

    def test_config_round_trips(self, make_memory: MakeMemory, history: ChatHistory) -> None:
        memory = make_memory(history)
        if isinstance(history, LangChainHistory) or not self.configurable:
            with pytest.raises(ConfigError, match="no config form"):
                memory.to_config()
            return
        config = memory.to_config()
        assert create_memory(config).to_config() == config

    #: Cases of the bad-input check that are valid input for this memory's format
    #: (each subclass that sets this says why).
    valid_inputs: frozenset[str] = frozenset()

    @pytest.mark.parametrize(
        ("case", "inputs", "outputs"),
        [
            ("none-input", {"input": None}, {"output": "ok"}),
            ("int-input", {"input": 42}, {"output": "ok"}),
            ("none-output", {"input": "ok"}, {"output": None}),
            ("object-output", {"input": "ok"}, {"output": object()}),
            ("no-input", {}, {"output": "ok"}),
            ("two-inputs", {"a": "x", "b": "y"}, {"output": "ok"}),
            ("two-outputs", {"input": "ok"}, {"x": "1", "y": "2"}),
            ("non-dict", "not a dict", {"output": "ok"}),
            ("not-content-blocks", {"input": [{"foo": 1}]}, {"output": "ok"}),
            ("not-content-blocks-out", {"input": "ok"}, {"output": AIMessage([{"a": 1}])}),
        ],
        ids=lambda value: value if isinstance(value, str) else "",
    )
    def test_bad_input_is_rejected_and_stored_data_untouched(
        self, make_memory: MakeMemory, history: ChatHistory, case: str, inputs: Any, outputs: Any
    ) -> None:
        if case in self.valid_inputs:
            pytest.skip(f"{case!r} is valid input for this memory's format")
        memory = make_memory(history)
        run_turns(memory, self.turns[:2])
        before = loaded(memory)
        stored = self.stored_data(memory, history)
        if self.saves:
            assert stored, "two turns were saved, so the store holds something to protect"
            with pytest.raises(InvalidInputError) as info:
                memory.save_context(inputs, outputs)
            assert str(info.value)  # the message says what was wrong
        else:
            memory.save_context(inputs, outputs)  # saves nothing, as LangChain's does
        assert self.stored_data(memory, history) == stored
        assert loaded(memory) == before

    def test_unicode_and_huge_input_round_trip(
        self, make_memory: MakeMemory, history: ChatHistory
    ) -> None:
        memory = make_memory(history)
        if not self.saves:
            pytest.skip("this memory stores nothing by design")
        huge = "ünïcødé 🧠 " * 50_000
        memory.save_context({"input": huge}, {"output": "noted, 日本語"})
        stored = [m.content for m in self.stored_data(memory, history)]
        assert stored[-2:] == [huge, "noted, 日本語"]
        run_turns(memory, self.turns[:1])
        if self.shows_latest_turn:
            assert self.turns[0][0] in str(loaded(memory))

    def test_return_messages_gives_messages(
        self, make_memory: MakeMemory, history: ChatHistory
    ) -> None:
        memory = make_memory(history)
        if not self.supports_return_messages:
            with pytest.raises(ValueError, match="return_messages"):
                memory.return_messages = True
            return
        memory.return_messages = True
        run_turns(memory, self.turns)
        value = loaded(memory)[memory.memory_variables[0]]
        assert isinstance(value, list) and all(isinstance(m, BaseMessage) for m in value)

    @pytest.mark.parametrize("mode", ["sync", "async"])
    def test_plugs_into_conversation_chain(
        self, make_memory: MakeMemory, history: ChatHistory, mode: str
    ) -> None:
        from langchain_classic.chains import ConversationChain

        memory = make_memory(history)
        if memory.memory_variables != ["history"]:
            pytest.skip("ConversationChain's prompt needs the 'history' variable")
        chain = ConversationChain(llm=FakeListLLM(responses=["first", "second"]), memory=memory)

        async def converse() -> dict[str, Any]:
            await chain.ainvoke({"input": "hello there"})
            return await chain.ainvoke({"input": "and again"})

        if mode == "sync":
            chain.invoke({"input": "hello there"})
            result = chain.invoke({"input": "and again"})
        else:
            result = asyncio.run(converse())
        assert result["response"] == "second"
        if self.shows_latest_turn:
            assert "hello there" in str(result["history"])
            assert "first" in str(result["history"])
