"""``memories mcp``: what the protocol adds to a tool call, beside the same call in process.

Run from the repository root::

    python benchmarks/mcp_stdio.py [--stored 1000] [--probes 100]

The config is ``examples/mcp.yaml`` (embedded Chroma, the bundled MiniLM, a
SQLite ledger) in a temporary folder, filled with ``--stored`` memories of
one user. Printed: the server's start to its first listed tools and its first
call (the stores opened), then p50 / p95 of ``search_memory`` and
``manage_memory`` (create) over stdio through the SDK's own client, beside
the same calls through :class:`~memories.faces.mcp_server.ConfigTools` in
this process (the tools without the protocol).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.types import Implementation

from memories.faces.mcp_server import ConfigTools

ROOT = Path(__file__).resolve().parents[1]
USER = "alice"


def percentiles(seconds: list[float]) -> str:
    ordered = sorted(seconds)
    p95 = ordered[max(0, round(0.95 * len(ordered)) - 1)]
    return f"{statistics.median(ordered) * 1000:7.1f} {p95 * 1000:7.1f}"


def in_process(config: Path, stored: int, probes: int) -> dict[str, list[float]]:
    tools = ConfigTools(config)
    for i in range(stored):
        tools.call("manage_memory", {"content": f"{USER} note {i} on topic {i % 97}"}, client=USER)
    found: dict[str, list[float]] = {"search_memory": [], "manage_memory": []}
    for i in range(probes):
        for name, arguments in (
            ("search_memory", {"query": f"topic {i % 97}", "limit": 5}),
            ("manage_memory", {"content": f"{USER} in-process fact {i}"}),
        ):
            start = time.perf_counter()
            answer = tools.call(name, arguments, client=USER)
            found[name].append(time.perf_counter() - start)
            assert not answer.error, answer.text
    tools.close()
    return found


async def over_stdio(config: Path, probes: int) -> tuple[float, float, dict[str, list[float]]]:
    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "memories.faces.cli", "mcp", "--config", str(config)],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    with (config.parent / "server.log").open("w", encoding="utf-8") as log:
        start = time.perf_counter()
        transport = stdio_client(server, errlog=log)
        info = Implementation(name=USER, version="1.0")
        async with Client(transport, client_info=info, read_timeout_seconds=120) as client:
            await client.list_tools()
            listed = time.perf_counter() - start
            await client.call_tool("search_memory", {"query": "warm up"})
            first = time.perf_counter() - start - listed
            found: dict[str, list[float]] = {"search_memory": [], "manage_memory": []}
            for i in range(probes):
                for name, arguments in (
                    ("search_memory", {"query": f"topic {i % 97}", "limit": 5}),
                    ("manage_memory", {"content": f"{USER} stdio fact {i}"}),
                ):
                    began = time.perf_counter()
                    result = await client.call_tool(name, arguments)
                    found[name].append(time.perf_counter() - began)
                    assert not result.is_error, result
    return listed, first, found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stored", type=int, default=1000)
    parser.add_argument("--probes", type=int, default=100)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="memories-mcp-bench-"))
    try:
        config = Path(shutil.copy(ROOT / "examples" / "mcp.yaml", folder / "mcp.yaml"))
        local = in_process(config, args.stored, args.probes)
        listed, first, remote = asyncio.run(over_stdio(config, args.probes))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print(f"memories mcp, {args.stored:,} memories of one user, {args.probes} probes per call")
    print(f"server start to listed tools: {listed:.2f} s; first call: {first:.2f} s")
    print(f"{'call':<16} {'path':<12} {'p50 ms':>7} {'p95 ms':>7}")
    for name in ("search_memory", "manage_memory"):
        print(f"{name:<16} {'in process':<12} {percentiles(local[name])}")
        print(f"{name:<16} {'over stdio':<12} {percentiles(remote[name])}")


if __name__ == "__main__":
    main()
