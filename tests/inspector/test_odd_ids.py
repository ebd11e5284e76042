"""Ids and namespaces holding ``/``, ``%``, spaces and non-ASCII open by URL, and render inert.

The links the pages give are followed as a browser would: each segment is
percent-encoded (``/`` as ``%2F``), and the routes decode it once.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from memories.core.combined import leaves_of
from memories.core.config import create_memory, with_namespace, with_session
from memories.faces.server.service import Inspector
from tests import needs
from tests.inspector.conftest import EMBEDDINGS, SCRIPT

pytest.importorskip("httpx", reason=needs.extra("httpx"))
from starlette.testclient import TestClient

from memories.faces.server.app import create_app

#: A namespace label, a document id and a session id a URL must carry intact.
LABEL = "team/a b%é"
DOC_ID = "notes/2024 50% café"
SESSION = "s/1 50% ünï"


def _config(folder: Path) -> dict[str, Any]:
    return {
        "type": "combined",
        "memories": [
            {
                "type": "buffer",
                "history": {"type": "sqlite", "path": str(folder / "memories.db")},
            },
            {
                "type": "vector",
                "path": str(folder / "chroma"),
                "embeddings": EMBEDDINGS,
                "namespace": ["users", "{user_id}"],
                "write": "sync",
                "memory_key": "recalled",
            },
        ],
    }


@pytest.fixture
def client(tmp_path: Path) -> Any:
    config = _config(tmp_path)
    buffer, vector = leaves_of(
        create_memory(with_session(with_namespace(config, ("users", LABEL)), SESSION))
    )
    vector.add([f"{SCRIPT} Ada's notes"], ids=[DOC_ID])
    buffer.chat_memory.add_messages([HumanMessage(f"{SCRIPT} hi"), AIMessage("hello")])
    with TestClient(create_app(Inspector(config)), base_url="http://127.0.0.1") as test_client:
        yield test_client


def _links(html: str, prefix: str) -> list[str]:
    return [link for link in re.findall(r'href="([^"]+)"', html) if link.startswith(prefix)]


def test_links_to_odd_ids_open_their_pages(client: TestClient) -> None:
    namespace = f"users.{LABEL}"
    [listed] = _links(client.get("/namespaces").text, "/namespaces/")
    assert listed == "/namespaces/users.team%2Fa%20b%25%C3%A9"
    assert client.get(listed).status_code == 200

    memory_page = f"{listed}/memories/vector"
    assert memory_page in _links(client.get(listed).text, "/namespaces/")
    [item_link] = _links(client.get(memory_page).text, f"{memory_page}/items/")
    assert item_link == f"{memory_page}/items/notes%2F2024%2050%25%20caf%C3%A9"
    page = client.get(item_link)
    assert page.status_code == 200
    assert SCRIPT not in page.text and "&lt;script&gt;alert(1)&lt;/script&gt; Ada&#39;s notes" in (
        page.text
    )
    found = client.get("/api" + item_link).json()
    assert (found["namespace"], found["id"]) == (namespace, DOC_ID)

    [session_link] = _links(client.get("/sessions").text, "/sessions/")
    assert session_link == "/sessions/s%2F1%2050%25%20%C3%BCn%C3%AF"
    transcript = client.get(session_link)
    assert transcript.status_code == 200 and SCRIPT not in transcript.text
    assert client.get("/api" + session_link).json()["session_id"] == SESSION


def test_an_odd_id_that_is_not_there_is_not_found(client: TestClient) -> None:
    where = "/api/namespaces/users.team%2Fa%20b%25%C3%A9/memories/vector/items/"
    assert client.get(where + "notes%2F2025").status_code == 404
    # a "/" sent as is still separates segments: this names no route
    assert client.get(where + "notes/2024%2050%25%20caf%C3%A9").status_code == 404


def test_a_json_memory_reads_in_the_inspector_as_the_collection_embeds_it() -> None:
    """A structured memory's text is the collection's own: non-ASCII as written, not escaped."""
    from memories.faces.server.rows import collection_item, hit_row
    from memories.long_term.collection.records import MemoryRecord
    from memories.stores.documents import ProfileItem

    content = {"city": "Zürich", "note": "café"}
    item = ProfileItem(("users", "maya"), "memory:m1", {"content": content}, 1, 0.0, 0.0)
    assert collection_item(item)["content"] == '{"city": "Zürich", "note": "café"}'
    when = datetime.now(UTC)
    record = MemoryRecord(id="m1", content=content, metadata={}, created_at=when, updated_at=when)
    assert hit_row(record)["text"] == '{"city": "Zürich", "note": "café"}'
