"""Same arguments, same prompts, same outputs as LangChain's summary memories."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import pytest
from langchain_core.chat_history import InMemoryChatMessageHistory
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.prompts import PromptTemplate

from memories import (
    ConversationSummaryBufferMemory,
    ConversationSummaryMemory,
    InMemoryHistory,
    SummaryBufferMemory,
    SummaryMemory,
)
from memories.kernel.tokens import load_encoding
from tests.summary.fakes import ScriptedLLM

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::UserWarning")

#: The page whose table quotes the call counts measured below.
SUMMARIES_PAGE = Path(__file__).resolve().parents[2] / "docs" / "memories" / "summaries.md"

TURNS = [(f"question {i}: what about cats?", f"answer {i}: cats are fine.") for i in range(7)]


def counting_llm() -> ScriptedLLM:
    """A fake LLM that counts tokens offline, as LangChain's memories count them."""
    encoding = load_encoding()
    return ScriptedLLM(custom_get_token_ids=lambda text: encoding.encode(text))


def classic(name: str, **kwargs: Any) -> Any:
    import langchain_classic.memory as lc

    return getattr(lc, name)(**kwargs)


def run(memory: Any, turns: list[tuple[str, str]] = TURNS) -> None:
    for question, answer in turns:
        memory.save_context({"input": question}, {"output": answer})


def test_the_langchain_names_are_our_classes() -> None:
    assert ConversationSummaryMemory is SummaryMemory
    # Under LangChain's name the summary buffer folds as LangChain's does.
    assert issubclass(ConversationSummaryBufferMemory, SummaryBufferMemory)
    assert ConversationSummaryBufferMemory().low_water is None
    assert SummaryBufferMemory().low_water == 0.4


#: Turns of uneven length: some fit several to the limit, some alone pass a small one.
UNEVEN = [
    ("hi", "hello there"),
    ("my name is Maya and I live in Lisbon with two cats", "nice to meet you Maya"),
    ("what is the capital of France?", "Paris, a city on the Seine with many museums and cafes"),
    ("ok", "anything else?"),
    ("tell me a long story about a dragon who learned to bake bread in the mountains", "once"),
    ("thanks", "you are welcome"),
]


@pytest.mark.parametrize("limit", [8, 15, 30, 41, 60, 120])
@pytest.mark.parametrize("turns", [TURNS[:6], UNEVEN], ids=["even", "uneven"])
def test_under_langchains_name_the_summary_buffer_folds_exactly_as_langchain(
    limit: int, turns: list[tuple[str, str]]
) -> None:
    """Issue 11: same summary calls, same messages in each, same value after every turn."""
    theirs_llm, ours_llm = counting_llm(), counting_llm()
    theirs = classic("ConversationSummaryBufferMemory", llm=theirs_llm, max_token_limit=limit)
    ours = ConversationSummaryBufferMemory(
        llm=ours_llm, max_token_limit=limit, token_counter=ours_llm
    )
    for turn in turns:
        run(theirs, [turn])
        run(ours, [turn])
        assert ours.load_memory_variables({}) == theirs.load_memory_variables({})
        assert ours.moving_summary_buffer == theirs.moving_summary_buffer
    assert ours_llm.prompts == theirs_llm.prompts  # each call got the same messages
    assert ours.llm_calls == theirs_llm.calls == len(theirs_llm.prompts)


def test_the_short_name_batches_folds_langchains_name_does_not() -> None:
    """The measured difference docs/memories/summaries.md's table quotes: LLM calls, 40 turns."""
    turns = [
        (f"question {i}: what about cats and dogs?", f"answer {i}: both fine.") for i in range(40)
    ]
    calls = {}
    for name, memory_class in [
        ("short", SummaryBufferMemory),
        ("langchain", ConversationSummaryBufferMemory),
    ]:
        llm = counting_llm()
        memory = memory_class(llm=llm, max_token_limit=100, token_counter=llm)
        run(memory, turns)
        calls[name] = memory.llm_calls
    theirs_llm = counting_llm()
    run(classic("ConversationSummaryBufferMemory", llm=theirs_llm, max_token_limit=100), turns)
    assert calls["langchain"] == theirs_llm.calls
    assert calls["short"] < calls["langchain"] / 2, calls
    row = re.search(
        r"\| summary calls, 40 turns at limit 100 \| (\d+) \| (\d+) \(LangChain: (\d+)\) \|",
        SUMMARIES_PAGE.read_text(encoding="utf-8"),
    )
    assert row, f"{SUMMARIES_PAGE} lost the table row of 40 turns at limit 100"
    assert [int(n) for n in row.groups()] == [calls["short"], calls["langchain"], theirs_llm.calls]


