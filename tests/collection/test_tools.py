"""Memory tools: the agent saves and searches memories in the user's own namespace."""

from __future__ import annotations

import gc
import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, ToolMessage

from memories import CollectionMemory, ProfileMemory, memory_tools, profile_tool
from memories.faces.tools import (
    MAX_CONTENT,
    MAX_LIMIT,
    MAX_OFFSET,
    MAX_OPERATIONS,
    MAX_QUERY,
    read_profile_tool,
)
from memories.kernel.namespaces import in_namespace
from memories.testing import ScriptedChatModel
from tests import needs

EMBEDDINGS = "tests.vector.conftest:WordEmbeddings"


@pytest.fixture
def memory(tmp_path: Path) -> CollectionMemory:
    return CollectionMemory(
        namespace=("memories", "{user_id}"),
        url=f"sqlite:///{tmp_path / 'ledger.db'}",
        mode="memory",
        collection=f"t{uuid.uuid4().hex[:10]}",
        embeddings=EMBEDDINGS,
        policy="manual",
    )


def call(name: str, i: int, **args: Any) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": name, "args": args, "id": f"call_{i}"}])


def user(user_id: str, thread: str) -> dict[str, Any]:
    return {"configurable": {"user_id": user_id, "thread_id": thread}}


def answers(result: dict[str, Any]) -> list[str]:
    return [str(m.content) for m in result["messages"] if isinstance(m, ToolMessage)]


def test_an_agent_remembers_a_user_across_threads_and_never_another_users(
    memory: CollectionMemory,
) -> None:
    agents = pytest.importorskip("langchain.agents", reason=needs.extra("langchain.agents"))
    model = ScriptedChatModel(
        responses=[
            call("manage_memory", 1, content="Alice drinks green tea"),
            AIMessage("Noted."),
            call("search_memory", 2, query="what does alice drink"),
            AIMessage("Green tea."),
            call("search_memory", 3, query="what does alice drink"),
            AIMessage("I don't know."),
        ],
        echo=False,
    )
    agent = agents.create_agent(model, memory_tools(memory))
    first = agent.invoke({"messages": [("user", "I drink green tea")]}, user("alice", "t1"))
    assert answers(first)[0].startswith("created memory ")
    later = agent.invoke({"messages": [("user", "What do I drink?")]}, user("alice", "t2"))
    found = json.loads(answers(later)[0])
    assert [m["content"] for m in found] == ["Alice drinks green tea"]
    other = agent.invoke({"messages": [("user", "What do I drink?")]}, user("bob", "t3"))
    assert json.loads(answers(other)[0]) == []


def test_a_user_id_spelling_the_template_never_reads_the_templates_own_memories(
    memory: CollectionMemory,
) -> None:
    memory.put("written through the unfilled template")  # ('memories', '{user_id}') as it is
    manage, search = memory_tools(memory)
    for forged in ("{user_id}", "{x}", "a}"):
        answer = search.invoke({"query": "template"}, user(forged, "t"))
        assert answer.startswith("Error: The namespace template needs 'user_id'"), answer
        assert f"got {forged!r}" in answer and "'{' or '}'" in answer
    assert manage.invoke({"content": "x"}, user("{user_id}", "t")).startswith("Error: ")
    assert [m.content for m in memory.list()] == ["written through the unfilled template"]


def test_tool_errors_come_back_as_answers_and_forged_ids_find_nothing(
    memory: CollectionMemory,
) -> None:
    manage, search = memory_tools(memory)
    alice, bob = user("alice", "t"), user("bob", "t")
    created = manage.invoke({"content": "Alice is allergic to nuts"}, alice)
    alice_id = created.removeprefix("created memory ")
    again = manage.invoke({"content": "alice is ALLERGIC to nuts!"}, alice)
    assert again == f"Already remembered as memory {alice_id}: Alice is allergic to nuts"

    forged = manage.invoke({"action": "delete", "id": alice_id}, bob)
    assert forged.startswith("Error: No memory") and "('memories', 'bob')" in forged
    assert manage.invoke({"action": "update", "content": "x"}, alice).startswith("Error: update")
    assert manage.invoke({"action": "delete", "id": "../../x"}, alice).startswith("Error: ")
    assert search.invoke({"query": "nuts", "limit": 0}, alice).startswith("Error: limit")
    missing = manage.invoke({"content": "x"}, {"configurable": {}})
    assert missing.startswith("Error: ") and "user_id" in missing

    change = {"action": "update", "id": alice_id, "content": "Alice: no nuts"}
    updated = manage.invoke(change, alice)
    assert updated == f"updated memory {alice_id}"
    assert [m["content"] for m in json.loads(search.invoke({"query": "nuts"}, alice))] == [
        "Alice: no nuts"
    ]
    deleted = manage.invoke({"action": "delete", "id": alice_id}, alice)
    assert deleted == f"deleted memory {alice_id}"


