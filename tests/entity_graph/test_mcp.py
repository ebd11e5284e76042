"""`memories mcp` over an entity graph config: each client keeps its own graph."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from memories import EntityMemory, create_memory
from memories.core.config import with_namespace
from tests import needs

mcp = pytest.importorskip("mcp", reason=needs.extra("mcp"))
from mcp import Client  # noqa: E402
from mcp.types import Implementation  # noqa: E402

from memories.faces.mcp_server import ConfigTools, create_server  # noqa: E402
from tests.mcp_server.test_stdio import ok, refused  # noqa: E402


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "graph.yaml"
    options = {
        "type": "entity",
        "url": f"sqlite:///{tmp_path / 'g.db'}",
        "namespace": ["users", "{user_id}"],
    }
    path.write_text(yaml.safe_dump(options), encoding="utf-8")
    return path


def client(tools: ConfigTools, name: str) -> Client:
    return Client(create_server(tools), client_info=Implementation(name=name, version="1.0"))


def graph_of(config: Path, user: str) -> EntityMemory:
    options = with_namespace(yaml.safe_load(config.read_text(encoding="utf-8")), ("users", user))
    memory = create_memory(options)
    assert isinstance(memory, EntityMemory)
    return memory


async def test_each_client_keeps_its_own_graph_and_bad_calls_are_tool_errors(
    config: Path,
) -> None:
    tools = ConfigTools(config)
    async with client(tools, "alice") as alice, client(tools, "bob") as bob:
        names = {tool.name for tool in (await alice.list_tools()).tools}
        assert names == {"manage_entity", "manage_relation", "search_entities"}
        await ok(alice, "manage_entity", name="Melanie", aliases=["Mel"])
        added = await ok(
            alice, "manage_relation", subject="Mel", predicate="lives_in", object="Oslo"
        )
        assert added == "added (Mel, lives_in, Oslo)"
        found = json.loads(await ok(alice, "search_entities", query="Where does Mel live?"))
        assert [r["object"] for r in found["relations"]] == ["Oslo"]
        theirs = json.loads(await ok(bob, "search_entities", query="Where does Mel live?"))
        assert theirs == {"entities": [], "relations": []}
        error = await refused(alice, "manage_relation", {"subject": "Mel", "predicate": "x"})
        assert "exactly one of object" in error
        await refused(alice, "search_entities", {"query": "Mel", "namespace": ["users", "bob"]})
    assert tools.close()
    assert [r.text() for r in graph_of(config, "alice").relations()] == ["Melanie lives_in Oslo"]
    assert graph_of(config, "bob").entities() == []
