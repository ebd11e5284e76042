"""Expired, not yet swept: the inspector hides what the memory's own reads hide.

Ada's documents are written by a clock two hours behind with a time to live
of one hour: expired now, still in every store until a sweep. Bob's are
written now. The inspector (real time) must show Ada's as her memories read
them: a cleared profile and instructions, only her live collection memory,
no vector document.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from memories.core.combined import leaves_of
from memories.core.config import create_memory, with_namespace
from memories.faces.server import counts as counting
from memories.faces.server.service import Inspector, NotFound
from tests import needs
from tests.inspector.conftest import EMBEDDINGS
from tests.retention.conftest import expired_reads

pytest.importorskip("httpx", reason=needs.extra("httpx"))
from starlette.testclient import TestClient

from memories.faces.server.app import create_app


def _config(folder: Path) -> dict[str, Any]:
    stored = {"url": f"sqlite:///{folder / 'memories.db'}", "namespace": ["users", "{user_id}"]}
    indexed = {"path": str(folder / "chroma"), "embeddings": EMBEDDINGS, "write": "sync"}
    return {
        "type": "combined",
        "memories": [
            {"type": "profile", "policy": "manual", "ttl": 60, **stored},
            {"type": "instructions", "policy": "manual", "prompts": {"main": "Be brief."}}
            | {"ttl": 60, **stored},
            {"type": "collection", "policy": "manual", "ttl": 60, **stored, **indexed},
            {"type": "vector", "ttl": 60, "memory_key": "recalled", **indexed}
            | {"namespace": ["users", "{user_id}"]},
        ],
    }


def _write(config: dict[str, Any], user: str, clock: Any) -> dict[str, str]:
    """Each memory's document for ``user``, written at ``clock``'s time; the ids written."""
    timed = {**config, "memories": [{**m, "clock": clock} for m in config["memories"]]}
    profile, instructions, collection, vector = leaves_of(
        create_memory(with_namespace(timed, ("users", user)))
    )
    profile.put({"city": "Porto"})
    instructions.put({"main": "Answer in Portuguese."})
    ids = {"collection": collection.put(f"{user} lives in Porto")}
    ids["vector"] = vector.add([f"{user} plays chess in Porto"])[0]
    return ids


@pytest.fixture
def inspector(tmp_path: Path) -> tuple[Inspector, dict[str, str]]:
    config = _config(tmp_path)
    expired = _write(config, "ada", lambda: time.time() - 2 * 3600)
    _write(config, "bob", time.time)
    # one of Ada's memories written now: it stays in view beside the expired one
    *_, collection, _ = leaves_of(create_memory(with_namespace(config, ("users", "ada"))))
    expired["live"] = collection.put("ada drinks tea")
    return Inspector(config), expired


def test_expired_documents_are_left_out_of_the_listings_and_pages(
    inspector: tuple[Inspector, dict[str, str]],
) -> None:
    found, expired = inspector
    counts = {row["namespace"]: row["memories"] for row in found.namespaces()["namespaces"]}
    live = {"profile": 1, "instructions": 1, "collection": 1, "vector": 1}
    assert counts["users.bob"] == live
    assert counts["users.ada"] == {"profile": 0, "instructions": 0, "collection": 1, "vector": 0}

    page = {m["id"]: m["documents"] for m in found.namespace("users.ada")["memories"]}
    assert page == counts["users.ada"]
    assert found.items("users.ada", "profile")["document"] == {}
    assert found.items("users.ada", "instructions")["document"] == {"main": "Be brief."}

    collection = found.items("users.ada", "collection")
    assert [item["id"] for item in collection["items"]] == [expired["live"]]
    assert collection["total"] == 1
    assert found.items("users.ada", "collection", q="Porto")["total"] == 0
    vector = found.items("users.ada", "vector")
    assert vector["items"] == [] and vector["total"] == 0
    for memory in ("collection", "vector"):
        with pytest.raises(NotFound, match="expired"):
            found.item("users.ada", memory, expired[memory])
    assert found.item("users.ada", "collection", expired["live"])["current"] is not None

    with TestClient(create_app(found), base_url="http://127.0.0.1") as client:
        for memory in ("collection", "vector"):
            html = client.get(f"/namespaces/users.ada/memories/{memory}").text
            assert "ada lives in Porto" not in html and "ada plays chess" not in html
        assert "bob plays chess" in client.get("/namespaces/users.bob/memories/vector").text
        gone = client.get(f"/api/namespaces/users.ada/memories/vector/items/{expired['vector']}")
        assert gone.status_code == 404


def test_the_memory_reads_the_same_as_the_inspector(
    inspector: tuple[Inspector, dict[str, str]], tmp_path: Path
) -> None:
    found, expired = inspector
    config = _config(tmp_path)
    profile, instructions, collection, vector = leaves_of(
        create_memory(with_namespace(config, ("users", "ada")))
    )
    assert profile.get() == found.items("users.ada", "profile")["document"]
    assert instructions.get() == found.items("users.ada", "instructions")["document"]
    assert collection.get(expired["collection"]) is None
    assert [r.id for r in collection.list()] == [expired["live"]]
    assert vector.search("chess Porto") == []
    assert {e.key for e in vector.expired_items(vector.namespace)} == {expired["vector"]}
    assert asyncio.run(profile.aexpired_items()) == profile.expired_items()
    assert [e.namespace for e in profile.expired_items()] == [("users", "ada")]


def test_the_namespace_listing_reads_expired_items_a_page_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = _config(tmp_path)
    past = {
        **config,
        "memories": [{**m, "clock": lambda: time.time() - 7200} for m in config["memories"]],
    }
    written: dict[int, list[str]] = {}
    for timed, n in ((past, 7), (config, 2)):  # 7 expired (more than a page of 3), 2 live
        profile, instructions, collection, vector = leaves_of(
            create_memory(with_namespace(timed, ("users", "ada")))
        )
        profile.put({"city": "Porto"})
        instructions.put({"main": "Answer in Portuguese."})
        for i in range(n):
            collection.put(f"ada memory {i} of {n}")
        written[n] = vector.add([f"ada note {i} of {n}" for i in range(n)])
    # One live and one expired document deleted; the expired one's row outlives it (a crash
    # between the deletion and the discarding of its row: the sweep drops it later).
    vector.delete([written[2][0], written[7][0]])
    vector.expiry.set(vector.namespace, written[7][0], 60, now=time.time() - 7200)
    inspector = Inspector(config)

    monkeypatch.setattr(counting, "EXPIRED_PAGE", 3)
    reads = expired_reads(monkeypatch)
    counts = {row["namespace"]: row["memories"] for row in inspector.namespaces()["namespaces"]}
    assert counts["users.ada"] == {"profile": 1, "instructions": 1, "collection": 2, "vector": 1}
    # Counted in SQL; only the vector memory's 7 expired ids are read, 3 at a time, to
    # leave out the one deleted (its row outlives it): 6 of 7 expired are still stored.
    assert reads == [3, 3, 1]
    page = {m["id"]: m["documents"] for m in inspector.namespace("users.ada")["memories"]}
    assert page == counts["users.ada"]


def test_item_pages_and_one_item_read_only_the_expired_rows_at_hand(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = _config(tmp_path)
    past = {
        **config,
        "memories": [{**m, "clock": lambda: time.time() - 7200} for m in config["memories"]],
    }
    written: dict[int, tuple[list[str], list[str]]] = {}
    for timed, n in ((past, 7), (config, 5)):  # 7 expired, then 5 live (listed first: newest)
        _, _, collection, vector = leaves_of(create_memory(with_namespace(timed, ("users", "ada"))))
        kept = [collection.put(f"ada memory {i} of {n}") for i in range(n)]
        written[n] = (kept, vector.add([f"ada note {i} of {n}" for i in range(n)]))
    inspector = Inspector(config, page_size=2)
    monkeypatch.setattr(counting, "EXPIRED_PAGE", 3)
    reads = expired_reads(monkeypatch)
    collection_page = inspector.items("users.ada", "collection", page=2)
    assert collection_page["total"] == 5 and len(collection_page["items"]) == 2
    assert {i["id"] for i in collection_page["items"]} <= set(written[5][0])
    assert inspector.items("users.ada", "collection", q="memory")["total"] == 5
    assert reads == []  # left out in SQL: no expired row read
    vector_page = inspector.items("users.ada", "vector")
    assert vector_page["total"] == 5
    assert {i["id"] for i in vector_page["items"]} <= set(written[5][1])
    assert reads == [0]  # the page's first 3 ids asked about; the rest only counted
    reads.clear()
    with pytest.raises(NotFound, match="expired"):
        inspector.item("users.ada", "collection", written[7][0][0])
    assert inspector.item("users.ada", "vector", written[5][1][0])["id"] == written[5][1][0]
    with pytest.raises(NotFound, match="expired"):
        inspector.item("users.ada", "vector", written[7][1][0])
    assert reads == [1, 0, 1]  # one id looked up each time (before: every expired row)


def test_an_edit_and_a_rollback_keep_a_memorys_own_expiry(
    inspector: tuple[Inspector, dict[str, str]], tmp_path: Path
) -> None:
    # The collection's ttl (60) is for new memories: a permanent one edited in the
    # inspector stays permanent; an expired one is no memory to edit or roll back.
    _, expired = inspector
    service = Inspector(_config(tmp_path), allow_writes=True)
    *_, collection, _ = leaves_of(
        create_memory(with_namespace(_config(tmp_path), ("users", "ada")))
    )
    forever = collection.put("ada speaks Portuguese", ttl=None)
    service.edit(
        "users.ada", "collection", "ada speaks Spanish", item_id=forever, expected_version=1
    )
    service.rollback("users.ada", "collection", 1, item_id=forever, expected_version=2)
    assert collection.expiry.expires_at(collection.namespace, forever) is None
    with pytest.raises(NotFound):
        service.edit(
            "users.ada", "collection", "x", item_id=expired["collection"], expected_version=1
        )
    with pytest.raises(Exception, match="No memory"):
        service.rollback(
            "users.ada", "collection", 1, item_id=expired["collection"], expected_version=1
        )