@pytest.mark.parametrize("return_messages", [False, True])
def test_summary_memory_sends_the_same_prompts_and_shows_the_same_value(
    return_messages: bool,
) -> None:
    theirs_llm, ours_llm = ScriptedLLM(), ScriptedLLM()
    theirs = classic("ConversationSummaryMemory", llm=theirs_llm, return_messages=return_messages)
    ours = SummaryMemory(llm=ours_llm, return_messages=return_messages)
    assert ours.load_memory_variables({}) == theirs.load_memory_variables({})
    for turn in TURNS[:4]:
        run(theirs, [turn])
        run(ours, [turn])
        assert ours.load_memory_variables({}) == theirs.load_memory_variables({})
    assert ours_llm.prompts == theirs_llm.prompts
    assert ours.buffer == theirs.buffer == "summary 4"


def test_summary_buffer_memory_matches_langchain_when_it_folds_as_little() -> None:
    # Every exchange has the same size and the limit holds two of them plus
    # one token, so LangChain pops exactly one exchange per turn; with
    # low_water=1.0 ours folds exactly as much.
    theirs_llm, ours_llm = counting_llm(), counting_llm()
    limit = 2 * 20 + 1
    theirs = classic("ConversationSummaryBufferMemory", llm=theirs_llm, max_token_limit=limit)
    ours = SummaryBufferMemory(
        llm=ours_llm, max_token_limit=limit, low_water=1.0, token_counter=ours_llm
    )
    for turn in TURNS:
        run(theirs, [turn])
        run(ours, [turn])
        assert ours.load_memory_variables({}) == theirs.load_memory_variables({})
        assert ours.moving_summary_buffer == theirs.moving_summary_buffer
    assert ours_llm.prompts == theirs_llm.prompts
    assert ours_llm.calls == ours.llm_calls == len(TURNS) - 2
    value = ours.load_memory_variables({})["history"]
    assert value.startswith("System: summary 5\nHuman: question 5")


def test_summary_buffer_messages_start_with_the_summary_message() -> None:
    llm = counting_llm()
    memory = SummaryBufferMemory(
        llm=llm, max_token_limit=41, low_water=1.0, token_counter=llm, return_messages=True
    )
    run(memory, TURNS[:3])
    value = memory.load_memory_variables({})["history"]
    assert value[0] == SystemMessage(content="summary 1")
    assert [type(m) for m in value[1:]] == [HumanMessage, AIMessage] * 2


def test_summary_message_cls_is_used() -> None:
    memory = SummaryMemory(
        llm=ScriptedLLM(), summary_message_cls=HumanMessage, return_messages=True
    )
    run(memory, TURNS[:1])
    assert memory.load_memory_variables({})["history"] == [HumanMessage(content="summary 1")]


def test_empty_summary_buffer_shows_no_summary_message() -> None:
    memory = SummaryBufferMemory(llm=ScriptedLLM(), return_messages=True)
    run(memory, TURNS[:1])
    assert all(not isinstance(m, SystemMessage) for m in memory.buffer)


def test_a_prompt_without_the_two_variables_is_refused_with_langchains_error() -> None:
    bad = PromptTemplate.from_template("Summarize {lines}")
    with pytest.raises(ValueError, match="Got unexpected prompt input variables") as ours:
        SummaryMemory(llm=ScriptedLLM(), prompt=bad)
    with pytest.raises(ValueError) as theirs:
        classic("ConversationSummaryMemory", llm=ScriptedLLM(), prompt=bad)
    expected = "The prompt expects ['lines'], but it should have"
    assert expected in str(ours.value) and expected in str(theirs.value)
    with pytest.raises(ValueError, match="Got unexpected prompt input variables"):
        SummaryBufferMemory(llm=ScriptedLLM(), prompt=bad)


def test_a_custom_prompt_is_filled_with_summary_and_new_lines() -> None:
    llm = ScriptedLLM()
    prompt = PromptTemplate.from_template("Old: {summary}\nNew:\n{new_lines}\nShorter:")
    memory = SummaryMemory(llm=llm, prompt=prompt, human_prefix="User", ai_prefix="Bot")
    memory.buffer = "They met."
    run(memory, TURNS[:1])
    assert llm.prompts == [
        f"Old: They met.\nNew:\nUser: {TURNS[0][0]}\nBot: {TURNS[0][1]}\nShorter:"
    ]


