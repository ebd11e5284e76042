"""Summary memories pass the shared memory contract and round-trip through configs."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from langchain_core.prompts import PromptTemplate

import memories
from memories import (
    ConfigError,
    ConversationSummaryBufferMemory,
    InMemoryHistory,
    SummaryBufferMemory,
    SummaryMemory,
    create_memory,
)
from memories.core.config import MEMORY_TYPES
from memories.kernel.background import Debouncer
from tests.contract.memory_contract import MakeMemory, MemoryContract
from tests.summary.fakes import ScriptedLLM


class TestSummaryBufferMemoryContract(MemoryContract):
    memory_type = "summary_buffer"

    @pytest.fixture
    def make_memory(self) -> MakeMemory:
        return lambda history: SummaryBufferMemory(chat_memory=history, max_token_limit=60)


class TestSummaryBufferMemoryWithLLMContract(MemoryContract):
    memory_type = "summary_buffer"
    not_copyable = "the test's scripted model holds a threading.Event"

    @pytest.fixture
    def make_memory(self) -> MakeMemory:
        return lambda history: SummaryBufferMemory(
            llm=ScriptedLLM(default="They talked."), chat_memory=history, max_token_limit=60
        )

    def test_config_round_trips(self, make_memory: MakeMemory, history: Any) -> None:
        # A model object has no config form (tested below with a config-able history).
        with pytest.raises((ConfigError, NotImplementedError)):
            make_memory(history).to_config()


class TestConversationSummaryBufferMemoryContract(MemoryContract):
    """LangChain's name: LangChain's folding rule (message by message, no low-water)."""

    memory_type = "conversation_summary_buffer"

    @pytest.fixture
    def make_memory(self) -> MakeMemory:
        return lambda history: ConversationSummaryBufferMemory(
            chat_memory=history, max_token_limit=60
        )


class TestSummaryMemoryContract(MemoryContract):
    memory_type = "summary"
    # The value is a summary: with no LLM, an extract of the most informative
    # sentences, which need not include the last exchange.
    shows_latest_turn = False

    @pytest.fixture
    def make_memory(self) -> MakeMemory:
        return lambda history: SummaryMemory(chat_memory=history)


class TestBackgroundSummaryBufferContract(MemoryContract):
    memory_type = "summary_buffer"
    not_copyable = "the Debouncer it was given runs threads"
    configurable = False  # a scheduler object has no config form

    # Folds wait for a quiet period longer than any test, so every check sees
    # the hot path alone: no LLM call, the newest turns within the limit.
    @pytest.fixture
    def make_memory(self) -> Iterator[MakeMemory]:
        scheduler = Debouncer(delay=60.0)

        def make(history: Any) -> SummaryBufferMemory:
            return SummaryBufferMemory(
                chat_memory=history,
                max_token_limit=60,
                summarize="background",
                debounce=60.0,
                scheduler=scheduler,
            )

        yield make
        assert scheduler.close(timeout=10)
        assert scheduler.status().failed == 0


def test_registered_and_exported() -> None:
    assert MEMORY_TYPES["summary"][:2] == ("memories.short_term.summary.memory", "SummaryMemory")
    assert MEMORY_TYPES["summary_buffer"][:2] == (
        "memories.short_term.summary.memory",
        "SummaryBufferMemory",
    )
    for name in (
        "SummaryMemory",
        "SummaryBufferMemory",
        "ConversationSummaryMemory",
        "ConversationSummaryBufferMemory",
    ):
        assert name in memories.__all__
    assert memories.__all__ == sorted(memories.__all__)


def test_a_full_config_round_trips() -> None:
    config = {
        "type": "summary_buffer",
        "max_token_limit": 300,
        "low_water": 0.5,
        "token_counter": "chars",
        "prompt": "Old: {summary}\nNew: {new_lines}\nSummary:",
        "summary_message_cls": "human",
        "moving_summary_buffer": "They met.",
        "max_summary_tokens": 80,
        "summarize": "background",
        "debounce": 2.5,
        "llm_timeout": 30.0,
        "history": {"type": "memory", "session_id": "u1"},
    }
    memory = create_memory(config)
    assert memory.summary_message_cls is HumanMessage
    assert isinstance(memory.prompt, PromptTemplate)
    assert memory.moving_summary_buffer == "They met."
    out = memory.to_config()
    assert out == {
        "type": "summary_buffer",
        "max_token_limit": 300,
        "low_water": 0.5,
        "token_counter": "chars",
        "prompt": "Old: {summary}\nNew: {new_lines}\nSummary:",
        "summary_message_cls": "human",
        "initial_summary": "They met.",
        "max_summary_tokens": 80,
        "summarize": "background",
        "debounce": 2.5,
        "llm_timeout": 30.0,
        "chat_memory": {"type": "memory", "session_id": "u1"},
    }
    assert create_memory(out).to_config() == out


def test_an_llm_given_by_name_round_trips(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[tuple[str, dict[str, Any]]] = []

    def fake_resolve(spec: Any, **options: Any) -> ScriptedLLM:
        made.append((spec, options))
        return ScriptedLLM(default="named")

    monkeypatch.setattr("memories.kernel.llm.resolve_llm", fake_resolve)
    memory = SummaryMemory(llm="ollama:llama3.2", llm_kwargs={"temperature": 0})
    config = memory.to_config()
    assert config == {"type": "summary", "llm": "ollama:llama3.2", "llm_kwargs": {"temperature": 0}}
    again = create_memory(config)
    assert made == [("ollama:llama3.2", {"temperature": 0})] * 2
    again.save_context({"input": "hi"}, {"output": "hello"})
    assert again.buffer == "named"


def test_a_model_object_has_no_config_form() -> None:
    memory = SummaryMemory(llm=ScriptedLLM())
    with pytest.raises(ConfigError, match="ScriptedLLM object, which has no config form"):
        memory.to_config()


def test_llm_kwargs_with_a_model_object_are_refused() -> None:
    with pytest.raises(ValueError, match="llm_kwargs configure a model given by name"):
        SummaryMemory(llm=ScriptedLLM(), llm_kwargs={"temperature": 0})


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"llm": "no-colon"}, "provider:model"),
        ({"llm": 42}, "provider:model"),
        ({"max_token_limit": 0}, "max_token_limit"),
        ({"low_water": 1.5}, "low_water"),
        ({"summary_message_cls": "robot"}, "Unknown summary_message_cls"),
        ({"summarize": "later"}, "summarize"),
        ({"debounce": -1}, "debounce: Input should be greater than or equal to 0, got -1"),
        ({"buffer": "x"}, "buffer"),
    ],
)
def test_bad_options_say_what_is_wrong(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        create_memory({"type": "summary_buffer", **options})


def test_the_initial_summary_argument_is_given_once() -> None:
    with pytest.raises(ValueError, match="not both"):
        SummaryBufferMemory(moving_summary_buffer="a", initial_summary="b")


def test_clear_keeps_the_configuration() -> None:
    memory = SummaryBufferMemory(max_token_limit=70, low_water=0.3, chat_memory=InMemoryHistory())
    config = memory.to_config()
    memory.save_context({"input": "hi"}, {"output": "hello"})
    memory.clear()
    assert memory.to_config() == config


def test_reassigned_arguments_take_effect() -> None:
    from langchain_core.language_models import FakeListLLM

    from memories import SummaryBufferMemory

    memory = SummaryBufferMemory(token_counter="chars")
    assert memory._model is None
    memory.llm = FakeListLLM(responses=["a summary"])
    assert memory._model is memory.llm
    memory.token_counter = "tiktoken"
    assert memory._counter.name == "tiktoken:cl100k_base"
