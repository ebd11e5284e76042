"""The inspector's JSON API and pages through an HTTP client, over stores the tests fill."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import needs
from tests.inspector.conftest import IMAGE, SCRIPT, Filled

pytest.importorskip("httpx", reason=needs.extra("httpx"))
from starlette.testclient import TestClient

from memories.errors import ConfigError
from memories.faces.cli import main
from memories.faces.server.app import COOKIE, ROUTES, create_app
from memories.faces.server.service import Inspector

BASE = "http://127.0.0.1"


@pytest.fixture(scope="module")
def inspector(filled: Filled) -> Inspector:
    return Inspector(filled.config)


@pytest.fixture(scope="module")
def client(inspector: Inspector) -> Iterator[TestClient]:
    with TestClient(create_app(inspector), base_url=BASE) as client:
        yield client


def api(client: TestClient, path: str, status: int = 200) -> Any:
    response = client.get("/api" + path)
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    return response.json()


def rows(filled: Filled) -> dict[str, int]:
    """How many rows each table of the test database holds (to prove nothing was written).

    Empty tables are left out: a store makes its tables on first use, which a
    refused request may be (the item expiry ledger's, on a memory's first read).
    """
    with sqlite3.connect(filled.config.parent / "memories.db") as db:
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        counts = {t: db.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in tables}
        return {table: count for table, count in counts.items() if count}


# -- what the API shows ----------------------------------------------------------------


def test_the_overview_names_every_memory_with_its_counts(client: TestClient) -> None:
    overview = api(client, "/overview")
    by_id = {m["id"]: m for m in overview["memories"]}
    assert list(by_id) == ["token_buffer", "profile", "collection", "vector"]
    assert overview["read_only"] is True and overview["templated"] is True
    assert by_id["token_buffer"]["sessions"] == 2
    assert by_id["profile"]["namespaces"] == 2 and by_id["collection"]["namespaces"] == 2
    assert by_id["vector"]["namespaces"] == 2 and by_id["collection"]["searchable"]
    listed = api(client, "/namespaces")["namespaces"]
    assert sum(n["memories"]["collection"] for n in listed) == 5
    assert [n["memories"]["profile"] for n in listed] == [1, 1]


def test_every_documented_route_has_a_page_and_a_json_twin(
    client: TestClient, filled: Filled
) -> None:
    maya = filled.memory_ids["maya"]
    concrete = [
        "/",
        "/namespaces?q=maya",
        "/namespaces/users.maya",
        "/namespaces/users.maya/erase",
        "/namespaces/users.maya/memories/collection?q=tea",
        f"/namespaces/users.maya/memories/collection/items/{maya}",
        "/sessions?q=chat",
        "/sessions/maya-chat",
        "/search?namespace=users.maya&q=tea",
    ]
    assert len(concrete) == len(ROUTES)
    listed = client.get("/api").json()["routes"]
    assert [r["page"] for r in listed] == [path for path, _ in ROUTES]
    for path in concrete:
        page = client.get(path)
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        twin = "/api" + (path if path != "/" else "/overview")
        assert f'href="{twin.replace("&", "&amp;")}"' in page.text  # the page links its data
        assert client.get(twin).headers["content-type"] == "application/json"


def test_a_namespace_lists_each_memory_with_its_status(client: TestClient) -> None:
    found = {m["id"]: m for m in api(client, "/namespaces/users.maya")["memories"]}
    assert found["profile"]["status"]["version"] == 3
    assert found["profile"]["status"]["last_error"] == "the reply is not a JSON patch"
    assert found["profile"]["status"]["pending"] == 1
    assert found["collection"]["documents"] == 3
    assert found["vector"]["documents"] == 1
    assert found["vector"]["status"]["dead_letters"] == 0 and found["vector"]["dead_letters"] == []


def test_the_profile_shows_every_version_and_the_failed_update(client: TestClient) -> None:
    profile = api(client, "/namespaces/users.maya/memories/profile")
    assert profile["document"] == {"name": "maya", "city": "Porto"}
    kinds = [(c["version"], c["kind"]) for c in profile["items"]]
    assert kinds == [(None, "failed"), (3, "patch"), (2, "patch"), (1, "put")]
    failed = profile["items"][0]
    assert failed["error"] == "the reply is not a JSON patch"
    assert failed["raw"] == ["sure! " + SCRIPT]
    assert failed["turns"][0][0]["text"] == "I like tea"
    change = api(client, f"/namespaces/users.maya/memories/profile/items/{failed['id']}")
    assert change["change"]["ok"] is False and change["change"]["document"] is None
    second = api(
        client, "/namespaces/users.maya/memories/profile/items/" + profile["items"][2]["id"]
    )
    assert second["change"]["patch"] == [{"op": "add", "path": "/city", "value": "Lisbon"}]
    assert second["change"]["document"] == {"name": "maya", "city": "Lisbon"}


def test_a_collection_memory_shows_every_version_newest_first(
    client: TestClient, filled: Filled
) -> None:
    memory_id = filled.memory_ids["maya"]
    item = api(client, f"/namespaces/users.maya/memories/collection/items/{memory_id}")
    assert item["current"]["content"] == "maya drinks green tea"
    assert [v["content"] for v in item["versions"]] == [
        "maya drinks green tea",
        "maya drinks tea",
        "maya drinks coffee",
    ]
    assert item["versions"][0]["invalid_at"] is None
    assert all(v["invalid_at"] for v in item["versions"][1:])
    listing = api(client, "/namespaces/users.maya/memories/collection?q=green")
    assert [i["id"] for i in listing["items"]] == [memory_id] and listing["total"] == 1


def test_a_session_shows_its_edits_and_what_each_chat_memory_injects(client: TestClient) -> None:
    session = api(client, "/sessions/maya-chat")
    records = session["transcripts"][0]["records"]
    typo = next(r for r in records if r.get("message") and r["message"]["text"] == "typo")
    assert typo["state"] == "removed"
    assert any(r["record"] == "remove" and r["target"] == typo["seq"] for r in records)
    shown = session["shown"][0]
    assert shown["memory"] == "token_buffer"
    texts = [m["text"] for m in shown["messages"]]
    assert "I moved to Lisbon" in texts and "typo" not in texts
    sessions = api(client, "/sessions")
    assert {s["session_id"] for s in sessions["sessions"]} == {"maya-chat", "omar-chat"}
    assert sessions["total"] == 2


def test_search_gives_each_searchable_memory_its_scored_matches(client: TestClient) -> None:
    found = api(client, "/search?namespace=users.maya&q=green+tea&k=2")
    by_memory = {m["memory"]: m["results"] for m in found["memories"]}
    assert set(by_memory) == {"collection", "vector"}
    top = by_memory["collection"][0]
    assert top["text"] == "maya drinks green tea" and 0 < top["score"] <= 1
    assert len(by_memory["collection"]) == 2
    only = api(client, "/search?namespace=users.maya&q=tea&memory=collection")
    assert [m["memory"] for m in only["memories"]] == ["collection"]


def test_search_shows_why_each_result_ranked(client: TestClient) -> None:
    found = api(client, "/search?namespace=users.maya&q=green+tea+chess&k=5")
    for memory in found["memories"]:
        ranked = [sum(r["ranking"].values()) for r in memory["results"]]
        assert ranked == sorted(ranked, reverse=True)  # the parts add up to the order shown
        for result in memory["results"]:
            assert set(result["ranking"]) == {"dense", "lexical", "neighbours"}
            assert all(part >= 0 for part in result["ranking"].values())
    top = next(m for m in found["memories"] if m["memory"] == "collection")["results"][0]
    assert top["text"] == "maya drinks green tea"
    assert top["ranking"]["dense"] > 0 and top["ranking"]["lexical"] > 0
    page = client.get("/search?namespace=users.maya&q=green+tea+chess&k=5").text
    assert '<th class="num">Lexical</th>' in page and "Neighbours" in page
    assert f"{top['ranking']['lexical']:.3f}" in page


def test_listings_are_paginated(filled: Filled) -> None:
    with TestClient(create_app(Inspector(filled.config, page_size=1)), base_url=BASE) as client:
        first, second = api(client, "/namespaces"), api(client, "/namespaces?page=2")
        assert (first["total"], first["pages"]) == (2, 2)
        assert [n["namespace"] for n in first["namespaces"] + second["namespaces"]] == [
            "users.maya",
            "users.omar",
        ]
        assert api(client, "/namespaces?page=3")["namespaces"] == []
        sessions = api(client, "/sessions?page=2")
        assert len(sessions["sessions"]) == 1 and sessions["total"] == 2


# -- one user's data never in another's listing ------------------------------------------


@pytest.mark.parametrize(("user", "other"), [("maya", "omar"), ("omar", "maya")])
def test_one_users_items_are_never_in_anothers_listing(
    client: TestClient, user: str, other: str
) -> None:
    where = f"/namespaces/users.{user}"
    listings = [api(client, f"{where}/memories/{m}") for m in ("profile", "collection", "vector")]
    found = api(client, f"/search?namespace=users.{user}&q={other}+drinks+tea+chess")
    hits = [hit for memory in found["memories"] for hit in memory["results"]]
    assert len(hits) >= 3  # the search found things: only ever this user's
    seen = json.dumps([*listings, *hits])
    assert user in seen and other not in seen


def test_an_item_of_another_namespace_is_not_found_through_this_one(
    client: TestClient, filled: Filled
) -> None:
    omars = filled.memory_ids["omar"]
    answer = api(client, f"/namespaces/users.maya/memories/collection/items/{omars}", 404)
    assert "error" in answer and "omar" not in json.dumps(answer).replace(omars, "")


# -- bad input: clear 4xx, nothing changed ------------------------------------------------


@pytest.mark.parametrize(
    ("path", "status"),
    [
        ("/namespaces/users.nobody", 404),
        ("/namespaces/users..maya", 400),
        ("/namespaces/users.maya%00", 400),
        ("/namespaces/" + "x" * 300, 400),
        ("/namespaces/users.maya/memories/nope", 404),
        ("/namespaces/users.maya/memories/token_buffer", 404),
        ("/namespaces/users.maya/memories/collection/items/nope", 404),
        ("/namespaces/users.maya/memories/collection/items/../../../etc", 404),
        ("/namespaces/users.maya/memories/profile/items/999", 404),
        ("/namespaces/users.maya/memories/vector/items/nope", 404),
        ("/sessions/nobody", 404),
        ("/namespaces?page=0", 400),
        ("/namespaces?page=abc", 400),
        ("/namespaces?page=99999999999", 400),
        ("/namespaces?q=" + "q" * 201, 400),
        ("/sessions?q=%0a", 400),
        ("/search?namespace=users.maya&q=tea&k=0", 400),
        ("/search?namespace=users.maya&q=tea&memory=profile", 404),
        ("/search?namespace=users.nobody&q=tea", 404),
        ("/nowhere", 404),
    ],
)
def test_bad_requests_get_a_clear_json_answer(client: TestClient, path: str, status: int) -> None:
    answer = api(client, path, status)
    assert answer["status"] == status and answer["error"]
    assert "Traceback" not in json.dumps(answer)
    page = client.get(path)
    assert page.status_code == status and "Traceback" not in page.text


def test_an_oversize_query_string_is_refused(client: TestClient) -> None:
    assert api(client, "/namespaces?q=" + "a" * 3000, 414)["status"] == 414


@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH", "DELETE"])
def test_every_write_method_is_refused_and_nothing_changes(
    client: TestClient, filled: Filled, method: str
) -> None:
    before = rows(filled)
    for path in ("/api/overview", "/api/namespaces/users.maya/memories/collection", "/"):
        response = client.request(method, path, content=b'{"content": "x"}')
        assert response.status_code == 405
        assert "read-only" in response.text
    assert rows(filled) == before


def test_reading_every_page_writes_nothing(client: TestClient, filled: Filled) -> None:
    before = rows(filled)
    for path in ("/", "/namespaces", "/namespaces/users.maya", "/sessions/maya-chat"):
        client.get(path)
        client.get(path.replace("/", "/api/", 1) if path != "/" else "/api/overview")
    client.get("/namespaces/users.maya/memories/profile")
    assert rows(filled) == before


def test_a_failure_inside_is_a_500_without_a_traceback(inspector: Inspector) -> None:
    class Broken(Inspector):
        def overview(self) -> dict[str, Any]:
            raise RuntimeError("secret detail")

    broken = Broken.__new__(Broken)
    broken.__dict__.update(inspector.__dict__)
    app = create_app(broken)
    with TestClient(app, base_url=BASE, raise_server_exceptions=False) as client:
        for path in ("/api/overview", "/"):
            response = client.get(path)
            assert response.status_code == 500
            assert "Traceback" not in response.text and "secret detail" not in response.text


def test_a_store_that_hangs_gets_a_504_within_the_timeout(inspector: Inspector) -> None:
    class Hanging(Inspector):
        def overview(self) -> dict[str, Any]:
            time.sleep(3)
            return {}

    hanging = Hanging.__new__(Hanging)
    hanging.__dict__.update(inspector.__dict__)
    with TestClient(create_app(hanging, timeout=0.3), base_url=BASE) as client:
        start = time.monotonic()
        assert api(client, "/overview", 504)["status"] == 504
        assert time.monotonic() - start < 2


def test_another_host_name_is_refused(client: TestClient) -> None:
    response = client.get("/api/overview", headers={"host": "evil.example"})
    assert response.status_code == 400


# -- the token ----------------------------------------------------------------------------


def test_with_a_token_every_request_needs_it(inspector: Inspector) -> None:
    with TestClient(create_app(inspector, token="s3cret"), base_url=BASE) as client:
        missing = client.get("/api/overview")
        assert missing.status_code == 401 and missing.json()["status"] == 401
        assert client.get("/").status_code == 401
        assert (
            client.get("/api/overview", headers={"authorization": "Bearer nope"}).status_code == 401
        )
        assert client.get("/?token=nope").status_code == 401
        bearer = client.get("/api/overview", headers={"authorization": "Bearer s3cret"})
        assert bearer.status_code == 200
        assert client.get("/api", headers={"x-memories-token": "s3cret"}).status_code == 200
        once = client.get("/namespaces?q=maya&token=s3cret", follow_redirects=False)
        assert once.status_code == 303 and once.headers["location"] == "/namespaces?q=maya"
        assert "httponly" in once.headers["set-cookie"].lower()
        assert client.cookies.get(COOKIE) == "s3cret"
        assert client.get("/namespaces/users.maya").status_code == 200  # the cookie


# -- escaping ------------------------------------------------------------------------------


def test_markup_in_a_memory_is_escaped_in_every_page(client: TestClient, filled: Filled) -> None:
    failed = api(client, "/namespaces/users.maya/memories/profile")["items"][0]["id"]
    pages = [
        "/namespaces/users.maya/memories/collection",
        f"/namespaces/users.maya/memories/collection/items/{filled.markup_id}",
        f"/namespaces/users.maya/memories/profile/items/{failed}",  # the model's raw reply
        "/search?namespace=users.maya&q=script+alert",
    ]
    for path in pages:
        page = client.get(path)
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page.text, path
        assert SCRIPT not in page.text and IMAGE not in page.text
        assert "script-src" not in page.headers["content-security-policy"]  # no script at all
        assert page.headers["x-content-type-options"] == "nosniff"
    answer = client.get(f"/api/namespaces/users.maya/memories/collection/items/{filled.markup_id}")
    assert answer.headers["content-type"] == "application/json"
    assert answer.json()["current"]["content"] == f"{SCRIPT} {IMAGE}"


# -- starting ------------------------------------------------------------------------------


def test_serving_beyond_loopback_without_a_token_is_refused_at_start(
    filled: Filled, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MEMORIES_TOKEN", raising=False)
    for host in ("0.0.0.0", "192.168.1.10", "::", "example.org"):
        assert main(["serve", "--config", str(filled.config), "--host", host]) == 2
        assert "set a token" in capsys.readouterr().err


def test_the_inspector_never_creates_a_missing_database(tmp_path: Path) -> None:
    config = {"type": "buffer", "history": {"type": "sqlite", "path": str(tmp_path / "no.db")}}
    with pytest.raises(ConfigError, match="does not exist"):
        Inspector(config)
    assert not (tmp_path / "no.db").exists()


def test_the_inspector_never_creates_a_missing_chroma_folder(tmp_path: Path) -> None:
    """As `memories inspect`: its overview made the folder of a vector memory never written."""
    folder = tmp_path / "vectors.chroma"
    config = {
        "type": "vector",
        "path": str(folder),
        "embeddings": "tests.vector.conftest:WordEmbeddings",
        "namespace": ["users", "ada"],
    }
    with pytest.raises(ConfigError, match="the folder does not exist"):
        Inspector(config).overview()
    assert not folder.exists()


@pytest.mark.parametrize("k", [2.5, True, None])
def test_a_search_from_python_takes_k_as_a_whole_number_only(inspector: Inspector, k: Any) -> None:
    # the page parses k from digits; from Python, 2.5 and True reached the stores and None
    # was a TypeError
    from memories.errors import InvalidInputError

    with pytest.raises(InvalidInputError, match=r"^k must be a whole number from 1 to 50"):
        inspector.search("users.maya", "tea", k=k)
