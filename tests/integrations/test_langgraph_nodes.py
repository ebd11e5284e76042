"""MemoryNodes in a compiled LangGraph graph with a checkpointer."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from memories.integrations.langgraph_nodes import MemoryNodes, MemoryState

from memories import (
    BufferMemory,
    CombinedMemory,
    ConfigError,
    InvalidInputError,
    SimpleMemory,
    WindowMemory,
)
from memories.testing import ScriptedChatModel


def build(nodes: MemoryNodes, model: ScriptedChatModel, checkpointer: Any = None) -> Any:
    def chatbot(state: MemoryState) -> dict[str, Any]:
        return {"messages": [model.invoke(nodes.prompt(state, system="Be brief."))]}

    graph = StateGraph(MemoryState)
    graph.add_node("load_memory", nodes.load)
    graph.add_node("chatbot", chatbot)
    graph.add_node("save_memory", nodes.save)
    graph.add_edge(START, "load_memory")
    graph.add_edge("load_memory", "chatbot")
    graph.add_edge("chatbot", "save_memory")
    graph.add_edge("save_memory", END)
    return graph.compile(checkpointer=checkpointer)


def config(thread: str) -> Any:
    return {"configurable": {"thread_id": thread}}


def test_graph_sees_the_window_and_saves_each_turn() -> None:
    model = ScriptedChatModel()
    nodes = MemoryNodes(lambda thread_id: WindowMemory(k=1))
    app = build(nodes, model, InMemorySaver())
    for text in ("one", "two", "three"):
        state = app.invoke({"messages": [HumanMessage(text)]}, config("a"))
    assert len(state["messages"]) == 6
    assert [m.type for m in model.prompts[-1]] == ["system", "human", "ai", "human"]
    assert [m.text for m in model.prompts[-1]][1::2] == ["two", "three"]
    assert nodes.memory_for("a").buffer_as_messages[0].text == "three"


def test_load_writes_memory_text_for_non_chat_memories() -> None:
    model = ScriptedChatModel()
    memory = CombinedMemory(memories=[BufferMemory(), SimpleMemory(memories={"user": "Ada"})])
    app = build(MemoryNodes(memory, header="## Memory"), model)
    state = app.invoke({"messages": [HumanMessage("hi")]}, config("a"))
    assert state["memory_text"] == "## Memory\nuser:\nAda"
    assert model.prompts[-1][0].text == "Be brief.\n\n## Memory\nuser:\nAda"


def test_as_text_puts_the_window_in_memory_text() -> None:
    model = ScriptedChatModel(responses=["hello"])
    memory = BufferMemory()
    app = build(MemoryNodes(memory, as_messages=False), model)
    app.invoke({"messages": [HumanMessage("hi")]}, config("a"))
    state = app.invoke({"messages": [HumanMessage("again")]}, config("a"))
    assert "memory_messages" not in state  # no conversation view: the thread is shown as is
    assert state["memory_text"].endswith("Human: hi\nAI: hello")
    assert [m.type for m in model.prompts[-1]] == ["system", "human"]  # no checkpointer


def test_async_graph_matches_sync() -> None:
    def run(use_async: bool) -> list[list[tuple[str, str]]]:
        model = ScriptedChatModel()
        app = build(MemoryNodes(lambda t: WindowMemory(k=2)), model, InMemorySaver())
        for text in ("one", "two", "three"):
            payload = {"messages": [HumanMessage(text)]}
            if use_async:
                asyncio.run(app.ainvoke(payload, config("x")))
            else:
                app.invoke(payload, config("x"))
        return [[(m.type, m.text) for m in p] for p in model.prompts]

    assert run(True) == run(False)


def test_threads_are_isolated() -> None:
    model = ScriptedChatModel()
    nodes = MemoryNodes(lambda t: BufferMemory())
    app = build(nodes, model)
    app.invoke({"messages": [HumanMessage("alice")]}, config("alice"))
    app.invoke({"messages": [HumanMessage("bob")]}, config("bob"))
    assert [m.text for m in model.prompts[-1]] == ["Be brief.", "bob"]


def test_a_factory_without_a_thread_id_is_a_clear_error() -> None:
    app = build(MemoryNodes(lambda t: BufferMemory()), ScriptedChatModel())
    with pytest.raises(ConfigError, match="thread_id"):
        app.invoke({"messages": [HumanMessage("hi")]})


def test_a_turn_with_no_answer_is_not_saved() -> None:
    memory = BufferMemory()
    nodes = MemoryNodes(memory)
    nodes.save.invoke({"messages": [AIMessage("x"), HumanMessage("no answer yet")]})
    assert memory.buffer_as_messages == []


@pytest.mark.parametrize("bad", ["notalist", [HumanMessage("hi"), "not a message"]])
def test_state_messages_not_a_list_of_messages_are_refused_by_both_nodes(bad: Any) -> None:
    """The load node raised a raw AttributeError; the save node saved nothing and said nothing."""
    memory = BufferMemory()
    nodes = MemoryNodes(memory, messages_key="chat")
    refused = r"^MemoryNodes takes state\['chat'\] as a list of LangChain messages; got"
    for node in (nodes.load, nodes.save):
        with pytest.raises(InvalidInputError, match=refused):
            node.invoke({"chat": bad})
        with pytest.raises(InvalidInputError, match=refused):
            asyncio.run(node.ainvoke({"chat": bad}))
    assert memory.buffer_as_messages == []


def test_a_node_edits_the_memory_with_remove_message() -> None:
    """Issue 14: the nodes take RemoveMessage (and replacements by id) as state updates."""
    from langchain_core.messages import RemoveMessage
    from langgraph.graph.message import REMOVE_ALL_MESSAGES

    model = ScriptedChatModel(responses=["ok"] * 8)
    memory = CombinedMemory(memories=[BufferMemory(memory_key="a"), WindowMemory(k=5)])
    nodes = MemoryNodes(memory)
    forget: list[Any] = []

    def forgetting(state: MemoryState) -> dict[str, Any]:
        return {"memory_edits": list(forget)} if forget else {}

    graph = StateGraph(MemoryState)
    graph.add_node("forget", forgetting)
    graph.add_node("load_memory", nodes.load)
    graph.add_node("chatbot", lambda s: {"messages": [model.invoke(nodes.prompt(s))]})
    graph.add_node("save_memory", nodes.save)
    graph.add_edge(START, "forget")
    graph.add_edge("forget", "load_memory")
    graph.add_edge("load_memory", "chatbot")
    graph.add_edge("chatbot", "save_memory")
    graph.add_edge("save_memory", END)
    app = graph.compile(checkpointer=InMemorySaver())

    app.invoke({"messages": [HumanMessage("my pin is 1234", id="secret")]}, config("t"))
    app.invoke({"messages": [HumanMessage("weather?", id="w")]}, config("t"))
    forget[:] = [RemoveMessage(id="secret"), HumanMessage("what is the weather?", id="w")]
    state = app.invoke({"messages": [HumanMessage("thanks", id="t")]}, config("t"))
    for member in memory.memories:
        texts = [m.text for m in member.buffer_as_messages]  # type: ignore[attr-defined]
        assert texts == ["ok", "what is the weather?", "ok", "thanks", "ok"]
    assert state["memory_edits"] == []  # applied once, then emptied
    # The thread keeps its own messages; the edits were for the memory.
    assert state["messages"][0].text == "my pin is 1234"

    forget[:] = [RemoveMessage(id=REMOVE_ALL_MESSAGES)]
    asyncio.run(app.ainvoke({"messages": [HumanMessage("fresh", id="f")]}, config("t")))
    assert [m.text for m in memory.memories[1].buffer_as_messages] == ["fresh", "ok"]  # type: ignore[attr-defined]

    forget[:] = [RemoveMessage(id="never-saved")]
    with pytest.raises(ValueError, match="never-saved"):
        app.invoke({"messages": [HumanMessage("again")]}, config("t"))
