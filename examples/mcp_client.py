"""Two MCP clients talk to ``memories mcp`` over stdio, as a desktop assistant or an IDE does.

The server runs ``examples/mcp.yaml`` (copied into a temporary folder, where its
relative paths put the data). The clients declare two names, ``alice`` and
``bob``; the config's ``{user_id}`` is filled with each one's name, so each has
their own memories and no tool argument can reach the other's. Offline: the
bundled MiniLM embeds, no model is called (a client's model makes these calls).

Needs the ``mcp`` and ``chroma`` extras: ``pip install -e '.[mcp,chroma]'`` in the checkout.

    python examples/mcp_client.py
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from memories.faces.scripts import needs

with needs("mcp"):
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client
    from mcp.types import Implementation

CONFIG = Path(__file__).with_name("mcp.yaml")


def server(config: Path) -> StdioServerParameters:
    """What a client's JSON config says: the command, its arguments, its environment."""
    return StdioServerParameters(
        command=sys.executable,  # or the `memories` command of the environment
        args=["-m", "memories.faces.cli", "mcp", "--config", str(config)],
        env=dict(os.environ),
    )


async def talk(config: Path, name: str, calls: list[tuple[str, dict[str, Any]]]) -> None:
    client_info = Implementation(name=name, version="1.0")
    # The server's own messages (stderr) go to a log beside the data, as a client keeps them.
    with (config.parent / "server.log").open("a", encoding="utf-8") as log:
        transport = stdio_client(server(config), errlog=log)
        async with Client(transport, client_info=client_info, read_timeout_seconds=120) as client:
            await converse(client, name, calls)


async def converse(client: Client, name: str, calls: list[tuple[str, dict[str, Any]]]) -> None:
    tools = (await client.list_tools()).tools
    print(f"[{name}] tools: {', '.join(tool.name for tool in tools)}")
    for tool, arguments in calls:
        result = await client.call_tool(tool, arguments)
        text = result.content[0].text if result.content[0].type == "text" else ""
        if tool == "search_memory" and not result.is_error:
            text = "; ".join(m["content"] for m in json.loads(text)) or "(nothing)"
        print(f"[{name}] {tool}{' error' if result.is_error else ''}: {text}")


async def conversation(config: Path) -> None:
    await talk(
        config,
        "alice",
        [
            ("manage_memory", {"content": "Alice is allergic to peanuts"}),
            ("update_profile", {"operations": [{"op": "add", "path": "/city", "value": "Porto"}]}),
            ("search_memory", {"query": "allergies"}),
        ],
    )
    await talk(
        config,
        "bob",
        [
            ("search_memory", {"query": "allergies"}),
            ("read_profile", {}),
            ("search_memory", {"query": "allergies", "user_id": "alice"}),
        ],
    )


def main(workdir: Path) -> None:
    config = Path(shutil.copy(CONFIG, workdir / CONFIG.name))
    asyncio.run(conversation(config))


if __name__ == "__main__":
    with needs("chroma"), tempfile.TemporaryDirectory(prefix="memories-example-") as folder:
        main(Path(folder))
