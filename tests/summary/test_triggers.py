"""``trigger=`` and ``keep=``: summarise on tokens, messages, a share of the context, a topic."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from memories import ConfigError, SummaryBufferMemory, SummaryMemory, create_memory
from tests.summary.fakes import ScriptedLLM
from tests.vector.conftest import WordEmbeddings


class WindowedLLM(ScriptedLLM):
    """A scripted summarizer that says how large its context window is."""

    @property
    def profile(self) -> dict[str, Any]:  # type: ignore[override]
        return {"max_input_tokens": 200}


def talk(memory: Any, turns: int, topic: str = "soup", start: int = 0) -> None:
    for i in range(start, start + turns):
        memory.save_context({"input": f"about {topic} {i}"}, {"output": f"more {topic} {i}"})


def test_a_message_count_triggers_the_fold_and_keep_says_what_stays() -> None:
    llm = ScriptedLLM()
    memory = SummaryBufferMemory(
        llm=llm, max_token_limit=10_000, trigger=("messages", 6), keep=("messages", 2)
    )
    talk(memory, 3)
    assert llm.calls == 0  # 6 messages: not more than 6
    talk(memory, 1, start=3)
    assert llm.calls == 1
    shown = memory.load_memory_variables({})["history"]
    assert shown.splitlines() == ["System: summary 1", "Human: about soup 3", "AI: more soup 3"]
    status = memory.status()
    assert status.trigger == "messages 6" and status.unfolded_messages == 2


def test_any_trigger_of_a_list_fires_and_status_names_it() -> None:
    llm = ScriptedLLM()
    memory = SummaryBufferMemory(
        llm=llm, max_token_limit=10_000, trigger=[("messages", 100), ("tokens", 40)]
    )
    talk(memory, 4)
    assert llm.calls >= 1 and memory.status().trigger == "tokens 40"


def test_a_fraction_is_of_the_models_context_window() -> None:
    llm = WindowedLLM()
    memory = SummaryBufferMemory(
        llm=llm, max_token_limit=10_000, trigger=("fraction", 0.25), keep=("fraction", 0.1)
    )
    talk(memory, 3)
    assert llm.calls == 0  # 48 tokens: not past a quarter of 200
    talk(memory, 1, start=3)
    status = memory.status()
    assert llm.calls == 1 and status.trigger == "fraction 0.25"
    assert status.unfolded_tokens <= 20  # a tenth of 200 stays
    with pytest.raises(ConfigError, match="context window"):
        SummaryBufferMemory(llm=ScriptedLLM(), trigger=("fraction", 0.5))
    with pytest.raises(ConfigError, match="context window"):
        SummaryBufferMemory(trigger=("tokens", 100), keep=("fraction", 0.5))


def test_a_topic_change_triggers_a_fold_and_the_same_topic_does_not() -> None:
    llm = ScriptedLLM()
    memory = SummaryBufferMemory(
        llm=llm,
        max_token_limit=10_000,
        trigger=("topic", 0.3),
        keep=("messages", 2),
        topic_embeddings=WordEmbeddings(),
    )
    for i in range(4):
        memory.save_context(
            {"input": f"how long do I simmer the tomato soup {i}"},
            {"output": f"simmer the tomato soup for {10 + i} minutes"},
        )
    assert llm.calls == 0
    memory.save_context(
        {"input": "explain quantum entanglement"}, {"output": "particles share one state"}
    )
    assert llm.calls == 1 and memory.status().trigger == "topic 0.3"
    shown = memory.load_memory_variables({})["history"]
    assert shown.splitlines()[1:] == [
        "Human: explain quantum entanglement",
        "AI: particles share one state",
    ]


def test_keep_never_separates_a_tool_call_from_its_result() -> None:
    memory = SummaryBufferMemory(
        llm=ScriptedLLM(),
        max_token_limit=10_000,
        trigger=("messages", 5),
        keep=("messages", 2),
        return_messages=True,
    )
    call = {"name": "weather", "args": {"city": "Lyon"}, "id": "c1", "type": "tool_call"}
    memory.save_context({"input": "hello"}, {"output": "hi"})
    memory.save_messages(
        [
            HumanMessage("weather in Lyon?"),
            AIMessage("", tool_calls=[call]),
            ToolMessage("18C", tool_call_id="c1"),
            AIMessage("18C in Lyon."),
        ]
    )
    shown = memory.load_memory_variables({})["history"]
    # Keeping the last 2 messages would start at the tool result: the whole exchange stays.
    assert isinstance(shown[0], SystemMessage)
    assert [type(m) for m in shown[1:]] == [HumanMessage, AIMessage, ToolMessage, AIMessage]


def test_a_summary_memory_with_a_trigger_folds_only_when_it_fires() -> None:
    llm = ScriptedLLM()
    memory = SummaryMemory(llm=llm, trigger=("messages", 4))
    talk(memory, 2)
    assert llm.calls == 0
    talk(memory, 1)
    assert llm.calls == 1 and memory.load_memory_variables({})["history"] == "summary 1"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"trigger": ("tokens", 0)}, "at least 1"),
        ({"trigger": ("lines", 3)}, "not one of"),
        ({"trigger": ("topic", 2)}, r"in \(0, 1\]"),
        ({"trigger": "tokens"}, "takes pairs"),
        ({"trigger": []}, "empty list"),
        ({"keep": ("topic", 0.5)}, "not one of"),
        ({"trigger": ("messages", True)}, "needs a number"),
        ({"trigger": ("tokens", float("inf"))}, "whole number"),
        ({"keep": ("messages", float("nan"))}, "whole number"),
        ({"trigger": ("tokens", 2.5)}, "whole number"),
    ],
)
def test_bad_triggers_and_keeps_are_refused_by_name(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        SummaryBufferMemory(**options)


def test_triggers_round_trip_through_config() -> None:
    memory = SummaryBufferMemory(
        max_token_limit=300, trigger=[("tokens", 200), ("messages", 30)], keep=("messages", 6)
    )
    config = memory.to_config()
    assert config["trigger"] == [["tokens", 200], ["messages", 30]]
    assert config["keep"] == ["messages", 6]
    assert create_memory(config).to_config() == config


def test_without_keep_a_buffer_folds_down_to_low_water_of_what_fired() -> None:
    llm = ScriptedLLM()
    memory = SummaryBufferMemory(llm=llm, max_token_limit=10_000, trigger=("tokens", 40))
    talk(memory, 3)  # 48 tokens > 40: fold down to 0.4 x 40 = 16 tokens
    status = memory.status()
    assert llm.calls == 1 and status.unfolded_tokens <= 16 and status.unfolded_messages == 2
