"""`memories mcp`: the SDK's own client talks to the server in a subprocess over stdio."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml

from memories.core.combined import leaves_of
from memories.core.config import create_memory, with_namespace
from memories.faces.cli import main
from memories.faces.mcp_server import MAX_ARGUMENTS
from memories.faces.tools import MAX_CONTENT, MAX_LIMIT
from tests import needs

mcp = pytest.importorskip("mcp", reason=needs.extra("mcp"))
from mcp import Client, StdioServerParameters  # noqa: E402
from mcp.types import CallToolResult, Implementation  # noqa: E402

pytestmark = pytest.mark.server

EMBEDDINGS = "tests.vector.conftest:WordEmbeddings"
#: Seconds the client waits for one answer; the first call loads the stores.
READ_TIMEOUT = 120


def config_for(folder: Path, namespace: Any = ("users", "{user_id}")) -> dict[str, Any]:
    db = folder / "memories.db"
    return {
        "type": "combined",
        "memories": [
            {
                "type": "collection",
                "url": f"sqlite:///{db}",
                "path": str(folder / "chroma"),
                "embeddings": EMBEDDINGS,
                "namespace": list(namespace),
                "write": "sync",
                "policy": "manual",
            },
            {
                "type": "profile",
                "url": f"sqlite:///{db}",
                "namespace": list(namespace),
                "policy": "manual",
            },
        ],
    }


def write_config(folder: Path, config: dict[str, Any]) -> Path:
    path = folder / "memories.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


@pytest.fixture
def config(tmp_path: Path) -> Path:
    return write_config(tmp_path, config_for(tmp_path))


def stored(config: Path, *labels: str) -> tuple[list[str], Any]:
    """What the stores hold in a namespace, read without the server: memories and profile."""
    options = with_namespace(yaml.safe_load(config.read_text(encoding="utf-8")), labels)
    collection, profile = leaves_of(create_memory(options))
    return sorted(r.content for r in collection.list()), profile.get()


@asynccontextmanager
async def connected(
    config: Path, name: str, *args: str, mode: str = "auto", **env: str
) -> AsyncIterator[Client]:
    """A client named ``name`` talking to ``memories mcp --config config *args``."""
    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "memories.faces.cli", "mcp", "--config", str(config), *args],
        env={**os.environ, **env},
    )
    client = Client(
        server,
        client_info=Implementation(name=name, version="1.0"),
        mode=mode,
        read_timeout_seconds=READ_TIMEOUT,
    )
    async with client:
        yield client


def text(result: CallToolResult) -> str:
    (content,) = result.content
    assert content.type == "text"
    return content.text


async def ok(client: Client, tool: str, **arguments: Any) -> str:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, text(result)
    return text(result)


async def refused(client: Client, tool: str, arguments: dict[str, Any]) -> str:
    result = await client.call_tool(tool, arguments)
    assert result.is_error, text(result)
    return text(result)


async def test_a_client_lists_the_tools_then_saves_finds_changes_and_forgets(config: Path) -> None:
    async with connected(config, "alice") as client:
        listed = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert list(listed) == ["manage_memory", "search_memory", "read_profile", "update_profile"]
        assert set(listed["search_memory"].input_schema["properties"]) == {
            "query",
            "limit",
            "offset",
        }
        for tool in listed.values():  # whose memories is never the model's to say
            assert not {"namespace", "user_id", "config"} & set(tool.input_schema["properties"])
        created = await ok(client, "manage_memory", content="Alice drinks green tea")
        memory_id = created.removeprefix("created memory ")
        found = json.loads(await ok(client, "search_memory", query="what does alice drink"))
        assert [(m["id"], m["content"]) for m in found] == [(memory_id, "Alice drinks green tea")]
        changed = {"action": "update", "id": memory_id, "content": "Alice drinks coffee"}
        assert await ok(client, "manage_memory", **changed) == f"updated memory {memory_id}"
        patch = [{"op": "add", "path": "/city", "value": "Lisbon"}]
        assert json.loads(await ok(client, "update_profile", operations=patch)) == {
            "city": "Lisbon"
        }
        assert json.loads(await ok(client, "read_profile")) == {"city": "Lisbon"}
        assert stored(config, "users", "alice") == (["Alice drinks coffee"], {"city": "Lisbon"})
        deleted = await ok(client, "manage_memory", action="delete", id=memory_id)
        assert deleted == f"deleted memory {memory_id}"
    assert stored(config, "users", "alice") == ([], {"city": "Lisbon"})


async def test_two_clients_with_two_names_never_see_each_others_memories(config: Path) -> None:
    # alice's name arrives in the initialize handshake, bob's with each request (the new era).
    async with (
        connected(config, "alice", mode="legacy") as alice,
        connected(config, "bob") as bob,
    ):
        assert alice.protocol_version != bob.protocol_version
        created = await ok(alice, "manage_memory", content="Alice is allergic to nuts")
        alice_id = created.removeprefix("created memory ")
        await ok(bob, "manage_memory", content="Bob is allergic to cats")
        await ok(bob, "update_profile", operations=[{"op": "add", "path": "/pet", "value": "no"}])

        for query in ("allergic nuts", "allergic cats"):
            mine = json.loads(await ok(alice, "search_memory", query=query))
            assert [m["content"] for m in mine] == ["Alice is allergic to nuts"]
            theirs = json.loads(await ok(bob, "search_memory", query=query))
            assert [m["content"] for m in theirs] == ["Bob is allergic to cats"]
        # An id from another namespace is not found there: bob cannot change alice's memory.
        forged = {"action": "update", "id": alice_id, "content": "Alice eats nuts"}
        assert "No memory" in await refused(bob, "manage_memory", forged)
        assert json.loads(await ok(alice, "read_profile")) == {}
        assert json.loads(await ok(bob, "read_profile")) == {"pet": "no"}
        forged_delete = {"action": "delete", "id": alice_id}
        assert "No memory" in await refused(bob, "manage_memory", forged_delete)
        assert "('users', 'bob')" in await refused(bob, "manage_memory", forged_delete)

    assert stored(config, "users", "alice") == (["Alice is allergic to nuts"], {})
    assert stored(config, "users", "bob") == (["Bob is allergic to cats"], {"pet": "no"})


async def test_bad_calls_come_back_as_tool_errors_and_change_nothing(config: Path) -> None:
    async with connected(config, "alice") as client:
        await ok(client, "manage_memory", content="Alice lives in Porto")
        before = stored(config, "users", "alice")

        unknown = await refused(client, "forget_everything", {})
        assert unknown == (
            "No tool 'forget_everything'; this server has "
            "['manage_memory', 'read_profile', 'search_memory', 'update_profile']."
        )
        forged = await refused(client, "manage_memory", {"content": "x", "namespace": "users.bob"})
        assert "not ['namespace']" in forged and "set by the server" in forged
        forged = await refused(client, "search_memory", {"query": "x", "user_id": "bob"})
        assert "not ['user_id']" in forged
        typed = await refused(client, "search_memory", {"query": 5, "limit": "many"})
        assert typed.startswith("Bad arguments for search_memory: query: ")
        assert "limit: " in typed and "'many'" in typed
        assert "query: Field required" in await refused(client, "search_memory", {})
        assert "action: " in await refused(client, "manage_memory", {"action": "drop", "id": "x"})

        oversize = "x" * (MAX_CONTENT + 1)
        assert await refused(client, "manage_memory", {"content": oversize}) == (
            f"content is {MAX_CONTENT + 1:,} characters; at most {MAX_CONTENT:,}."
        )
        assert await refused(client, "search_memory", {"query": "x", "limit": 10**9}) == (
            f"limit must be between 1 and {MAX_LIMIT}, got {10**9}."
        )
        assert "offset must be" in await refused(
            client, "search_memory", {"query": "x", "offset": -1}
        )
        whole = await refused(
            client, "update_profile", {"operations": [{"v": "y" * MAX_ARGUMENTS}]}
        )
        assert whole.startswith("The arguments are ") and f"at most {MAX_ARGUMENTS:,}" in whole
        bad_patch = [{"op": "remove", "path": "/nowhere"}]
        assert await refused(client, "update_profile", {"operations": bad_patch})
        bad_id = {"action": "delete", "id": "../../etc/passwd"}
        assert "A memory id is" in await refused(client, "manage_memory", bad_id)

        assert stored(config, "users", "alice") == before
        # The server carries on after every refusal.
        assert json.loads(await ok(client, "search_memory", query="porto"))


async def test_the_servers_user_or_namespace_wins_over_the_clients_name(
    config: Path, tmp_path: Path
) -> None:
    async with connected(config, "alice", "--user", "carol") as client:
        await ok(client, "manage_memory", content="Carol reads at night")
    assert stored(config, "users", "carol")[0] == ["Carol reads at night"]
    assert stored(config, "users", "alice")[0] == []

    async with connected(config, "alice", MEMORIES_NAMESPACE="team.notes") as client:
        await ok(client, "manage_memory", content="The team meets on Mondays")
    assert stored(config, "team", "notes")[0] == ["The team meets on Mondays"]
    assert stored(config, "users", "alice")[0] == []

    # A name that cannot be a namespace label is refused, not mangled into someone else's.
    async with connected(config, "acme.assistant") as client:
        named = await refused(client, "manage_memory", {"content": "x"})
        assert "'acme.assistant' cannot name whose memories" in named and "--user" in named


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"namespace": ["users", "everyone"]}, "shared: true"),
        ({"namespace": ["orgs", "{org_id}", "{user_id}"]}, "names ['org_id']"),
    ],
)
def test_a_config_that_would_mix_users_is_refused_at_start(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], change: dict[str, Any], message: str
) -> None:
    config = config_for(tmp_path)
    for member in config["memories"]:
        member.update(change)
    path = write_config(tmp_path, config)
    assert main(["mcp", "--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert message in err and "--namespace" in err


def test_a_config_without_collection_or_profile_and_a_bad_user_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    buffer = {"type": "buffer", "history": {"type": "sqlite", "path": str(tmp_path / "c.db")}}
    assert main(["mcp", "--config", str(write_config(tmp_path, buffer))]) == 2
    assert "serves the tools of collection, profile and entity memories" in capsys.readouterr().err
    path = write_config(tmp_path, config_for(tmp_path))
    assert main(["mcp", "--config", str(path), "--user", "a.b"]) == 2
    assert "--user 'a.b' cannot name whose memories" in capsys.readouterr().err
    # --user where no template takes it would look per-user and be shared: refused.
    assert main(["mcp", "--config", str(path), "--namespace", "team", "--user", "carol"]) == 2
    assert "--user 'carol' fills the config's {user_id}" in capsys.readouterr().err


def test_the_docs_show_the_example_config_as_it_is() -> None:
    root = Path(__file__).resolve().parents[2]
    example = (root / "examples" / "mcp.yaml").read_text(encoding="utf-8")
    body = "".join(line for line in example.splitlines(True) if not line.startswith("#"))
    assert body in (root / "docs" / "mcp.md").read_text(encoding="utf-8")