def test_update_profile_tool_patches_the_users_own_profile(tmp_path: Path) -> None:
    profile = ProfileMemory(
        namespace=("profiles", "{user_id}"), url=f"sqlite:///{tmp_path / 'p.db'}", policy="manual"
    )
    tool = profile_tool(profile)
    patch = [{"op": "add", "path": "/city", "value": "Berlin"}]
    assert json.loads(tool.invoke({"operations": patch}, user("ana", "t"))) == {"city": "Berlin"}
    bad = tool.invoke({"operations": [{"op": "remove", "path": "/nope"}]}, user("ana", "t"))
    assert bad.startswith("Error: ")
    assert profile.store.get(("profiles", "ben"), "profile") is None
    assert profile.store.get(("profiles", "{user_id}"), "profile") is None  # never the template
    with pytest.raises(TypeError, match="takes a ProfileMemory"):
        profile_tool(object())
    with pytest.raises(TypeError, match="takes a CollectionMemory"):
        memory_tools(profile)


def test_oversize_and_out_of_range_arguments_are_refused_before_anything_is_written(
    memory: CollectionMemory, tmp_path: Path
) -> None:
    manage, search = memory_tools(memory)
    alice = user("alice", "t")
    long = "x" * (MAX_CONTENT + 1)
    assert manage.invoke({"content": long}, alice) == (
        f"Error: content is {MAX_CONTENT + 1:,} characters; at most {MAX_CONTENT:,}."
    )
    assert search.invoke({"query": "x", "limit": MAX_LIMIT + 1}, alice) == (
        f"Error: limit must be between 1 and {MAX_LIMIT}, got {MAX_LIMIT + 1}."
    )
    assert search.invoke({"query": "x", "offset": -1}, alice).startswith("Error: offset")
    assert search.invoke({"query": "x", "offset": MAX_OFFSET + 1}, alice).startswith(
        "Error: offset must be between 0"
    )
    assert search.invoke({"query": "q" * (MAX_QUERY + 1)}, alice).startswith("Error: query is")
    stored = in_namespace(memory, ("memories", "alice"))
    assert stored.list() == []

    profile = ProfileMemory(
        namespace=("profiles", "{user_id}"), url=f"sqlite:///{tmp_path / 'p.db'}", policy="manual"
    )
    tool = profile_tool(profile)
    many = [{"op": "add", "path": f"/k{i}", "value": i} for i in range(MAX_OPERATIONS + 1)]
    assert tool.invoke({"operations": many}, alice).startswith(
        f"Error: {MAX_OPERATIONS + 1} operations in one patch; at most {MAX_OPERATIONS}."
    )
    huge = [{"op": "add", "path": "/bio", "value": long}]
    assert tool.invoke({"operations": huge}, alice).startswith("Error: the patch is")
    assert profile.store.get(("profiles", "alice"), "profile") is None


def test_read_profile_tool_reads_the_users_own_profile(tmp_path: Path) -> None:
    profile = ProfileMemory(
        namespace=("profiles", "{user_id}"), url=f"sqlite:///{tmp_path / 'p.db'}", policy="manual"
    )
    read, update = read_profile_tool(profile), profile_tool(profile)
    assert json.loads(read.invoke({}, user("ana", "t"))) == {}
    city = [{"op": "add", "path": "/city", "value": "Porto"}]
    update.invoke({"operations": city}, user("ana", "t"))
    assert json.loads(read.invoke({}, user("ana", "t"))) == {"city": "Porto"}
    assert json.loads(read.invoke({}, user("ben", "t"))) == {}
    assert read.invoke({}, {"configurable": {}}).startswith("Error: ")
    for bad in ("ana.b", "", 7):  # not a label: told to the model as a config's is
        answer = read.invoke({}, user(bad, "t"))  # type: ignore[arg-type]
        assert answer.startswith("Error: The namespace template needs 'user_id'"), answer
        assert f"got {bad!r}" in answer and "without '.'" in answer
    with pytest.raises(TypeError, match="takes a ProfileMemory"):
        read_profile_tool(object())


def test_a_tool_keeps_a_bounded_number_of_users_memories_and_loses_none_of_their_data(
    tmp_path: Path,
) -> None:
    profile = ProfileMemory(
        namespace=("profiles", "{user_id}"), url=f"sqlite:///{tmp_path / 'p.db'}", policy="manual"
    )
    tool = profile_tool(profile)
    users = 300
    for n in range(users):
        patch = [{"op": "add", "path": "/n", "value": n}]
        assert json.loads(tool.invoke({"operations": patch}, user(f"u{n}", "t"))) == {"n": n}
    gc.collect()
    built = [  # this test's: other tests' memories may be alive too
        m
        for m in gc.get_objects()
        if isinstance(m, ProfileMemory) and m is not profile and m.url == profile.url
    ]
    assert len(built) <= 256  # one a user before: 300
    read = read_profile_tool(profile)
    assert json.loads(read.invoke({}, user("u0", "t"))) == {"n": 0}  # dropped, built again
