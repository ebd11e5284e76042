"""entity_tools over an EntityMemory: an agent keeps each user's graph, in the user's namespace."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import BaseTool

from memories import EntityMemory, entity_tools
from memories.faces.tools import MAX_LIMIT, MAX_NAME, MAX_QUERY
from memories.kernel.namespaces import in_namespace
from memories.testing import ScriptedChatModel
from tests import needs


@pytest.fixture
def memory(tmp_path: Path) -> EntityMemory:
    return EntityMemory(namespace=("graph", "{user_id}"), url=f"sqlite:///{tmp_path / 'g.db'}")


def user(user_id: str) -> dict[str, Any]:
    return {"configurable": {"user_id": user_id, "thread_id": "t1"}}


def tools_by_name(memory: EntityMemory) -> dict[str, BaseTool]:
    return {tool.name: tool for tool in entity_tools(memory)}


def of(memory: EntityMemory, user_id: str) -> EntityMemory:
    found: EntityMemory = in_namespace(memory, ("graph", user_id))
    return found


def current(memory: EntityMemory) -> set[str]:
    return {r.text() for r in memory.relations()}


def call(tool: str, i: int, **args: Any) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": tool, "args": args, "id": f"call_{i}"}])


def answers(result: dict[str, Any]) -> list[str]:
    return [str(m.content) for m in result["messages"] if isinstance(m, ToolMessage)]


def test_an_agent_keeps_a_users_graph_and_never_sees_another_users(memory: EntityMemory) -> None:
    agents = pytest.importorskip("langchain.agents", reason=needs.extra("langchain.agents"))
    model = ScriptedChatModel(
        responses=[
            call("manage_entity", 1, name="Melanie", type="person", aliases=["Mel"]),
            call("manage_relation", 2, subject="Melanie", predicate="lives_in", object="Oslo"),
            AIMessage("Noted."),
            call("search_entities", 3, query="Where does Mel live?"),
            AIMessage("Oslo."),
            call("search_entities", 4, query="Where does Mel live?"),
            AIMessage("I don't know."),
        ],
        echo=False,
    )
    agent = agents.create_agent(model, entity_tools(memory))
    first = agent.invoke({"messages": [("user", "My sister Mel lives in Oslo")]}, user("ana"))
    assert answers(first) == ["updated entity 'Melanie'", "added (Melanie, lives_in, Oslo)"]
    later = agent.invoke({"messages": [("user", "Where does Mel live?")]}, user("ana"))
    found = json.loads(answers(later)[0])
    assert [e["name"] for e in found["entities"]] == ["Melanie"]
    assert found["entities"][0]["aliases"] == ["Mel"]
    assert [(r["subject"], r["predicate"], r["object"]) for r in found["relations"]] == [
        ("Melanie", "lives_in", "Oslo")
    ]
    other = agent.invoke({"messages": [("user", "Where does Mel live?")]}, user("bob"))
    assert json.loads(answers(other)[0]) == {"entities": [], "relations": []}
    # Written in ana's namespace only, where the memory itself reads it.
    assert current(of(memory, "ana")) == {"Melanie lives_in Oslo"}
    assert of(memory, "ana").entity("Mel") is not None
    assert of(memory, "bob").entities() == []


def test_relations_are_replaced_and_ended_never_deleted(memory: EntityMemory) -> None:
    tools = tools_by_name(memory)
    relate, search = tools["manage_relation"], tools["search_entities"]
    relate.invoke({"subject": "Ana", "predicate": "lives_in", "object": "Lisbon"}, user("ana"))
    moved = {"subject": "Ana", "predicate": "lives in", "object": "Porto", "replace_current": True}
    assert relate.invoke(moved, user("ana")) == "added (Ana, lives in, Porto)"
    relate.invoke({"subject": "Ana", "predicate": "likes", "value": "green tea"}, user("ana"))
    graph = of(memory, "ana")
    assert current(graph) == {"Ana lives_in Porto", "Ana likes green tea"}
    assert [(r.text(), r.ended) for r in graph.history()] == [
        ("Ana lives_in Lisbon", "contradicted")
    ]
    # End by the id search_entities gives, and by the fact itself.
    shown = json.loads(search.invoke({"query": "Where does Ana live?"}, user("ana")))
    porto = next(r["id"] for r in shown["relations"] if r["object"] == "Porto")
    by_id = {"subject": "Ana", "predicate": "lives_in", "action": "end", "id": porto}
    assert relate.invoke(by_id, user("ana")) == f"ended relation {porto}"
    ended = {"subject": "Ana", "predicate": "likes", "value": "green tea", "action": "end"}
    assert relate.invoke(ended, user("ana")) == "ended (Ana, likes, green tea)"
    assert current(graph) == set()
    assert {r.text() for r in graph.history()} == {
        "Ana lives_in Lisbon",
        "Ana lives_in Porto",
        "Ana likes green tea",
    }
    # Adding what holds already writes nothing.
    relate.invoke({"subject": "Ana", "predicate": "knows", "object": "Tom"}, user("ana"))
    again = relate.invoke({"subject": "Ana", "predicate": "knows", "object": "Tom"}, user("ana"))
    assert again == "nothing changed: the graph holds that already"


def test_entities_are_renamed_merged_and_unmerged(memory: EntityMemory) -> None:
    manage = tools_by_name(memory)["manage_entity"]
    manage.invoke({"name": "Melanie", "summary": "Ana's sister"}, user("ana"))
    manage.invoke({"name": "Mel"}, user("ana"))
    merged = {"name": "Mel", "action": "merge", "into": "Melanie", "reason": "same person"}
    assert manage.invoke(merged, user("ana")) == "merged 'Mel' into 'Melanie'"
    graph = of(memory, "ana")
    assert [(e.name, e.merge_reason) for e in graph.merges()] == [("Mel", "same person")]
    assert manage.invoke({"name": "Mel", "action": "unmerge"}, user("ana")) == "unmerged 'Mel'"
    assert graph.merges() == []
    renamed = manage.invoke({"name": "Melanie", "new_name": "Melanie Grey"}, user("ana"))
    assert renamed == "updated entity 'Melanie Grey'"
    entity = graph.entity("Melanie")
    assert entity is not None and entity.name == "Melanie Grey"
    assert entity.aliases == ("Melanie",) and entity.summary == "Ana's sister"


def test_bad_calls_come_back_as_answers_and_write_nothing(memory: EntityMemory) -> None:
    tools = tools_by_name(memory)
    manage, relate = tools["manage_entity"], tools["manage_relation"]
    search = tools["search_entities"]
    manage.invoke({"name": "Ana"}, user("ana"))
    manage.invoke({"name": "Tom"}, user("ana"))
    refused = {
        "an alias of another": manage.invoke({"name": "Ana", "aliases": ["Tom"]}, user("ana")),
        "a merge without reason": manage.invoke(
            {"name": "Tom", "action": "merge", "into": "Ana"}, user("ana")
        ),
        "an unknown merge": manage.invoke(
            {"name": "Zed", "action": "merge", "into": "Ana", "reason": "r"}, user("ana")
        ),
        "object and value": relate.invoke(
            {"subject": "Ana", "predicate": "likes", "object": "Tom", "value": "tea"}, user("ana")
        ),
        "nothing to end": relate.invoke(
            {"subject": "Ana", "predicate": "likes", "value": "tea", "action": "end"}, user("ana")
        ),
        "a forged id": relate.invoke(
            {"subject": "Ana", "predicate": "x", "action": "end", "id": "nope"}, user("ana")
        ),
        "a long name": manage.invoke({"name": "A" * (MAX_NAME + 1)}, user("ana")),
        "a long alias": manage.invoke(
            {"name": "Ana", "aliases": ["A", "B" * (MAX_NAME + 1)]}, user("ana")
        ),
        "a long query": search.invoke({"query": "q" * (MAX_QUERY + 1)}, user("ana")),
        "a big limit": search.invoke({"query": "Ana", "limit": MAX_LIMIT + 1}, user("ana")),
        "no user": search.invoke({"query": "Ana"}, {"configurable": {}}),
    }
    for case, answer in refused.items():
        assert answer.startswith("Error: "), case
    assert "user_id" in refused["no user"]
    assert "another entity" in refused["an alias of another"]
    long_alias = f"Error: aliases[1] is {MAX_NAME + 1:,} characters; at most {MAX_NAME:,}."
    assert refused["a long alias"] == long_alias
    graph = of(memory, "ana")
    assert [e.name for e in graph.entities()] == ["Ana", "Tom"]
    assert graph.relations() == [] and graph.history() == [] and graph.merges() == []
    assert of(memory, "bob").entities() == []


def test_a_memory_with_a_fixed_namespace_needs_no_run_config(tmp_path: Path) -> None:
    fixed = EntityMemory(namespace=("team",), url=f"sqlite:///{tmp_path / 'g.db'}")
    relate = tools_by_name(fixed)["manage_relation"]
    relate.invoke({"subject": "Ana", "predicate": "leads", "object": "Search"}, {})
    assert current(fixed) == {"Ana leads Search"}
