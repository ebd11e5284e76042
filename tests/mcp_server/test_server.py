"""The MCP server in process: what a call that hangs or breaks answers, and that it carries on."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from tests import needs
from tests.mcp_server.test_stdio import config_for, stored, text, write_config

mcp = pytest.importorskip("mcp", reason=needs.extra("mcp"))
from mcp import Client  # noqa: E402
from mcp.types import Implementation  # noqa: E402

from memories.core.combined import CombinedMemory  # noqa: E402
from memories.faces import mcp_server  # noqa: E402
from memories.faces.mcp_server import Answer, ConfigTools, create_server  # noqa: E402


@pytest.fixture
def config(tmp_path: Path) -> Path:
    return write_config(tmp_path, config_for(tmp_path))


def client(tools: ConfigTools, **options: Any) -> Client:
    server = create_server(tools, **options)
    return Client(server, client_info=Implementation(name="alice", version="1.0"))


async def test_a_call_past_the_timeout_answers_an_error_and_the_server_carries_on(
    config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tools = ConfigTools(config)
    release, done = threading.Event(), threading.Event()
    answer = tools.call

    def hanging(name: str, arguments: Any, *, client: str | None) -> Answer:
        release.wait(60)  # a store that does not answer, until the test lets it go
        try:
            return answer(name, arguments, client=client)
        finally:
            done.set()

    monkeypatch.setattr(tools, "call", hanging)
    async with client(tools, timeout=0.5) as session:
        late = await session.call_tool("manage_memory", {"content": "Alice reads"})
        assert late.is_error
        assert text(late) == (
            "manage_memory had no answer from the stores within 0.5 s; try again later."
        )
        release.set()
        # Still serving (listing touches no store, so no timing decides this).
        assert len((await session.list_tools()).tools) == 4
    # The abandoned call still ends, and its write may yet complete, as the answer said.
    assert done.wait(60)
    assert tools.close()
    assert stored(config, "users", "alice")[0] == ["Alice reads"]


async def test_an_unexpected_failure_is_a_tool_error_not_a_crash(
    config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tools = ConfigTools(config)
    answer = tools.call

    def breaking(name: str, arguments: Any, *, client: str | None) -> Answer:
        if name == "update_profile":
            raise RuntimeError("the disk is full")
        return answer(name, arguments, client=client)

    monkeypatch.setattr(tools, "call", breaking)
    async with client(tools) as session:
        broken = await session.call_tool("update_profile", {"operations": []})
        assert broken.is_error
        assert text(broken) == "update_profile failed: RuntimeError: the disk is full"
        saved = await session.call_tool("manage_memory", {"content": "Alice reads"})
        assert not saved.is_error and text(saved).startswith("created memory ")
    assert tools.close()
    assert stored(config, "users", "alice")[0] == ["Alice reads"]


def test_a_caller_past_the_open_limit_closes_the_least_recent_callers_memory(
    config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(mcp_server, "_OPEN_CALLERS", 2)
    tools = ConfigTools(config)
    closed: list[int] = []
    close = CombinedMemory.close

    def counted(self: CombinedMemory, *, timeout: float | None = None) -> bool:
        closed.append(id(self))
        return close(self, timeout=timeout)

    monkeypatch.setattr(CombinedMemory, "close", counted)
    opened = {}
    for user in ("alice", "bob", "alice", "carol"):  # alice used again: bob is the oldest
        assert not tools.call("manage_memory", {"content": f"{user} reads"}, client=user).error
        opened[user] = id(tools._open.get(user)[0])
    assert closed == [opened["bob"]]
    assert tools.close()
    assert sorted(closed) == sorted(opened.values())
