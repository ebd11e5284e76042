"""The MCP server: a config's memory tools for MCP clients, ``memories mcp --config memories.yaml``.

It serves, over stdio (the ``mcp`` extra), the tools of :mod:`memories.faces.tools` for the
config's collection, profile and entity memories: their own code runs, so a tool answers here
as in an agent. Whose memories a call uses is never a tool argument: ``--namespace``, else the
template's ``{user_id}`` filled with ``--user`` or the client's declared name, else a namespace
the config shares (``shared: true``); docs/mcp.md has the rules and the errors.
"""

from __future__ import annotations

import functools
import inspect
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import mcp.types as types
from langchain_core.tools import BaseTool, ToolException
from langchain_core.utils.function_calling import convert_to_openai_tool
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from pydantic import ValidationError

from memories._version import __version__
from memories.core.combined import leaves_of
from memories.core.config import create_memory, load_config, memory_factory, with_namespace
from memories.errors import ConfigError, MemoriesError
from memories.faces.mcp_frames import Answering
from memories.faces.tools import entity_tools, memory_tools, profile_tool, read_profile_tool
from memories.kernel.lru import Built
from memories.kernel.namespaces import as_namespace, namespace_text

__all__ = ["DEFAULT_TIMEOUT", "Answer", "ConfigTools", "create_server", "serve"]

#: Seconds a call may wait for the stores before it answers with an error.
DEFAULT_TIMEOUT = 30.0
#: The template field a caller's name fills.
USER_FIELD = "user_id"
#: The longest caller name, in characters.
MAX_USER = 100
#: The longest arguments of one call, as JSON characters (the tools bound each argument too).
MAX_ARGUMENTS = 100_000
#: Callers whose memories stay open; the least recent one is closed past this.
_OPEN_CALLERS = 16
#: The session a caller's memory is built on (the tools keep no chat log).
_SESSION = "mcp"
#: The caller the tools are listed for, before any call says whose they are.
_PROBE = "mcp-probe"
_INSTRUCTIONS = (
    "Long-term memories about the user, kept across conversations. Search them before "
    "answering about the user; save what the user tells you about themselves."
)

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Answer:
    """What a tool call answers."""

    text: str
    """The tool's reply, or what was wrong with the call."""
    error: bool
    """Whether the call failed."""