def test_predict_new_summary_is_langchains_method() -> None:
    theirs_llm, ours_llm = ScriptedLLM(), ScriptedLLM()
    messages: list[BaseMessage] = [HumanMessage("I am Ann."), AIMessage("Hi Ann.")]
    theirs = classic("ConversationSummaryMemory", llm=theirs_llm)
    ours = SummaryMemory(llm=ours_llm)
    assert ours.predict_new_summary(messages, "Before.") == theirs.predict_new_summary(
        messages, "Before."
    )
    got = asyncio.run(ours.apredict_new_summary(messages, "Before."))
    assert got == "summary 2"
    assert ours_llm.prompts[0] == theirs_llm.prompts[0]


def test_from_messages_summarizes_an_existing_history_step_by_step() -> None:
    def filled() -> InMemoryChatMessageHistory:
        history = InMemoryChatMessageHistory()
        for question, answer in TURNS[:3]:
            history.add_user_message(question)
            history.add_ai_message(answer)
        return history

    theirs_llm, ours_llm = ScriptedLLM(), ScriptedLLM()
    theirs = classic("ConversationSummaryMemory", llm=theirs_llm).from_messages(
        llm=theirs_llm, chat_memory=filled(), summarize_step=2
    )
    ours = SummaryMemory.from_messages(llm=ours_llm, chat_memory=filled(), summarize_step=2)
    assert ours_llm.prompts == theirs_llm.prompts and ours_llm.calls == 3
    assert ours.buffer == theirs.buffer == "summary 3"
    assert ours.load_memory_variables({}) == theirs.load_memory_variables({})


def test_langchain_initial_summary_arguments_are_accepted() -> None:
    summary = SummaryMemory(llm=ScriptedLLM(), buffer="They met before.")
    assert summary.buffer == "They met before."
    assert summary.load_memory_variables({}) == {"history": "They met before."}
    buffer = SummaryBufferMemory(llm=ScriptedLLM(), moving_summary_buffer="They met before.")
    assert buffer.moving_summary_buffer == "They met before."
    assert buffer.load_memory_variables({}) == {"history": "System: They met before."}


@pytest.mark.parametrize(
    ("name", "initial"),
    [
        ("ConversationSummaryMemory", "buffer"),
        ("ConversationSummaryBufferMemory", "moving_summary_buffer"),
    ],
)
@pytest.mark.parametrize("clear", ["clear", "aclear"])
def test_clear_empties_a_summary_given_at_construction_as_langchains_does(
    name: str, initial: str, clear: str
) -> None:
    """A summary restored with ``buffer=`` must not come back after ``clear()`` (it did)."""
    import memories

    theirs = classic(name, llm=counting_llm(), **{initial: "An old conversation."})
    ours = getattr(memories, name)(llm=counting_llm(), **{initial: "An old conversation."})
    theirs.clear()
    asyncio.run(ours.aclear()) if clear == "aclear" else ours.clear()
    assert getattr(ours, initial) == getattr(theirs, initial) == ""
    assert ours.load_memory_variables({}) == theirs.load_memory_variables({})
    for memory in (theirs, ours):
        run(memory, TURNS[:1])
    assert ours.llm.prompts == theirs.llm.prompts  # the new summary starts from nothing
    assert ours.load_memory_variables({}) == theirs.load_memory_variables({})


def test_assigning_the_summary_attributes_saves_the_summary() -> None:
    history = InMemoryHistory()
    memory = SummaryBufferMemory(llm=ScriptedLLM(), chat_memory=history)
    memory.moving_summary_buffer = "Set by hand."
    again = SummaryBufferMemory(llm=ScriptedLLM(), chat_memory=history)
    assert again.moving_summary_buffer == "Set by hand."


def test_async_save_updates_the_summary_unlike_langchains() -> None:
    theirs = classic("ConversationSummaryMemory", llm=ScriptedLLM())
    ours = SummaryMemory(llm=ScriptedLLM())

    async def turn(memory: Any) -> None:
        await memory.asave_context({"input": TURNS[0][0]}, {"output": TURNS[0][1]})

    asyncio.run(turn(theirs))
    asyncio.run(turn(ours))
    assert theirs.buffer == ""  # LangChain's asave_context never summarizes
    assert ours.buffer == "summary 1"
    assert asyncio.run(ours.abuffer()) == "summary 1"
