"""MemoryMiddleware in real create_agent agents, driven by a scripted chat model."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from memories.integrations.agents import MemoryMiddleware
from memories.integrations.langgraph_nodes import MemoryNodes

from memories import (
    BufferMemory,
    CombinedMemory,
    ConfigError,
    SimpleMemory,
    SQLiteHistory,
    TokenBufferMemory,
    WindowMemory,
    memory_factory,
)
from memories.testing import ScriptedChatModel


@tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def weather_call(call_id: str = "c1", city: str = "Paris") -> AIMessage:
    return AIMessage("", tool_calls=[{"name": "weather", "args": {"city": city}, "id": call_id}])


def kinds(messages: list[BaseMessage]) -> list[str]:
    return [m.type for m in messages]


def texts(messages: list[BaseMessage]) -> list[str]:
    return [m.text for m in messages]


def ask(agent: Any, text: str, thread: str = "t1") -> dict[str, Any]:
    return agent.invoke({"messages": [HumanMessage(text)]}, {"configurable": {"thread_id": thread}})


async def aask(agent: Any, text: str, thread: str = "t1") -> dict[str, Any]:
    return await agent.ainvoke(
        {"messages": [HumanMessage(text)]}, {"configurable": {"thread_id": thread}}
    )


class PerThread:
    """A memory factory that remembers what it made, for the tests to look at."""

    def __init__(self, make: Any = lambda: BufferMemory()) -> None:
        self.make = make
        self.made: dict[str, Any] = {}

    def __call__(self, thread_id: str) -> Any:
        self.made[thread_id] = self.make()
        return self.made[thread_id]


def test_tool_calling_turn_is_saved_whole_and_shown_in_the_next_run() -> None:
    model = ScriptedChatModel(
        responses=[weather_call(), "Sunny in Paris.", "You asked about Paris."]
    )
    memories = PerThread()
    agent = create_agent(
        model,
        [weather],
        system_prompt="Be brief.",
        middleware=[MemoryMiddleware(memories)],
        checkpointer=InMemorySaver(),
    )
    ask(agent, "Weather in Paris?")
    saved = memories.made["t1"].buffer_as_messages
    assert kinds(saved) == ["human", "ai", "tool", "ai"]
    assert saved[1].tool_calls[0]["id"] == "c1" and saved[2].tool_call_id == "c1"

    ask(agent, "What did I ask?")
    last_prompt = model.prompts[-1]
    assert kinds(last_prompt) == ["system", "human", "ai", "tool", "ai", "human"]
    assert texts(last_prompt)[0] == "Be brief."
    assert texts(last_prompt)[-1] == "What did I ask?"


def test_messages_mode_shows_the_memory_window_not_the_checkpointed_thread() -> None:
    model = ScriptedChatModel()
    agent = create_agent(
        model,
        [],
        middleware=[MemoryMiddleware(lambda thread_id: WindowMemory(k=1))],
        checkpointer=InMemorySaver(),
    )
    for text in ("one", "two", "three"):
        state = ask(agent, text)
    assert len(state["messages"]) == 6  # the checkpointer keeps the whole thread
    assert texts(model.prompts[-1])[0] == "two"
    assert kinds(model.prompts[-1]) == ["human", "ai", "human"]
    assert texts(model.prompts[-1])[-1] == "three"


def test_token_buffer_bounds_what_the_model_sees() -> None:
    model = ScriptedChatModel()
    agent = create_agent(
        model,
        [],
        middleware=[MemoryMiddleware(lambda t: TokenBufferMemory(max_token_limit=60))],
        checkpointer=InMemorySaver(),
    )
    for i in range(8):
        ask(agent, f"message number {i} with a few words in it")
    shown = model.prompts[-1][:-1]
    assert 0 < len(shown) < 14
    assert shown[0].type == "human"  # a window starts on a human message


def test_system_mode_adds_a_section_and_leaves_the_messages() -> None:
    model = ScriptedChatModel(responses=["Hello Ada.", "You are Ada."])
    agent = create_agent(
        model,
        [],
        system_prompt="Be brief.",
        middleware=[MemoryMiddleware(lambda t: BufferMemory(), inject="system", header="## Past")],
    )
    ask(agent, "I am Ada.")
    ask(agent, "Who am I?")
    system, *rest = model.prompts[-1]
    assert isinstance(system, SystemMessage)
    assert system.text == "Be brief.\n\n## Past\nhistory:\nHuman: I am Ada.\nAI: Hello Ada."
    assert texts(rest) == ["Who am I?"]  # no checkpointer: the run holds only its input


def test_no_system_message_is_added_when_the_memory_shows_no_text() -> None:
    model = ScriptedChatModel()
    agent = create_agent(model, [], middleware=[MemoryMiddleware(BufferMemory(), inject="system")])
    ask(agent, "first")
    assert kinds(model.prompts[0]) == ["human"]


def test_each_thread_has_its_own_memory() -> None:
    model = ScriptedChatModel()
    memories = PerThread()
    agent = create_agent(model, [], middleware=[MemoryMiddleware(memories)])
    ask(agent, "alice's secret", thread="alice")
    ask(agent, "bob here", thread="bob")
    ask(agent, "alice again", thread="alice")
    assert set(memories.made) == {"alice", "bob"}
    assert "alice's secret" in texts(model.prompts[-1])
    assert "bob here" not in texts(model.prompts[-1])
    assert texts(memories.made["bob"].buffer_as_messages)[0] == "bob here"


def test_tool_messages_false_keeps_only_the_question_and_answer() -> None:
    model = ScriptedChatModel(responses=[weather_call(), "Sunny."])
    memory = BufferMemory()
    agent = create_agent(
        model, [weather], middleware=[MemoryMiddleware(memory, tool_messages=False)]
    )
    ask(agent, "Weather in Paris?")
    saved = memory.buffer_as_messages
    assert kinds(saved) == ["human", "ai"]
    assert texts(saved) == ["Weather in Paris?", "Sunny."]


def test_tool_loop_inside_a_run_sees_its_own_tool_results() -> None:
    model = ScriptedChatModel(responses=["Hi.", weather_call("c2", "Oslo"), "Rainy? No, sunny."])
    memory = BufferMemory()
    agent = create_agent(model, [weather], middleware=[MemoryMiddleware(memory)])
    ask(agent, "hello")
    ask(agent, "Weather in Oslo?")
    second_call = model.prompts[-1]
    assert kinds(second_call) == ["human", "ai", "human", "ai", "tool"]
    assert isinstance(second_call[-1], ToolMessage) and second_call[-1].text == "sunny in Oslo"
    assert kinds(memory.buffer_as_messages) == ["human", "ai", "human", "ai", "tool", "ai"]


def test_async_agent_does_what_the_sync_agent_does() -> None:
    def run(use_async: bool) -> tuple[list[list[BaseMessage]], list[BaseMessage]]:
        model = ScriptedChatModel(responses=[weather_call(), "Sunny.", "Noted."])
        memory = WindowMemory(k=2)
        agent = create_agent(
            model, [weather], middleware=[MemoryMiddleware(memory)], checkpointer=InMemorySaver()
        )
        for text in ("Weather in Paris?", "I like rain.", "And now?"):
            if use_async:
                asyncio.run(aask(agent, text))
            else:
                ask(agent, text)
        return model.prompts, memory.buffer_as_messages

    sync_prompts, sync_saved = run(use_async=False)
    async_prompts, async_saved = run(use_async=True)
    strip = lambda ms: [(m.type, m.text, getattr(m, "tool_calls", None)) for m in ms]  # noqa: E731
    assert [strip(p) for p in async_prompts] == [strip(p) for p in sync_prompts]
    assert strip(async_saved) == strip(sync_saved)


def test_memory_in_sqlite_survives_a_new_agent(tmp_path: Path) -> None:
    def factory(thread_id: str) -> WindowMemory:
        return WindowMemory(k=3, chat_memory=SQLiteHistory(tmp_path / "m.db", session_id=thread_id))

    ask(create_agent(ScriptedChatModel(), [], middleware=[MemoryMiddleware(factory)]), "I am Ada.")
    model = ScriptedChatModel()
    ask(create_agent(model, [], middleware=[MemoryMiddleware(factory)]), "Who am I?")
    assert texts(model.prompts[-1])[0] == "I am Ada."


def test_non_chat_memories_go_to_the_system_message() -> None:
    model = ScriptedChatModel()
    memory = CombinedMemory(
        memories=[WindowMemory(k=2), SimpleMemory(memories={"persona": "The user is a pirate."})]
    )
    agent = create_agent(model, [], middleware=[MemoryMiddleware(memory)])
    ask(agent, "ahoy")
    ask(agent, "again")
    system, *rest = model.prompts[-1]
    assert "persona:\nThe user is a pirate." in system.text
    assert texts(rest)[0] == "ahoy" and texts(rest)[-1] == "again"


def test_a_factory_without_a_thread_id_is_a_clear_error() -> None:
    agent = create_agent(ScriptedChatModel(), [], middleware=[MemoryMiddleware(PerThread())])
    with pytest.raises(ConfigError, match="thread_id"):
        agent.invoke({"messages": [HumanMessage("hi")]})


@pytest.mark.parametrize("kind", [MemoryMiddleware, MemoryNodes])
def test_memory_for_fills_a_namespace_template_outside_a_run(tmp_path: Path, kind: Any) -> None:
    url = f"sqlite:///{tmp_path / 'p.db'}"
    profile = {
        "type": "profile",
        "policy": "manual",
        "url": url,
        "namespace": ["users", "{user_id}"],
    }
    made = kind(memory_factory(profile))
    assert made.memory_for("t1", user_id="ada").namespace == ("users", "ada")
    with pytest.raises(ConfigError, match="user_id"):
        made.memory_for("t1")


def test_bad_arguments_are_rejected() -> None:
    with pytest.raises(ConfigError, match="inject"):
        MemoryMiddleware(BufferMemory(), inject="prompt")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="thread_id -> memory"):
        MemoryMiddleware("buffer")  # type: ignore[arg-type]


def test_two_memory_middlewares_need_and_take_distinct_names() -> None:
    model = ScriptedChatModel()
    short = MemoryMiddleware(WindowMemory(k=1))
    persona = MemoryMiddleware(
        SimpleMemory(memories={"persona": "formal"}), inject="system", name="PersonaMemory"
    )
    agent = create_agent(model, [], middleware=[short, persona])
    ask(agent, "hi")
    assert "persona:\nformal" in model.prompts[-1][0].text


def test_a_memory_without_a_conversation_view_keeps_the_checkpointed_thread() -> None:
    model = ScriptedChatModel()
    persona = SimpleMemory(memories={"persona": "The user is a pirate."})
    agent = create_agent(
        model, [], middleware=[MemoryMiddleware(persona)], checkpointer=InMemorySaver()
    )
    ask(agent, "ahoy")
    ask(agent, "again")
    system, *rest = model.prompts[-1]
    assert "The user is a pirate." in system.text
    assert texts(rest)[0] == "ahoy" and texts(rest)[-1] == "again"


def test_summary_buffer_memory_puts_its_summary_in_the_system_message() -> None:
    from memories import SummaryBufferMemory

    model = ScriptedChatModel(responses=[weather_call(), "Sunny in Paris."])
    memory = SummaryBufferMemory(max_token_limit=80)
    agent = create_agent(
        model, [weather], middleware=[MemoryMiddleware(memory)], checkpointer=InMemorySaver()
    )
    ask(agent, "Weather in Paris? I am planning a long trip there with my sister Ines.")
    for i in range(4):
        ask(agent, f"Tell me fact number {i} about the Seine river and its many bridges.")
    system, *rest = model.prompts[-1]
    assert isinstance(system, SystemMessage)
    summary = system.text.split("## Memory\n", 1)[1].split("history:\n", 1)[1]
    assert summary.strip()  # the running summary of the folded turns
    assert len(rest) < len(memory.chat_memory.messages)  # older turns are folded away
    assert rest[0].type == "human" and rest[-1].text.startswith("Tell me fact number 3")
    assert all(m.text not in summary for m in rest if m.text)


def test_summary_memory_alone_replaces_the_thread_with_its_summary() -> None:
    from memories import SummaryMemory

    model = ScriptedChatModel()
    agent = create_agent(
        model,
        [],
        middleware=[MemoryMiddleware(SummaryMemory())],
        checkpointer=InMemorySaver(),
    )
    ask(agent, "I am Ada, a mathematician from London.")
    ask(agent, "Who am I?")
    system, *rest = model.prompts[-1]
    assert "Ada" in system.text
    assert texts(rest) == ["Who am I?"]


def patch_reply(*operations: dict[str, Any]) -> AIMessage:
    call = {"name": "update_profile", "args": {"operations": list(operations)}, "id": "p1"}
    return AIMessage("", tool_calls=[call])


def test_a_profile_with_a_window_shows_the_profile_and_keeps_the_window(tmp_path: Path) -> None:
    from memories import ProfileMemory

    updater = ScriptedChatModel(
        responses=[
            patch_reply({"op": "add", "path": "/name", "value": "Ada"}),
            patch_reply({"op": "add", "path": "/city", "value": "Paris"}),
        ],
        echo=False,
    )
    profile = ProfileMemory(
        llm=updater, namespace=("ada",), url=f"sqlite:///{tmp_path / 'p.db'}", format="json"
    )
    memory = CombinedMemory(memories=[WindowMemory(k=1), profile])
    model = ScriptedChatModel()
    agent = create_agent(
        model, [], middleware=[MemoryMiddleware(memory)], checkpointer=InMemorySaver()
    )
    ask(agent, "I'm Ada.")
    ask(agent, "I live in Paris.")
    ask(agent, "Where do I live?")
    system, *rest = model.prompts[-1]
    assert '"city": "Paris"' in system.text or '"city":"Paris"' in system.text
    assert texts(rest)[0] == "I live in Paris." and texts(rest)[-1] == "Where do I live?"
    assert profile.get() == {"name": "Ada", "city": "Paris"}
    assert len(updater.prompts) == 3  # one update per saved turn


def test_vector_recall_brings_back_an_old_turn_the_window_dropped(tmp_path: Path) -> None:
    from memories import VectorMemory

    vector = VectorMemory(path=str(tmp_path / "chroma"), namespace=("ada",), k=1)
    memory = CombinedMemory(memories=[WindowMemory(k=1, memory_key="recent"), vector])
    model = ScriptedChatModel()
    agent = create_agent(
        model, [], middleware=[MemoryMiddleware(memory)], checkpointer=InMemorySaver()
    )
    for text in ["My sister Ines lives in Porto.", "I like jazz.", "I run on Sundays."]:
        ask(agent, text)
    ask(agent, "Where does my sister live?")
    system, *rest = model.prompts[-1]
    assert "history:\ninput: My sister Ines lives in Porto." in system.text
    assert texts(rest)[0] == "I run on Sundays."  # the window: one exchange, then the question
    assert len(rest) == 3
