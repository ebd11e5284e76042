"""entity_tools: an agent keeps entity summaries and relations, each thread its own."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, ToolMessage

from memories import (
    ConversationEntityMemory,
    ConversationKGMemory,
    SQLiteHistory,
    WindowMemory,
    entity_tools,
)
from memories.stores.entities.summaries import SQLEntityStore
from memories.stores.entities.triples import SQLEntityGraph
from memories.testing import ScriptedChatModel
from tests import needs
from tests.entities.fakes import RuleModel

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def call(tool: str, i: int, **args: Any) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": tool, "args": args, "id": f"call_{i}"}])


def thread(thread_id: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread_id}}


def answers(result: dict[str, Any]) -> list[str]:
    return [str(m.content) for m in result["messages"] if isinstance(m, ToolMessage)]


def entity_memory(tmp_path: Path, session: str) -> ConversationEntityMemory:
    url = f"sqlite:///{tmp_path / 'memories.db'}"
    return ConversationEntityMemory(
        llm=RuleModel(),
        chat_memory=SQLiteHistory(tmp_path / "chat.db", session_id=session),
        entity_store=SQLEntityStore(url, session_id=session),
    )


def kg_memory(tmp_path: Path, session: str) -> ConversationKGMemory:
    return ConversationKGMemory(
        llm=RuleModel(),
        chat_memory=SQLiteHistory(tmp_path / "chat.db", session_id=session),
        kg=SQLEntityGraph(f"sqlite:///{tmp_path / 'memories.db'}", session_id=session),
    )


def test_an_agent_keeps_entities_per_thread_and_never_sees_anothers(tmp_path: Path) -> None:
    agents = pytest.importorskip("langchain.agents", reason=needs.extra("langchain.agents"))
    model = ScriptedChatModel(
        responses=[
            call("manage_entity", 1, name="Jane", summary="Jane is the user's sister."),
            AIMessage("Noted."),
            call("search_entities", 2, query="sister"),
            AIMessage("Jane."),
            call("search_entities", 3, query="sister"),
            AIMessage("I don't know."),
        ],
        echo=False,
    )
    tools = entity_tools(lambda session: entity_memory(tmp_path, session), kind="entity")
    agent = agents.create_agent(model, tools)
    first = agent.invoke({"messages": [("user", "Jane is my sister")]}, thread("t1"))
    assert answers(first) == ["updated entity 'Jane'"]
    later = agent.invoke({"messages": [("user", "Who is my sister?")]}, thread("t1"))
    assert json.loads(answers(later)[0]) == [
        {"name": "Jane", "summary": "Jane is the user's sister."}
    ]
    other = agent.invoke({"messages": [("user", "Who is my sister?")]}, thread("t2"))
    assert json.loads(answers(other)[0]) == []
    # What the tool wrote is what the memory shows next turn.
    shown = entity_memory(tmp_path, "t1").load_memory_variables({"input": "Jane called"})
    assert shown["entities"] == {"Jane": "Jane is the user's sister."}


def test_manage_entity_keeps_versions_and_errors_come_back_as_answers(tmp_path: Path) -> None:
    memory = entity_memory(tmp_path, "s")
    manage, search = entity_tools(memory)
    config = thread("ignored: one memory given")
    assert manage.invoke({"name": "Tom", "summary": "Tom plays piano."}, config) == (
        "updated entity 'Tom'"
    )
    manage.invoke({"name": "Tom", "summary": "Tom plays piano and chess."}, config)
    assert manage.invoke({"name": "Tom", "action": "delete"}, config) == "deleted entity 'Tom'"
    assert [v.value for v in memory.knowledge_store.history("Tom")] == [
        "Tom plays piano.",
        "Tom plays piano and chess.",
        None,
    ]
    assert "nothing deleted" in manage.invoke({"name": "Tom", "action": "delete"}, config)
    assert manage.invoke({"name": " "}, config).startswith("Error: name must")
    assert manage.invoke({"name": "Tom"}, config).startswith("Error: update needs")
    assert search.invoke({"limit": 0}, config).startswith("Error: limit")
    assert search.invoke({"limit": 51}, config).startswith("Error: limit must be between 1 and 50")
    assert manage.invoke({"name": "x" * 501, "summary": "s"}, config).startswith(
        "Error: name is 501 characters; at most 500."
    )
    assert manage.invoke({"name": "Tom", "summary": "s" * 10_001}, config).startswith(
        "Error: summary is 10,001 characters"
    )
    manage.invoke({"name": "Oslo", "summary": "A city."}, config)
    manage.invoke({"name": "Rome", "summary": "Another city."}, config)
    assert [e["name"] for e in json.loads(search.invoke({"query": "CITY"}, config))] == [
        "Oslo",
        "Rome",
    ]
    assert [e["name"] for e in json.loads(search.invoke({"limit": 1}, config))] == ["Rome"]


def test_relations_are_added_replaced_and_deleted_per_thread(tmp_path: Path) -> None:
    manage, knowledge = entity_tools(lambda s: kg_memory(tmp_path, s), kind="kg")
    t1, t2 = thread("t1"), thread("t2")
    args = {"subject": "Jane", "predicate": "lives in", "object": "Oslo"}
    assert manage.invoke(args, t1) == "added (Jane, lives in, Oslo)"
    manage.invoke({"subject": "Oslo", "predicate": "is in", "object": "Norway"}, t1)
    manage.invoke({**args, "predicate": "moved to"}, t1)  # one relation per (subject, object)
    assert json.loads(knowledge.invoke({"entity": "Jane", "depth": 2}, t1)) == [
        "Jane moved to Oslo",
        "Oslo is in Norway",
    ]
    assert json.loads(knowledge.invoke({"entity": "Jane"}, t2)) == []
    manage.invoke({**args, "action": "delete"}, t1)
    assert json.loads(knowledge.invoke({"entity": "Jane"}, t1)) == []
    graph = SQLEntityGraph(f"sqlite:///{tmp_path / 'memories.db'}", session_id="t1")
    assert [c.predicate for c in graph.history("Jane", "Oslo")] == ["lives in", "moved to", None]
    assert manage.invoke({**args, "object": ""}, t1).startswith("Error: object must not")
    assert manage.invoke({**args, "object": "O" * 501}, t1).startswith("Error: object is 501")
    assert knowledge.invoke({"entity": "Jane", "depth": 9}, t1).startswith("Error: depth")
    missing = knowledge.invoke({"entity": "Jane"}, {"configurable": {}})
    assert missing.startswith("Error: entity_tools makes one memory per session")


def test_tools_refuse_other_memories_and_a_factory_without_its_kind(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="ConversationEntityMemory or a ConversationKGMemory"):
        entity_tools(WindowMemory())
    with pytest.raises(TypeError, match="needs kind='entity'"):
        entity_tools(lambda s: entity_memory(tmp_path, s))
    (manage, _) = entity_tools(lambda s: kg_memory(tmp_path, s), kind="entity")
    answer = manage.invoke({"name": "Jane", "summary": "x"}, thread("t"))
    assert answer.startswith("Error: entity_tools(kind='entity') needs a ConversationEntityMemory")
    assert [t.name for t in entity_tools(kg_memory(tmp_path, "s"))] == [
        "manage_relation",
        "entity_knowledge",
    ]