class ConfigTools:
    """The memory tools of a config, built for each caller.

    Args:
        config: a memory config (dict or file), as :func:`memories.create_memory` reads.
        namespace: the one namespace every call uses (labels joined by ``"."``).
        user: fills the config's ``{user_id}`` for every call, whatever the client declares.

    Raises:
        ConfigError: a config the server cannot serve safely, or a ``user`` that is
            not a label or that no template takes (docs/mcp.md lists the cases).
    """

    def __init__(
        self,
        config: Mapping[str, Any] | str | Path,
        *,
        namespace: str | None = None,
        user: str | None = None,
    ) -> None:
        options = load_config(config)
        self.user = None if user is None else _checked_user(user, "--user")
        self._open: Built[str, tuple[Any, dict[str, BaseTool]]] = Built(
            _OPEN_CALLERS, close=lambda kept: kept[0].close(timeout=DEFAULT_TIMEOUT)
        )
        self._factory = None
        if namespace is not None:
            memory = create_memory(with_namespace(options, namespace))
            self.whose = f"namespace {namespace_text(as_namespace(namespace))!r}"
        else:
            try:
                self._factory = memory_factory(options)
            except ConfigError as exc:
                raise ConfigError(
                    f"{exc} Or name the one namespace `memories mcp` serves with --namespace."
                ) from exc
            others = sorted(set(self._factory.fields) - {USER_FIELD})
            if others:
                raise ConfigError(
                    f"The config's namespace template names {others}; `memories mcp` fills only "
                    f"{{{USER_FIELD}}} (from --user or the client's name). Write the others out, "
                    "or give --namespace."
                )
            if self._factory.fields:
                memory = self._factory(_SESSION, **{USER_FIELD: _PROBE})
                who = repr(self.user) if self.user else "each client's declared name"
                self.whose = f"{{{USER_FIELD}}} = {who}"
            else:
                memory = self._factory(_SESSION)
                self.whose = "the namespace the config shares (shared: true)"
        self.tools: dict[str, BaseTool] = _tools_of(memory)
        """The tools by name, as listed."""
        self.schemas: dict[str, dict[str, Any]] = {n: _schema(t) for n, t in self.tools.items()}
        """Each tool's arguments, as a JSON Schema."""
        templated = self._factory is not None and bool(self._factory.fields)
        self._shared = None if templated else memory
        if templated:
            memory.close(timeout=DEFAULT_TIMEOUT)  # the probe: only listed, never called
        elif self.user is not None:
            raise ConfigError(
                f"--user {self.user!r} fills the config's {{{USER_FIELD}}}, and "
                f"{self.whose} is served to every caller: leave --user (and $MEMORIES_USER) "
                "out, or give the config a namespace template such as [users, '{user_id}']."
            )

    def caller(self, declared: str | None) -> str | None:
        """Whose memories a call uses: ``--user``, else the client's declared name (None: any).

        Raises:
            ConfigError: the caller is needed, and the client declared no usable name.
        """
        if self._shared is not None:
            return None
        if self.user is not None:
            return self.user
        if declared is None:
            raise ConfigError(
                "The client declared no name (MCP clientInfo) and the server was started "
                "without --user: whose memories to use is unknown. Start it with --user NAME."
            )
        return _checked_user(declared, "The client's declared name")

    def call(self, name: str, arguments: Mapping[str, Any] | None, *, client: str | None) -> Answer:
        """Run tool ``name`` for the caller ``client`` declares (see :meth:`caller`)."""
        if name not in self.tools:
            return Answer(f"No tool {name!r}; this server has {sorted(self.tools)}.", True)
        given = dict(arguments or {})
        problem = _argument_problem(name, self.schemas[name], given)
        if problem:
            return Answer(problem, True)
        try:
            reply = self._tools_for(self.caller(client))[name].invoke(given)
        except (ToolException, MemoriesError) as exc:
            return Answer(str(exc), True)
        except ValidationError as exc:
            return Answer(_validation_message(name, exc), True)
        return Answer(str(reply), False)

    def _tools_for(self, caller: str | None) -> dict[str, BaseTool]:
        if caller is None:
            return self.tools
        return self._open.built(caller, functools.partial(self._opened, caller))[1]

    def _opened(self, caller: str) -> tuple[Any, dict[str, BaseTool]]:
        """The caller's memory and its tools."""
        assert self._factory is not None
        memory = self._factory(_SESSION, **{USER_FIELD: caller})
        return memory, _tools_of(memory)

    def close(self, *, timeout: float | None = DEFAULT_TIMEOUT) -> bool:
        """Write what the memories still hold queued, and close them; False if time ran out."""
        memories = [memory for memory, _ in self._open.clear()]
        if self._shared is not None:
            memories.append(self._shared)
        return all([memory.close(timeout=timeout) for memory in memories])


def _tools_of(memory: Any) -> dict[str, BaseTool]:
    """The tools of each collection, profile and entity graph memory in ``memory``, raising
    their errors."""
    from memories.long_term.collection import CollectionMemory
    from memories.long_term.entity_graph import EntityMemory
    from memories.long_term.profile import ProfileMemory

    found: list[BaseTool] = []
    for leaf in leaves_of(memory):
        if isinstance(leaf, CollectionMemory):
            found.extend(memory_tools(leaf))
        elif isinstance(leaf, ProfileMemory):
            found.extend([read_profile_tool(leaf), profile_tool(leaf)])
        elif isinstance(leaf, EntityMemory):
            found.extend(entity_tools(leaf))
    if not found:
        kinds = [type(leaf).__name__ for leaf in leaves_of(memory)]
        raise ConfigError(
            f"`memories mcp` serves the tools of collection, profile and entity memories; this "
            f"config has {kinds}. Add a 'collection', 'profile' or 'entity' memory (a 'combined' "
            "one holds several)."
        )
    tools: dict[str, BaseTool] = {}
    for tool in found:
        if tool.name in tools:
            raise ConfigError(
                f"Two memories of the config would both serve {tool.name!r}: serve one "
                "collection, one profile and one entity memory per server (one config each)."
            )
        # The tools answer an agent's model with "Error: ..." text; here errors are raised
        # and become MCP tool errors.
        tools[tool.name] = tool.model_copy(
            update={"handle_tool_error": False, "handle_validation_error": False}
        )
    return tools


