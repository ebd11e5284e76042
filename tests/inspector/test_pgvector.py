"""The inspector's vector pages on PostgreSQL with pgvector: the same pages as on Chroma.

Ada's vector memory lives in a real pgvector database: two documents written
by a clock two hours behind with a time to live of one hour (expired, not
swept) and one written now. Its listing, its item page and their JSON twins
show the live one only, read through the memory's backend.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest

from memories import VectorMemory
from memories.faces.server.service import Inspector, NotFound
from tests import needs
from tests.inspector.conftest import EMBEDDINGS, SCRIPT
from tests.postgres import PostgresServer
from tests.vector.conftest import pgvector_server  # noqa: F401  (the module's server)

pytest.importorskip("httpx", reason=needs.extra("httpx"))
from starlette.testclient import TestClient

from memories.faces.server.app import create_app


@pytest.fixture
def written(pgvector_server: PostgresServer) -> tuple[dict[str, Any], str, dict[str, str]]:  # noqa: F811
    """A config on the server, the namespace holding Ada's documents, and their ids."""
    prefix = f"t{uuid.uuid4().hex[:12]}"
    options = {"vectors": pgvector_server.url, "embeddings": EMBEDDINGS}
    past = VectorMemory(namespace=(prefix, "ada"), clock=lambda: time.time() - 7200, **options)
    expired, _ = past.add(["Ada is in Rome", "Ada is at the dentist"], ttl=60)
    live = VectorMemory(namespace=(prefix, "ada"), **options)
    [chess] = live.add([f"{SCRIPT} Ada plays chess"], ids=["chess"])
    config = {"type": "vector", "namespace": [prefix, "{user_id}"], **options}
    return config, f"{prefix}.ada", {"expired": expired, "live": chess}


def test_the_item_pages_read_pgvector_and_hide_what_expired(
    written: tuple[dict[str, Any], str, dict[str, str]],
) -> None:
    config, namespace, ids = written
    inspector = Inspector(config)
    listed = inspector.items(namespace, "vector")
    assert [item["id"] for item in listed["items"]] == [ids["live"]]
    assert (listed["total"], listed["pending"]) == (1, 0)
    assert listed["items"][0]["text"] == f"{SCRIPT} Ada plays chess"
    assert inspector.items(namespace, "vector", q="Rome")["total"] == 0
    assert inspector.item(namespace, "vector", ids["live"])["text"].endswith("Ada plays chess")
    with pytest.raises(NotFound, match="expired"):
        inspector.item(namespace, "vector", ids["expired"])
    with pytest.raises(NotFound, match="No document"):
        inspector.item(namespace, "vector", "never-written")

    base = f"/namespaces/{namespace}/memories/vector"
    with TestClient(create_app(inspector), base_url="http://127.0.0.1") as client:
        twin = client.get(f"/api{base}").json()
        assert [item["id"] for item in twin["items"]] == [ids["live"]]
        page = client.get(base)
        assert page.status_code == 200 and "Ada plays chess" in page.text
        assert "Ada is in Rome" not in page.text and SCRIPT not in page.text  # shown as text
        item = client.get(f"{base}/items/{ids['live']}")
        assert item.status_code == 200 and "Ada plays chess" in item.text
        assert client.get(f"/api{base}/items/{ids['live']}").json()["id"] == ids["live"]
        for path in (f"{base}/items/{ids['expired']}", f"/api{base}/items/{ids['expired']}"):
            assert client.get(path).status_code == 404
