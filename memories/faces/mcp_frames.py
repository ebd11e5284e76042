"""Every frame an MCP client sends gets an answer: a JSON-RPC error for one the server cannot read.

The SDK's stdio transport hands the server the exception of a line that is not a JSON-RPC
message, and the server drops it: the client would wait for its own timeout. :class:`Answering`
answers such a frame with ``-32700`` (not JSON) or ``-32600`` (JSON, not a request; with
its id when one can be read). A frame that reads costs nothing more.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any

import mcp.types as types
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from memories.errors import InvalidInputError
from memories.kernel.bounded_json import read_json

__all__ = ["MAX_NESTING", "Answering", "refusal"]

#: How deep a frame may nest (arrays and objects), about what the SDK's JSON parser reads.
MAX_NESTING = 198

_log = logging.getLogger(__name__)


class Answering:
    """The transport's read stream, less what it cannot read: that is answered on ``write``.

    Args:
        read: the transport's stream of messages and read errors.
        write: the transport's stream to the client.
    """

    def __init__(self, read: Any, write: Any) -> None:
        self._read = read
        self._write = write

    @property
    def last_context(self) -> Any:
        """The context the transport read the last message in (the SDK's tracing reads it)."""
        return getattr(self._read, "last_context", None)

    async def receive(self) -> SessionMessage:
        return await self._next_message(self._read.receive)

    async def __anext__(self) -> SessionMessage:
        return await self._next_message(self._read.__anext__)

    async def _next_message(self, take: Callable[[], Awaitable[Any]]) -> SessionMessage:
        """The next message ``take`` gives, each read error before it answered on ``write``."""
        while True:
            item = await take()
            if not isinstance(item, Exception):
                return item
            error = refusal(item)
            _log.warning("memories mcp: refused a frame: %s", error.error.message)
            await self._write.send(SessionMessage(error))

    def __aiter__(self) -> Answering:
        return self

    async def aclose(self) -> None:
        await self._read.aclose()

    async def __aenter__(self) -> Answering:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> None:
        await self.aclose()


def refusal(problem: Exception) -> types.JSONRPCError:
    """The JSON-RPC error that answers a frame the transport could not read as a message."""
    errors = problem.errors() if isinstance(problem, ValidationError) else []
    if not errors:
        return _error(None, types.PARSE_ERROR, f"Parse error: {problem}")
    if errors[0]["type"] != "json_invalid":  # JSON, not a JSON-RPC message
        given = next((e["input"] for e in errors if isinstance(e.get("input"), dict)), None)
        return _error(
            _id_of(given),
            types.INVALID_REQUEST,
            "Invalid Request: not a JSON-RPC 2.0 request, notification or response "
            f"({errors[0]['msg']} at {'.'.join(map(str, errors[0]['loc'][1:])) or 'the top'}).",
        )
    line = errors[0].get("input")
    if not isinstance(line, str):
        return _error(None, types.PARSE_ERROR, f"Parse error: {errors[0]['msg']}.")
    try:
        frame = json.loads(line)
    except RecursionError:
        frame = None  # too deep to read even its id: read_json says so below
    except ValueError as exc:
        return _error(None, types.PARSE_ERROR, f"Parse error: the line is not JSON ({exc}).")
    try:
        read_json(line, what="the frame", max_nesting=MAX_NESTING)
    except InvalidInputError as exc:
        message = f"Invalid Request: {exc}"
    else:
        message = f"Invalid Request: {errors[0]['msg']}."
    return _error(_id_of(frame), types.INVALID_REQUEST, message)


def _error(request_id: Any, code: int, message: str) -> types.JSONRPCError:
    return types.JSONRPCError(
        jsonrpc="2.0", id=request_id, error=types.ErrorData(code=code, message=message)
    )


def _id_of(frame: Any) -> int | str | None:
    """The request's id, when the frame is an object with a usable one."""
    found = frame.get("id") if isinstance(frame, dict) else None
    return found if isinstance(found, int | str) and not isinstance(found, bool) else None
