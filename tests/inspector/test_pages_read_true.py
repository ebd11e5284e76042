"""What the pages show is what is stored, readable: text escaped once, diffs as diffs, ISO times.

Each check reads the HTML a person sees (and the JSON twin where it says the
same), over stores holding an instructions memory whose prompt has an
apostrophe and markup.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import needs
from tests.inspector.conftest import SCRIPT, Demo, Filled, fill_for_writes, with_instructions

pytest.importorskip("httpx", reason=needs.extra("httpx"))
from starlette.testclient import TestClient

from memories.core.combined import leaves_of
from memories.core.config import create_memory, with_namespace, with_session
from memories.faces.server.app import create_app
from memories.faces.server.service import Inspector
from tests.inspector.test_api import BASE

INSTRUCTIONS = "/namespaces/users.maya/memories/instructions"
#: A Unix time as the stores keep it (seconds since 1970, with a fraction).
EPOCH = re.compile(r"\b1[0-9]{9}\.[0-9]+\b")


@pytest.fixture(scope="module")
def filled(tmp_path_factory: pytest.TempPathFactory) -> Filled:
    folder = tmp_path_factory.mktemp("pages")
    found = fill_for_writes(folder)  # maya's instructions: "Be brief." then "Be brief and kind."
    config = with_instructions(folder)
    _, profile, *_, instructions = leaves_of(
        create_memory(with_namespace(config, ("users", "maya")))
    )
    instructions.put({"main": f"Remember the user's name.\nNever run {SCRIPT}."})
    profile.put({"name": "Maya O'Neil", "note": SCRIPT})
    return found


@pytest.fixture(scope="module")
def client(filled: Filled) -> Iterator[TestClient]:
    with TestClient(create_app(Inspector(filled.config)), base_url=BASE) as client:
        yield client


def test_an_instructions_page_shows_its_text_escaped_once(client: TestClient) -> None:
    page = client.get(INSTRUCTIONS).text
    assert "user\\u0027s" not in page and "\\u003c" not in page
    assert "Remember the user&#39;s name." in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and SCRIPT not in page


def test_an_instructions_diff_shows_removed_and_added_lines_apart(client: TestClient) -> None:
    page = client.get(INSTRUCTIONS).text
    assert '<div class="diff-removed">-Be brief and kind.</div>' in page
    assert '<div class="diff-added">+Remember the user&#39;s name.</div>' in page
    assert "\\n" not in page
    newest = client.get("/api" + INSTRUCTIONS).json()["items"][0]
    kinds = [line["kind"] for line in newest["diff"][0]["lines"]]
    assert kinds == ["file", "file", "hunk", "removed", "added", "added"]
    change = client.get(f"{INSTRUCTIONS}/items/{newest['id']}")  # the history's link
    assert change.status_code == 200, change.text
    assert '<div class="diff-added">+Remember the user&#39;s name.</div>' in change.text


def test_an_instructions_history_gives_iso_times_not_unix_seconds(client: TestClient) -> None:
    page = client.get(INSTRUCTIONS).text
    assert not EPOCH.search(page), EPOCH.search(page)
    for row in client.get("/api" + INSTRUCTIONS).json()["items"]:
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00", row["created_at"]), row


def test_a_profile_document_reads_as_json_text_escaped_once(client: TestClient) -> None:
    page = client.get("/namespaces/users.maya/memories/profile").text
    assert "\\u0027" not in page and "\\u003c" not in page and "\\u003e" not in page
    assert "&#34;name&#34;: &#34;Maya O&#39;Neil&#34;" in page and SCRIPT not in page


# -- the overview, lists and search ------------------------------------------------------------


def test_each_chat_memory_counts_its_own_sessions_and_names_its_store_readably(
    tmp_path: Path,
) -> None:
    db = tmp_path / "chat.db"
    config = {
        "type": "combined",
        "memories": [
            {"type": "buffer", "history": {"type": "sqlite", "path": str(db), "session_id": "a"}},
            {
                "type": "window",
                "memory_key": "recent",
                "history": {"type": "sqlite", "path": str(db), "session_id": "b"},
            },
        ],
    }
    create_memory(config).save_context({"input": "hi"}, {"output": "hello"})
    create_memory(with_session(config, "c")).save_context({"input": "hi"}, {"output": "hey"})
    inspector = Inspector(config)
    rows = {row["id"]: row for row in inspector.overview()["memories"]}
    assert (rows["buffer"]["sessions"], rows["window"]["sessions"]) == (1, 1)  # not the table's 3
    assert rows["buffer"]["store"] == f"SQLiteHistory · {db} · session a"
    with TestClient(create_app(inspector), base_url=BASE) as client:
        page = client.get("/").text
    assert "SQLiteHistory(" not in page and "/<wbr>chat.db · session a" in page


def test_an_id_shortened_as_lists_show_it_opens_the_item(
    client: TestClient, filled: Filled
) -> None:
    whole = filled.memory_ids["maya"]
    listing = client.get("/namespaces/users.maya/memories/collection").text
    assert f">{whole[:12]}</a>" in listing
    short = client.get(f"/api/namespaces/users.maya/memories/collection/items/{whole[:12]}")
    assert short.status_code == 200 and short.json()["id"] == whole
    assert client.get("/namespaces/users.maya/memories/collection/items/zz").status_code == 404


def test_a_search_without_a_namespace_keeps_the_query_and_says_what_to_choose(
    client: TestClient,
) -> None:
    answer = client.get("/api/search?q=tea").json()
    assert answer["query"] == "tea" and "Choose a namespace" in answer["message"]
    page = client.get("/search?q=tea").text
    assert 'value="tea"' in page and "/search?namespace=users.maya&amp;q=tea" in page


def test_the_erase_preview_of_a_namespace_lists_only_that_namespaces_stores(demo: Demo) -> None:
    preview = Inspector(demo.config).erasure("users.maya")
    assert preview["stores"], preview
    for line in preview["stores"]:  # not the summary memories' sessions ("namespace summary")
        assert ", namespace " not in line["store"] or line["store"].endswith("users.maya"), line
    assert ", namespace summary" not in preview["text"]
