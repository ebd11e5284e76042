"""The inspector's memories per (namespace, session): built once, and closed when dropped."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from tests import needs
from tests.inspector.conftest import Filled

pytest.importorskip("httpx", reason=needs.extra("httpx"))

from memories.faces.server import service
from memories.faces.server.service import Inspector


def test_two_first_requests_build_one_memory_and_a_dropped_one_is_closed(
    filled: Filled, monkeypatch: pytest.MonkeyPatch
) -> None:
    inspector = Inspector(filled.config)
    opened = service.open_stores
    built: list[Any] = []

    def slow_open(*args: Any) -> Any:
        time.sleep(0.05)  # both requests are inside the build at once
        memory = opened(*args)
        built.append(memory)
        return memory

    monkeypatch.setattr(service, "open_stores", slow_open)
    requests = [
        threading.Thread(target=inspector._memory, args=(("users", "ana"), None)) for _ in range(2)
    ]
    for request in requests:
        request.start()
    for request in requests:
        request.join(timeout=30)
    assert len(built) == 1

    probe = inspector._memory(None, None)  # built first, for the list of memories; used now
    closed: list[Any] = []
    monkeypatch.setattr(type(built[0]), "close", lambda memory, **_: closed.append(memory))
    for user in range(32):  # the inspector keeps 32: the two used least recently are dropped
        inspector._memory(("users", f"u{user}"), None)
    assert closed == [built[0], probe]