def _checked_user(value: str, source: str) -> str:
    if (
        not value
        or len(value) > MAX_USER
        or "." in value
        or value != value.strip()
        or any(ord(c) < 32 for c in value)
    ):
        raise ConfigError(
            f"{source} {value!r:.120} cannot name whose memories these are: a user is 1 to "
            f"{MAX_USER} characters, without '.', control characters or surrounding spaces. "
            "Start the server with --user NAME."
        )
    return value


def _argument_problem(name: str, schema: dict[str, Any], arguments: dict[str, Any]) -> str | None:
    """What is wrong with ``arguments`` before the tool's own checks: size, unknown names."""
    size = len(json.dumps(arguments, default=str))
    if size > MAX_ARGUMENTS:
        return f"The arguments are {size:,} characters of JSON; at most {MAX_ARGUMENTS:,}."
    known = set(schema.get("properties", {}))
    unknown = sorted(set(arguments) - known)
    if unknown:
        return (
            f"{name} takes {sorted(known)}, not {unknown}. Whose memories these are is "
            "set by the server, never by an argument."
        )
    return None


def _validation_message(name: str, error: ValidationError) -> str:
    problems = [
        f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']} "
        f"(got {e.get('input')!r:.60})"
        for e in error.errors()
    ]
    return f"Bad arguments for {name}: " + "; ".join(problems) + "."


def _schema(tool: BaseTool) -> dict[str, Any]:
    """The JSON Schema of what the model fills, as LangChain gives it to a model (no run config)."""
    return dict(convert_to_openai_tool(tool)["function"]["parameters"])


def create_server(tools: ConfigTools, *, timeout: float = DEFAULT_TIMEOUT) -> Server[Any]:
    """The MCP server (the SDK's low-level ``Server``) answering with ``tools``.

    Args:
        timeout: seconds a call may run before it answers an error (a write may yet complete).
    """
    listed = types.ListToolsResult(
        tools=[
            types.Tool(
                name=name,
                description=inspect.cleandoc(tool.description),
                input_schema=tools.schemas[name],
            )
            for name, tool in tools.tools.items()
        ]
    )

    async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> Any:
        return listed

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> Any:
        client = ctx.session.client_params
        declared = None if client is None else client.client_info.name
        run = functools.partial(tools.call, params.name, params.arguments, client=declared)
        try:
            with anyio.fail_after(timeout):
                answer = await anyio.to_thread.run_sync(run, abandon_on_cancel=True)
        except TimeoutError:
            answer = Answer(
                f"{params.name} had no answer from the stores within {timeout:g} s; "
                "try again later.",
                True,
            )
        except Exception as exc:  # a bug or a store's failure: the server carries on
            _log.exception("memories mcp: %s failed", params.name)
            answer = Answer(f"{params.name} failed: {type(exc).__name__}: {exc}", True)
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=answer.text)], is_error=answer.error
        )

    return Server(
        "memories",
        version=__version__,
        instructions=_INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


def serve(tools: ConfigTools, *, timeout: float = DEFAULT_TIMEOUT) -> None:
    """Answer an MCP client over stdin and stdout until it leaves; then close the memories."""
    server = create_server(tools, timeout=timeout)

    async def run() -> None:
        async with stdio_server() as (read, write):
            # a frame the transport cannot read is answered with a JSON-RPC error, not dropped
            await server.run(Answering(read, write), write, server.create_initialization_options())

    try:
        anyio.run(run)
    finally:
        tools.close()
