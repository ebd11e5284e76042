"""The offline extractive summarizer, and the memories using it when no LLM is given."""

from __future__ import annotations

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from memories import SummaryBufferMemory, SummaryMemory
from memories.kernel.tokens import TiktokenCounter
from memories.short_term.summary.extractive import ExtractiveSummarizer

COUNT = TiktokenCounter()

CHAT: list[BaseMessage] = [
    HumanMessage("Hi there!"),
    AIMessage("Hello! How can I help you today?"),
    HumanMessage("My name is Priya and I work as a nurse in Toronto."),
    AIMessage("Nice to meet you, Priya. Nursing is demanding work."),
    HumanMessage("I am allergic to penicillin, so keep that in mind. Thanks."),
    AIMessage("Noted: you are allergic to penicillin."),
    HumanMessage("ok"),
    AIMessage("Sure."),
]


def tokens(text: str) -> int:
    return COUNT([SystemMessage(content=text)]) - COUNT([SystemMessage(content="")])


def test_informative_sentences_are_kept_and_chit_chat_dropped() -> None:
    summary = ExtractiveSummarizer(max_tokens=60)(CHAT, "")
    assert 'The human said: "My name is Priya and I work as a nurse in Toronto."' in summary
    assert "penicillin" in summary
    assert "Hi there" not in summary and '"ok"' not in summary and "Sure." not in summary


def test_the_summary_fits_the_budget() -> None:
    for budget in (10, 25, 60, 200):
        summary = ExtractiveSummarizer(max_tokens=budget)(CHAT, "")
        assert tokens(summary) <= budget


def test_sentences_are_quoted_in_their_order_with_their_speaker() -> None:
    summary = ExtractiveSummarizer(max_tokens=500)(CHAT, "")
    lines = summary.splitlines()
    # Issue 16: it reads as a summary (LangChain's "The human ..." style), not a transcript.
    assert all(line.startswith(('The human said: "', 'The AI said: "')) for line in lines)
    first = 'The human said: "My name is Priya and I work as a nurse in Toronto."'
    assert lines.index(first) < lines.index(
        'The human said: "I am allergic to penicillin, so keep that in mind."'
    )


def test_the_same_input_gives_the_same_summary() -> None:
    summarize = ExtractiveSummarizer(max_tokens=40)
    assert len({summarize(CHAT, "Human: I live in Oslo.") for _ in range(5)}) == 1


def test_earlier_summary_sentences_compete_with_new_ones() -> None:
    summarize = ExtractiveSummarizer(max_tokens=40)
    first = summarize(CHAT[:4], "")
    second = summarize(CHAT[4:], first)
    assert "Priya" in second and "penicillin" in second


def test_near_duplicates_are_kept_once() -> None:
    repeated: list[BaseMessage] = [HumanMessage("My flight to Lisbon leaves on Friday 9 May.")] * 3
    summary = ExtractiveSummarizer(max_tokens=200)(repeated, "")
    assert summary.count("Lisbon") == 1


def test_custom_speaker_names() -> None:
    summary = ExtractiveSummarizer(max_tokens=200)(
        CHAT[2:4], "", human_prefix="User", ai_prefix="Bot"
    )
    assert summary.startswith('The user said: "My name is Priya')


def test_nothing_to_summarize_keeps_the_old_summary() -> None:
    assert ExtractiveSummarizer()([], "Human: I live in Oslo.") == "Human: I live in Oslo."


def test_an_earlier_summary_is_read_back_with_its_speakers() -> None:
    """Its own lines, and lines in the earlier "Human: ..." form, keep their speaker."""
    summarize = ExtractiveSummarizer(max_tokens=200)
    old = 'The human said: "I live in Oslo."\nAI: Oslo has long winters.'
    again = summarize([HumanMessage("My sister Ines lives in Porto.")], old)
    assert again.splitlines() == [
        'The human said: "I live in Oslo."',
        'The AI said: "Oslo has long winters."',
        'The human said: "My sister Ines lives in Porto."',
    ]


def test_memories_without_an_llm_summarize_extractively() -> None:
    memory = SummaryMemory(max_summary_tokens=60)
    for human, ai in zip(CHAT[::2], CHAT[1::2], strict=True):
        memory.save_context({"input": human.content}, {"output": ai.content})
    assert "Toronto" in memory.buffer and "penicillin" in memory.buffer
    assert tokens(memory.buffer) <= 60


def test_summary_buffer_without_an_llm_keeps_recent_turns_and_facts() -> None:
    memory = SummaryBufferMemory(max_token_limit=60)
    for human, ai in zip(CHAT[::2], CHAT[1::2], strict=True):
        memory.save_context({"input": human.content}, {"output": ai.content})
    for i in range(4):
        memory.save_context({"input": f"Tell me about topic {i}."}, {"output": f"Topic {i} is ok."})
    value = memory.load_memory_variables({})["history"]
    assert value.startswith("System: ") and "Priya" in memory.moving_summary_buffer
    assert value.endswith("Human: Tell me about topic 3.\nAI: Topic 3 is ok.")
