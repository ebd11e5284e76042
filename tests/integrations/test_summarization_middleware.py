"""Our SummarizationMiddleware beside LangChain's, on the same agent runs with tool calls."""

from __future__ import annotations

from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import SummarizationMiddleware as LangChainSummarization
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from memories import ConfigError, SummarizationMiddleware
from memories.testing import ScriptedChatModel
from tests.procedural.fakes import FlakyModel

QUESTIONS = ["weather in Lyon?", "and in Nice?", "thanks, which was warmer?"]


@tool
def weather(city: str) -> str:
    """The weather in a city."""
    return {"Lyon": "18C", "Nice": "23C"}.get(city, "unknown")


def call(city: str, i: int) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": "weather", "args": {"city": city}, "id": f"c{i}"}])


def agent_model() -> ScriptedChatModel:
    return ScriptedChatModel(
        responses=[
            call("Lyon", 1), AIMessage("18C in Lyon."),
            call("Nice", 2), AIMessage("23C in Nice."),
            AIMessage("Nice was warmer."),
        ],
        echo=False,
    )  # fmt: skip


def converse(middleware: Any, model: ScriptedChatModel) -> tuple[Any, dict[str, Any]]:
    agent = create_agent(model, [weather], middleware=[middleware], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    for question in QUESTIONS:
        agent.invoke({"messages": [HumanMessage(question)]}, config)
    return agent, agent.get_state(config).values


def paired(messages: list[BaseMessage]) -> bool:
    """Whether every tool result follows the AI message that made its call."""
    called: set[str] = set()
    for message in messages:
        if isinstance(message, AIMessage):
            called |= {c["id"] for c in message.tool_calls if c.get("id")}
        if isinstance(message, ToolMessage) and message.tool_call_id not in called:
            return False
    return True


def test_the_thread_keeps_every_message_where_langchains_replaces_them() -> None:
    ours_model, theirs_model = agent_model(), agent_model()
    summaries = ScriptedChatModel(responses=["asked Lyon's weather: 18C"], echo=True)
    _, ours = converse(
        SummarizationMiddleware(summaries, trigger=("messages", 5), keep=("messages", 3)),
        ours_model,
    )
    theirs_summaries = ScriptedChatModel(responses=["asked Lyon's weather: 18C"], echo=True)
    _, theirs = converse(
        LangChainSummarization(theirs_summaries, trigger=("messages", 5), keep=("messages", 3)),
        theirs_model,
    )
    assert len(ours["messages"]) == 10  # 3 questions, 2 tool calls and results, 3 answers
    assert len(theirs["messages"]) < 10  # LangChain's removed the summarised ones from the thread
    assert theirs["messages"][0].text.startswith("Here is a summary")
    assert ours["summary"].startswith("asked Lyon")
    last_prompt = ours_model.prompts[-1]
    shown = [m for m in last_prompt if m.type != "system"]
    assert shown[0].text.startswith("Here is a summary of the conversation to date:")
    assert shown[-1].text == "thanks, which was warmer?"
    assert all(paired([m for m in p if m.type != "system"][1:]) for p in ours_model.prompts)


def test_a_failing_summary_call_keeps_everything_and_the_run_goes_on() -> None:
    failing = FlakyModel(script=[RuntimeError("summary provider down")] * 10)
    model = agent_model()
    _, ours = converse(
        SummarizationMiddleware(failing, trigger=("messages", 5), keep=("messages", 3)), model
    )
    assert len(ours["messages"]) == 10 and "summary" not in ours
    assert ours["messages"][-1].text == "Nice was warmer."
    assert len(failing.prompts) >= 1  # it was tried, and retried on later model calls

    theirs_failing = FlakyModel(script=[RuntimeError("summary provider down")] * 10)
    with pytest.raises(RuntimeError, match="summary provider down"):
        converse(
            LangChainSummarization(theirs_failing, trigger=("messages", 5), keep=("messages", 3)),
            agent_model(),
        )


def test_older_argument_forms_map_to_the_new_ones_and_ambiguity_is_refused() -> None:
    model = ScriptedChatModel()
    legacy = SummarizationMiddleware(model, max_tokens_before_summary=500, messages_to_keep=4)
    assert [s.describe() for s in legacy.trigger] == ["tokens 500"]
    assert legacy.keep.describe() == "messages 4"
    with pytest.raises(ConfigError, match="not both"):
        SummarizationMiddleware(model, trigger=("tokens", 100), max_tokens_before_summary=500)
    with pytest.raises(ConfigError, match="not both"):
        SummarizationMiddleware(model, keep=("messages", 2), messages_to_keep=4)
    with pytest.raises(ConfigError, match="context window"):
        SummarizationMiddleware(model, trigger=("fraction", 0.8))
    with pytest.raises(ConfigError, match="not one of"):
        SummarizationMiddleware(model, trigger=("lines", 3))


def test_a_summariser_that_is_down_is_tried_with_backoff_not_before_every_model_call() -> None:
    """Each failed try may cost its timeout: 4 tries in 10 model calls, not 10; then it recovers."""
    down = RuntimeError("summary provider down")
    summaries = FlakyModel(script=[down] * 4 + ["the user counted to twelve"])
    questions = [f"question {i}" for i in range(12)]
    model = ScriptedChatModel(responses=[f"answer {i}" for i in range(12)], echo=False)
    middleware = SummarizationMiddleware(summaries, trigger=("messages", 5), keep=("messages", 2))
    agent = create_agent(model, [], middleware=[middleware], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    tried_at = []
    for i, question in enumerate(questions):
        before = len(summaries.prompts)
        agent.invoke({"messages": [HumanMessage(question)]}, config)
        if len(summaries.prompts) > before:
            tried_at.append(i)
    # The trigger fires from the fourth question on: tries at 3, 4, then after 1 and 3 skips.
    assert tried_at == [3, 4, 6, 10]
    state = agent.get_state(config).values
    assert state["summary_failures"] == 4 and "summary" not in state
    assert len(state["messages"]) == 24  # nothing was lost meanwhile
    # After 7 skipped calls (questions 11 to 17), the next try works and resets.
    for i in range(12, 19):
        agent.invoke({"messages": [HumanMessage(f"question {i}")]}, config)
    state = agent.get_state(config).values
    assert state["summary"] == "the user counted to twelve"
    assert state["summary_failures"] == 0 and state["summary_retry_in"] == 0


def test_an_async_run_folds_as_a_sync_one() -> None:
    import asyncio

    def middleware() -> SummarizationMiddleware:
        summaries = ScriptedChatModel(responses=["asked Lyon's weather: 18C"], echo=True)
        return SummarizationMiddleware(summaries, trigger=("messages", 5), keep=("messages", 3))

    _, ours = converse(middleware(), agent_model())
    agent = create_agent(
        agent_model(), [weather], middleware=[middleware()], checkpointer=InMemorySaver()
    )
    config = {"configurable": {"thread_id": "t"}}

    async def conversed() -> dict[str, Any]:
        for question in QUESTIONS:
            await agent.ainvoke({"messages": [HumanMessage(question)]}, config)
        return (await agent.aget_state(config)).values

    theirs = asyncio.run(conversed())
    assert theirs["summary"] == ours["summary"] and theirs["summary"].startswith("asked Lyon")
    assert [m.text for m in theirs["messages"]] == [m.text for m in ours["messages"]]
