"""An entity memory in the inspector: its entities, relations (now and ended), merges and history.

Through the JSON API with an HTTP client, and once in a real headless browser
(Debian's chromium, as ``test_browser.py``), which also writes a screenshot.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import needs
from tests.inspector.conftest import IMAGE, SCRIPT, Filled, fill_entities

pytest.importorskip("httpx", reason=needs.extra("httpx"))
from starlette.testclient import TestClient

from memories.faces.server.app import create_app
from memories.faces.server.service import Inspector

BASE = "http://127.0.0.1"
MARKUP = f"{SCRIPT} {IMAGE}"


@pytest.fixture(scope="module")
def graphs(tmp_path_factory: pytest.TempPathFactory) -> Filled:
    return fill_entities(tmp_path_factory.mktemp("entities"))


@pytest.fixture(scope="module")
def client(graphs: Filled) -> Iterator[TestClient]:
    with TestClient(create_app(Inspector(graphs.config)), base_url=BASE) as client:
        yield client


def api(client: TestClient, path: str, status: int = 200) -> Any:
    response = client.get("/api" + path)
    assert response.status_code == status, response.text
    return response.json()


def said(turns: list[list[dict[str, Any]]]) -> list[str]:
    return [m["text"] for turn in turns for m in turn if m["type"] == "human"]


def test_the_overview_and_the_namespaces_count_the_entity_memory(client: TestClient) -> None:
    (row,) = [m for m in api(client, "/overview")["memories"] if m["id"] == "entity"]
    assert (row["type"], row["kind"], row["namespaces"]) == ("entity", "entities", 2)
    listed = {n["namespace"]: n["memories"] for n in api(client, "/namespaces")["namespaces"]}
    assert listed["users.maya"]["entity"] == 5  # Lisbon, Melanie, Mel (merged), Porto, User
    assert listed["users.omar"]["entity"] == 2  # Oslo, User
    (here,) = [m for m in api(client, "/namespaces/users.maya")["memories"] if m["id"] == "entity"]
    assert (here["kind"], here["documents"], here["status"]["pending"]) == ("entities", 5, 0)


def test_the_graph_shows_entities_relations_ended_relations_and_merges(
    client: TestClient,
) -> None:
    graph = api(client, "/namespaces/users.maya/memories/entity")
    names = {e["name"]: e for e in graph["entities"]}
    assert sorted(names) == ["Lisbon", "Melanie", "Porto", "User"]  # Mel stands in Melanie
    assert names["Melanie"]["aliases"] == ["Mel"]
    now = {r["text"]: r for r in graph["relations"]}
    assert sorted(now) == ["Melanie likes " + MARKUP, "User lives_in Porto", "User sister Melanie"]
    assert now["User lives_in Porto"]["invalid_at"] is None
    assert said(now["User lives_in Porto"]["turns"]) == ["I moved to Porto."]
    assert now["Melanie likes " + MARKUP]["turns"] == []  # a direct write
    (ended,) = graph["ended"]
    assert (ended["text"], ended["ended"]) == ("User lives_in Lisbon", "contradicted")
    assert ended["valid_at"] <= ended["invalid_at"]
    assert said(ended["turns"]) == ["I live in Lisbon."]
    assert said(ended["ended_by"]) == ["I moved to Porto."]
    (merge,) = graph["merges"]
    assert merge["name"] == "Mel"
    assert merge["merged_into"] == {"id": names["Melanie"]["id"], "name": "Melanie"}
    assert merge["merge_reason"] == "'Mel' is a short form of 'Melanie'"
    omar = api(client, "/namespaces/users.omar/memories/entity")
    assert [r["text"] for r in omar["relations"]] == ["User lives_in Oslo"]
    assert "Melanie" not in str(omar) and "Oslo" not in str(graph)  # each user's own graph


def test_an_entity_shows_its_versions_and_every_relation_it_is_part_of(
    client: TestClient,
) -> None:
    graph = api(client, "/namespaces/users.maya/memories/entity")
    (mel,) = graph["merges"]
    page = api(client, f"/namespaces/users.maya/memories/entity/items/{mel['id']}")
    assert page["entity"]["merge_reason"] == "'Mel' is a short form of 'Melanie'"
    (version,) = page["versions"]
    assert said(version["turns"]) == ["Mel called me today."]
    assert version["document"]["merged_into"] == mel["merged_into"]["id"]
    # Merged: the relations shown are those of the entity it stands in now.
    assert sorted(r["text"] for r in page["relations"]) == [
        "Melanie likes " + MARKUP,
        "User sister Melanie",
    ]
    melanie = api(
        client, f"/namespaces/users.maya/memories/entity/items/{mel['merged_into']['id']}"
    )
    assert [m["name"] for m in melanie["merged_here"]] == ["Mel"]
    user = next(e for e in graph["entities"] if e["name"] == "User")
    page = api(client, f"/namespaces/users.maya/memories/entity/items/{user['id']}")
    lived = [(r["object"], r["invalid_at"] is None) for r in page["relations"]]
    assert ("Lisbon", False) in lived and ("Porto", True) in lived


def test_an_unknown_or_another_users_entity_is_not_found(client: TestClient) -> None:
    omar = api(client, "/namespaces/users.omar/memories/entity")
    user = next(e for e in omar["entities"] if e["name"] == "User")
    for entity_id in ("nope", user["id"]):
        answer = api(client, f"/namespaces/users.maya/memories/entity/items/{entity_id}", 404)
        assert entity_id in answer["error"]


def test_markup_in_the_graph_is_escaped_in_its_pages(client: TestClient) -> None:
    graph = api(client, "/namespaces/users.maya/memories/entity")
    melanie = next(e for e in graph["entities"] if e["name"] == "Melanie")
    for path in ("", f"/items/{melanie['id']}"):
        html = client.get("/namespaces/users.maya/memories/entity" + path).text
        assert SCRIPT not in html and IMAGE not in html
        assert "&lt;script&gt;alert(1)&lt;/script&gt; &lt;img src=x onerror=alert(1)&gt;" in html


def test_the_graph_in_a_browser(graphs: Filled, tmp_path_factory: pytest.TempPathFactory) -> None:
    browser_tests = pytest.importorskip(
        "tests.inspector.test_browser", reason=needs.extra("playwright.sync_api")
    )
    folder = os.environ.get("MEMORIES_ARTIFACTS", browser_tests.ROOT / "artifacts")
    artifacts = Path(folder) / "inspector"
    artifacts.mkdir(parents=True, exist_ok=True)
    with (
        browser_tests.serving(Inspector(graphs.config)) as server,
        browser_tests.sync_api.sync_playwright() as playwright,
    ):
        context = playwright.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")),
            executable_path=str(browser_tests.CHROMIUM),
            headless=True,
            args=browser_tests.FLAGS,
            viewport={"width": 1200, "height": 800},
            timeout=30_000,
        )
        try:
            page = context.new_page()
            dialogs: list[str] = []
            page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
            page.goto(server + "/namespaces/users.maya")
            page.get_by_role("link", name="entity", exact=True).click()
            page.wait_for_url("**/memories/entity")
            assert page.get_by_role("cell", name="Mel", exact=True).first.is_visible()
            assert page.get_by_text("'Mel' is a short form of 'Melanie'").is_visible()
            assert page.locator("tr.ended").get_by_text("contradicted").is_visible()
            assert page.get_by_text(MARKUP).first.is_visible()  # text, not an element
            assert page.locator("main script").count() == 0 and page.locator("img").count() == 0
            page.screenshot(path=str(artifacts / "entities.png"), full_page=True)
            page.get_by_role("link", name="Melanie", exact=True).first.click()
            assert page.get_by_text("Also called: Mel").is_visible()
            assert page.get_by_role("link", name="Mel", exact=True).is_visible()  # merged into it
            assert page.get_by_text("My sister Melanie is kind.").first.is_visible()
            page.screenshot(path=str(artifacts / "entity.png"), full_page=True)
            time.sleep(0.3)  # an onerror handler would have fired by now
            assert dialogs == []
        finally:
            context.close()
