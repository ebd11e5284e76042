"""`memories mcp` over raw stdio: every frame gets an answer, an error when it cannot be read.

A client that sends a line the server cannot read (not JSON, nested deeper
than the SDK parses, a lone surrogate, the wrong shape) must get a JSON-RPC
error at once, not wait for its own timeout; the server carries on and logs
no traceback.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests import needs

pytest.importorskip("mcp", reason=needs.extra("mcp"))

from memories.faces.mcp_frames import MAX_NESTING

pytestmark = pytest.mark.server

#: Seconds to wait for one answer line (the first loads the stores; CI machines are busy).
ANSWER_TIMEOUT = 120.0
PARSE_ERROR, INVALID_REQUEST, INVALID_PARAMS = -32700, -32600, -32602


class RawClient:
    """``memories mcp`` in a subprocess, spoken to one line at a time."""

    def __init__(self, config: Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "memories.faces.cli", "mcp", "--config", str(config)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.next_id = 100
        self.pending = b""

    def send(self, line: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + b"\n")
        self.process.stdin.flush()

    def answer(self) -> dict[str, Any]:
        """The next line the server writes, as JSON; fails after ANSWER_TIMEOUT seconds."""
        assert self.process.stdout is not None
        descriptor = self.process.stdout.fileno()  # read it raw: poll() cannot see a buffer
        waiting = select.poll()  # not select(): a long test run's descriptors pass 1024
        waiting.register(descriptor, select.POLLIN)
        while b"\n" not in self.pending:
            assert waiting.poll(ANSWER_TIMEOUT * 1000), f"no answer within {ANSWER_TIMEOUT:g} s"
            chunk = os.read(descriptor, 1 << 16)
            assert chunk, "the server closed its stdout"
            self.pending += chunk
        line, self.pending = self.pending.split(b"\n", 1)
        return dict(json.loads(line))

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.next_id += 1
        frame = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
        self.send(json.dumps(frame).encode())
        return self.answer()

    def answers_to(self, line: bytes) -> list[dict[str, Any]]:
        """What the server answers to ``line``, which deserves one answer.

        A ping follows ``line``: the server answers a refused frame before it
        reads the ping, a tool call maybe after it (the call runs in a thread).
        """
        self.send(line)
        self.next_id += 1
        ping = self.next_id
        self.send(json.dumps({"jsonrpc": "2.0", "id": ping, "method": "ping"}).encode())
        answers: list[dict[str, Any]] = []
        pinged = False
        while not (pinged and answers):
            answer = self.answer()
            if answer.get("id") == ping:
                assert "result" in answer, answer  # the server carries on
                pinged = True
            else:
                answers.append(answer)
        return answers

    def close(self) -> str:
        """Stop the server; what it wrote to stderr."""
        assert self.process.stdin is not None and self.process.stderr is not None
        self.process.stdin.close()
        try:
            self.process.wait(timeout=30)
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait(timeout=10)
        return self.process.stderr.read().decode("utf-8", "replace")


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RawClient]:
    folder = tmp_path_factory.mktemp("mcp-frames")
    config = {
        "type": "profile",
        "url": f"sqlite:///{folder / 'memories.db'}",
        "namespace": ["users", "{user_id}"],
        "policy": "manual",
    }
    path = folder / "memories.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    raw = RawClient(path)
    initialized = raw.request(
        "initialize",
        {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "ada", "version": "1"},
        },
    )
    assert "result" in initialized, initialized
    raw.send(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}')
    yield raw
    stderr = raw.close()
    assert "Traceback" not in stderr, stderr


def call(request_id: int, arguments: str) -> bytes:
    """A tools/call frame of update_profile with ``arguments`` as written (raw JSON text)."""
    return (
        f'{{"jsonrpc": "2.0", "id": {request_id}, "method": "tools/call", "params": '
        f'{{"name": "update_profile", "arguments": {arguments}}}}}'
    ).encode()


def refused(answers: list[dict[str, Any]], request_id: int | None, code: int) -> str:
    (answer,) = answers
    assert answer["id"] == request_id and answer["error"]["code"] == code, answer
    return str(answer["error"]["message"])


def test_a_line_that_is_not_json_gets_a_parse_error(client: RawClient) -> None:
    message = refused(client.answers_to(b"not json"), None, PARSE_ERROR)
    assert message.startswith("Parse error: the line is not JSON")


def test_json_that_is_not_a_json_rpc_message_gets_an_invalid_request(client: RawClient) -> None:
    assert refused(client.answers_to(b"[]"), None, INVALID_REQUEST)
    assert refused(client.answers_to(b'{"jsonrpc": "2.0", "id": 7}'), 7, INVALID_REQUEST)


def test_arguments_nested_too_deep_get_an_error_with_the_requests_id(client: RawClient) -> None:
    deep = "[" * (MAX_NESTING + 50) + "]" * (MAX_NESTING + 50)
    message = refused(client.answers_to(call(1, deep)), 1, INVALID_REQUEST)
    assert f"nests deeper than {MAX_NESTING} levels" in message
    # 30,000 deep, under 64 KiB: deeper than Python's own parser goes, still an answer
    deepest = "[" * 30_000 + "]" * 30_000
    assert "nests deeper" in refused(client.answers_to(call(2, deepest)), None, INVALID_REQUEST)


def test_a_lone_surrogate_gets_an_error_with_the_requests_id(client: RawClient) -> None:
    frame = call(3, '{"operations": [{"op": "add", "path": "/x", "value": "\\ud800"}]}')
    message = refused(client.answers_to(frame), 3, INVALID_REQUEST)
    assert "lone surrogate (U+D800)" in message


def test_a_well_formed_call_after_refusals_is_answered(client: RawClient) -> None:
    answer = client.request("tools/call", {"name": "read_profile", "arguments": {}})
    assert answer["result"]["isError"] is False


_LINE_BREAKS = "\n\r"


def _not_a_message(line: str) -> bool:
    try:
        return not isinstance(json.loads(line), dict)
    except (ValueError, RecursionError):
        return True


_garbage = st.text(st.characters(exclude_characters=_LINE_BREAKS), max_size=80).filter(
    _not_a_message
)
_digits = st.text(st.characters(categories=["Nd", "No"]), min_size=1, max_size=4)
_surrogates = st.integers(0xD800, 0xDFFF).map(lambda n: f"\\u{n:04x}")
_deep = st.integers(1, 3_000).map(lambda d: "[" * d + "]" * d)
_arguments = st.one_of(
    _deep,
    _digits.map(lambda d: json.dumps({"operations": d})),
    _surrogates.map(lambda s: f'{{"operations": "{s}"}}'),
    _digits.map(lambda d: d),  # raw non-ASCII digits where a JSON value belongs
)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@example(garbage="\ud800{", arguments="1")
@given(garbage=st.none() | _garbage, arguments=_arguments)
def test_fuzzed_frames_each_get_one_answer_and_the_server_carries_on(
    client: RawClient, garbage: str | None, arguments: str
) -> None:
    client.next_id += 1
    request_id = None if garbage is not None else client.next_id
    # A lone surrogate goes out as the invalid UTF-8 bytes a broken client would send.
    line = (
        garbage.encode("utf-8", "surrogatepass")
        if garbage is not None
        else call(client.next_id, arguments)
    )
    (answer,) = client.answers_to(line)  # one answer, never silence, none left from before
    if "error" in answer:
        assert answer["error"]["code"] in (PARSE_ERROR, INVALID_REQUEST, INVALID_PARAMS), answer
        assert answer["id"] in (None, request_id), answer
    else:  # a call that reads: the tool answers (a refusal is a tool error)
        assert request_id is not None and answer["id"] == request_id, answer
        assert "result" in answer, answer
