"""The inspector's actions (``--allow-writes``): edit, delete, roll back, retry dead letters.

Each action is checked through the JSON API and through the page's form, and
then in the store itself; every refused request (read-only, a missing or
wrong CSRF token, another site's Origin, a stale version, an unknown id, a
forged namespace, an oversize body, a wrong method) leaves every table as it
was.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests import needs
from tests.inspector.conftest import Filled, fill_for_writes

pytest.importorskip("httpx", reason=needs.extra("httpx"))
from starlette.testclient import TestClient

from memories.core.combined import leaves_of
from memories.core.config import create_memory, with_namespace
from memories.core.erasure import erase_user
from memories.errors import VersionConflictError
from memories.faces.server.app import ACTIONS, CSRF_FIELD, MAX_BODY, create_app
from memories.faces.server.service import Inspector
from tests.inspector.test_api import BASE, rows

MAYA = "/namespaces/users.maya/memories"


@pytest.fixture
def filled(tmp_path: Path) -> Filled:
    """Fresh stores per test (the actions change them), with a dead letter of maya's."""
    return fill_for_writes(tmp_path)


@pytest.fixture
def writer(filled: Filled) -> Inspector:
    return Inspector(filled.config, allow_writes=True)


@pytest.fixture
def client(writer: Inspector) -> Iterator[TestClient]:
    with TestClient(create_app(writer), base_url=BASE) as client:
        yield client


def post(client: TestClient, path: str, body: dict[str, Any], status: int = 200) -> Any:
    response = client.post("/api" + path, json=body)
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    return response.json()


def csrf_of(client: TestClient, page: str) -> str:
    """The CSRF token a page's forms carry."""
    found = re.search(rf'name="{CSRF_FIELD}" value="([^"]+)"', client.get(page).text)
    assert found, f"no form on {page}"
    return found.group(1)


def store_of(filled: Filled, user: str = "maya") -> list[Any]:
    """The config's memories on a user's namespace, built anew: what the stores hold."""
    config = yaml.safe_load(filled.config.read_text(encoding="utf-8"))
    return leaves_of(create_memory(with_namespace(config, ("users", user))))


# -- the memories' own compare-and-set ------------------------------------------------------


def test_every_versioned_write_refuses_a_stale_expected_version(filled: Filled) -> None:
    _, profile, collection, _, instructions = store_of(filled)
    memory_id = filled.memory_ids["maya"]
    stale = [
        lambda: profile.put({"name": "x"}, expected_version=1),
        lambda: profile.update([{"op": "remove", "path": "/city"}], expected_version=2),
        lambda: profile.rollback(1, expected_version=2),
        lambda: instructions.put("x", expected_version=0),
        lambda: instructions.rollback(0, expected_version=0),
        lambda: collection.update(memory_id, "x", expected_version=2),
        lambda: collection.delete(memory_id, expected_version=2),
        lambda: collection.rollback(memory_id, 1, expected_version=2),
    ]
    for write in stale:
        with pytest.raises(VersionConflictError, match="not"):
            write()
    assert profile.status().version == 3 and instructions.status().version == 1
    assert collection.get(memory_id).content == "maya drinks green tea"  # type: ignore[union-attr]
    assert profile.rollback(1, expected_version=3) == 4
    assert collection.rollback(memory_id, 1, expected_version=3).content == "maya drinks coffee"
    assert instructions.rollback(0, expected_version=1) == 2


# -- each action, through the API and then in the store ------------------------------------


def test_editing_a_collection_memory_writes_a_new_version(
    client: TestClient, filled: Filled
) -> None:
    memory_id = filled.memory_ids["maya"]
    done = post(
        client,
        f"{MAYA}/collection/items/{memory_id}/edit",
        {"content": "maya drinks mint tea", "expected_version": 3},
    )
    assert done == {
        "action": "edit",
        "namespace": "users.maya",
        "memory": "collection",
        "item": memory_id,
        "version": 4,
    }
    collection = store_of(filled)[2]
    assert collection.get(memory_id).content == "maya drinks mint tea"
    assert [v.content for v in collection.history(memory_id)][-2:] == [
        "maya drinks green tea",
        "maya drinks mint tea",
    ]
    assert collection.search("mint", k=1)[0].id == memory_id  # the index follows the ledger


def test_a_stale_edit_is_a_409_and_changes_nothing(client: TestClient, filled: Filled) -> None:
    memory_id = filled.memory_ids["maya"]
    before = rows(filled)
    answer = post(
        client,
        f"{MAYA}/collection/items/{memory_id}/edit",
        {"content": "from a stale page", "expected_version": 2},
        409,
    )
    assert "version 3, not 2" in answer["error"] and "read it again" in answer["error"]
    answer = post(client, f"{MAYA}/profile/edit", {"document": {}, "expected_version": 1}, 409)
    assert answer["status"] == 409
    assert rows(filled) == before


def test_deleting_then_rolling_back_a_collection_memory(client: TestClient, filled: Filled) -> None:
    memory_id = filled.memory_ids["maya"]
    item = f"{MAYA}/collection/items/{memory_id}"
    assert post(client, item + "/delete", {"expected_version": 3})["version"] == 4
    collection = store_of(filled)[2]
    assert collection.get(memory_id) is None
    assert memory_id not in [r.id for r in collection.search("green tea", k=5)]
    post(client, item + "/delete", {"expected_version": 4}, 404)  # gone: nothing to delete
    restored = post(client, item + "/rollback", {"version": 2, "expected_version": 4})
    assert restored["version"] == 5
    assert store_of(filled)[2].get(memory_id).content == "maya drinks tea"


def test_editing_and_rolling_back_a_profile(client: TestClient, filled: Filled) -> None:
    document = {"name": "maya", "city": "Faro"}
    assert (
        post(client, f"{MAYA}/profile/edit", {"document": document, "expected_version": 3})[
            "version"
        ]
        == 4
    )
    assert store_of(filled)[1].get() == document
    post(client, f"{MAYA}/profile/rollback", {"version": 1, "expected_version": 4})
    assert store_of(filled)[1].get() == {"name": "maya"}
    assert store_of(filled, "omar")[1].get() == {"name": "omar", "city": "Porto"}  # untouched
    bad = post(client, f"{MAYA}/profile/edit", {"document": [1], "expected_version": 5}, 400)
    assert "JSON object" in bad["error"]


def test_editing_and_rolling_back_instructions(client: TestClient, filled: Filled) -> None:
    edited = post(
        client,
        f"{MAYA}/instructions/edit",
        {"prompts": {"main": "Answer in Portuguese."}, "expected_version": 1},
    )
    assert edited["version"] == 2
    instructions = store_of(filled)[4]
    assert instructions.get() == {"main": "Answer in Portuguese."}
    assert instructions.history()[-1].reasons == {"main": "edited in the inspector"}
    post(client, f"{MAYA}/instructions/rollback", {"version": 0, "expected_version": 2})
    assert store_of(filled)[4].get() == {"main": "Be brief."}


def test_deleting_one_document_of_a_vector_memory(client: TestClient, filled: Filled) -> None:
    listed = client.get(f"/api{MAYA}/vector").json()["items"]
    (chess,) = [r["id"] for r in listed if "chess" in r["text"]]
    assert post(client, f"{MAYA}/vector/items/{chess}/delete", {}) == {
        "action": "delete",
        "namespace": "users.maya",
        "memory": "vector",
        "item": chess,
    }
    assert "chess" not in json.dumps(client.get(f"/api{MAYA}/vector").json())
    assert "chess" not in " ".join(r.text for r in store_of(filled)[3].search("chess", k=5))


def test_retrying_dead_letters_writes_them(client: TestClient, filled: Filled) -> None:
    letters = client.get("/api/namespaces/users.maya").json()["memories"]
    (letter,) = next(m for m in letters if m["id"] == "vector")["dead_letters"]
    post(client, f"{MAYA}/vector/retry", {"ids": ["not-a-letter"]}, 404)
    done = post(client, f"{MAYA}/vector/retry", {"ids": [letter["id"]]})
    assert done["retried"] == 1 and done["dead_letters"] == 0
    vector = store_of(filled)[3]
    assert vector.dead_letters() == [] and "POISON" in vector.search("POISON pasted", k=1)[0].text
    post(client, f"{MAYA}/vector/retry", {}, 404)  # nothing left to retry


def test_the_api_lists_the_actions_only_when_writes_are_allowed(
    client: TestClient, filled: Filled
) -> None:
    listed = client.get("/api").json()
    assert listed["read_only"] is False and "POST" in listed["methods"]
    assert [a["form"] for a in listed["actions"]] == [path for path, _, _ in ACTIONS]
    with TestClient(create_app(Inspector(filled.config)), base_url=BASE) as reader:
        assert reader.get("/api").json()["actions"] == []


# -- the forms: CSRF, Origin, redirect -----------------------------------------------------


def test_a_form_posts_with_the_pages_token_and_redirects_back(
    client: TestClient, filled: Filled
) -> None:
    memory_id = filled.memory_ids["maya"]
    page = f"{MAYA}/collection/items/{memory_id}"
    token = csrf_of(client, page)
    response = client.post(
        page + "/edit",
        data={CSRF_FIELD: token, "content": "maya drinks <b>chai</b>", "expected_version": "3"},
        headers={"origin": BASE},
        follow_redirects=False,
    )
    assert response.status_code == 303 and response.headers["location"] == page
    shown = client.get(page).text
    assert "maya drinks &lt;b&gt;chai&lt;/b&gt;" in shown and "<b>chai" not in shown
    profile = client.post(
        f"{MAYA}/profile/edit",
        data={CSRF_FIELD: token, "document": '{"name": "Maya"}', "expected_version": "3"},
        follow_redirects=False,
    )
    assert profile.status_code == 303 and store_of(filled)[1].get() == {"name": "Maya"}
    prompt = client.post(
        f"{MAYA}/instructions/edit",
        data={CSRF_FIELD: token, "name": "main", "text": "Be warm.", "expected_version": "1"},
        follow_redirects=False,
    )
    assert prompt.status_code == 303 and store_of(filled)[4].get() == {"main": "Be warm."}


@pytest.mark.parametrize(
    ("form", "headers", "status", "says"),
    [
        ({}, {}, 403, "CSRF token"),
        ({CSRF_FIELD: "forged"}, {}, 403, "CSRF token"),
        ({CSRF_FIELD: "{token}"}, {"origin": "http://evil.example"}, 403, "another site"),
        ({CSRF_FIELD: "{token}"}, {"origin": "null"}, 403, "another site"),
        ({CSRF_FIELD: "{token}", "expected_version": "2"}, {}, 409, "not 2"),
        ({CSRF_FIELD: "{token}", "expected_version": "x"}, {}, 400, "expected_version"),
        ({CSRF_FIELD: "{token}"}, {}, 400, "expected_version"),
    ],
)
def test_a_refused_form_changes_nothing(
    client: TestClient,
    filled: Filled,
    form: dict[str, str],
    headers: dict[str, str],
    status: int,
    says: str,
) -> None:
    memory_id = filled.memory_ids["maya"]
    page = f"{MAYA}/collection/items/{memory_id}"
    token = csrf_of(client, page)
    before = rows(filled)
    data = {k: v.replace("{token}", token) for k, v in {**form, "content": "x"}.items()}
    response = client.post(page + "/edit", data=data, headers=headers, follow_redirects=False)
    assert response.status_code == status and says in response.text
    assert response.headers["content-type"].startswith("text/html")
    assert "Traceback" not in response.text
    assert rows(filled) == before


# -- bad input: clear 4xx, nothing changed -------------------------------------------------


@pytest.mark.parametrize(
    ("path", "body", "status"),
    [
        (f"{MAYA}/collection/items/nope/edit", {"content": "x", "expected_version": 1}, 404),
        (f"{MAYA}/collection/items/../edit", {"content": "x", "expected_version": 1}, 400),
        (f"{MAYA}/collection/items/nope/delete", {"expected_version": 1}, 404),
        (f"{MAYA}/collection/items/nope/rollback", {"version": 1, "expected_version": 1}, 404),
        (f"{MAYA}/nope/edit", {"document": {}, "expected_version": 1}, 404),
        (f"{MAYA}/token_buffer/edit", {"content": "x", "expected_version": 1}, 404),
        (f"{MAYA}/vector/items/nope/delete", {}, 404),
        (f"{MAYA}/profile/retry", {}, 404),
        (f"{MAYA}/collection/retry", {}, 404),
        ("/namespaces/users.nobody/memories/profile/edit", {"document": {}}, 404),
        ("/namespaces/users..maya/memories/profile/edit", {"document": {}}, 400),
        (f"{MAYA}/profile/rollback", {"version": 99, "expected_version": 3}, 400),
        (f"{MAYA}/profile/rollback", {"version": -1, "expected_version": 3}, 400),
        (f"{MAYA}/profile/edit", {"document": {"a": 1}}, 400),  # no expected version
        (f"{MAYA}/profile/edit", {"document": {"a": 1}, "expected_version": True}, 400),
        (f"{MAYA}/profile/items/1/delete", {"expected_version": 3}, 400),
        (f"{MAYA}/collection/items/x/edit", {"content": "", "expected_version": 1}, 404),
        (f"{MAYA}/vector/retry", {"ids": "all"}, 400),
    ],
)
def test_bad_actions_get_a_clear_answer_and_change_nothing(
    client: TestClient, filled: Filled, path: str, body: dict[str, Any], status: int
) -> None:
    before = rows(filled)
    answer = post(client, path, body, status)
    assert answer["status"] == status and answer["error"]
    assert "Traceback" not in json.dumps(answer)
    assert rows(filled) == before


def test_another_users_memory_is_not_found_through_this_namespace(
    client: TestClient, filled: Filled
) -> None:
    omars = filled.memory_ids["omar"]
    before = rows(filled)
    for action, body in [
        ("edit", {"content": "forged", "expected_version": 3}),
        ("delete", {"expected_version": 3}),
        ("rollback", {"version": 1, "expected_version": 3}),
    ]:
        post(client, f"{MAYA}/collection/items/{omars}/{action}", body, 404)
    assert rows(filled) == before
    assert store_of(filled, "omar")[2].get(omars).content == "omar drinks green tea"


def test_oversize_bodies_wrong_types_and_methods_are_refused(
    client: TestClient, filled: Filled
) -> None:
    memory_id = filled.memory_ids["maya"]
    path = f"/api{MAYA}/collection/items/{memory_id}/edit"
    before = rows(filled)
    huge = {"content": "x" * (MAX_BODY + 1), "expected_version": 3}
    assert client.post(path, json=huge).status_code == 413
    declared = client.post(path, content=b"{}", headers={"content-length": str(10**9)})
    assert declared.status_code == 413
    assert client.post(path, content=b"content=x").status_code == 415  # not JSON
    assert (
        client.post(path, content=b"[1]", headers={"content-type": "application/json"}).json()[
            "status"
        ]
        == 400
    )
    assert (
        client.post(path, content=b"{", headers={"content-type": "application/json"}).json()[
            "status"
        ]
        == 400
    )
    for method in ("GET", "PUT", "DELETE"):
        answer = client.request(method, path)
        assert answer.status_code == 405 and "POST only" in answer.json()["error"]
    assert rows(filled) == before


def test_a_read_only_inspector_refuses_every_action_and_shows_none(filled: Filled) -> None:
    memory_id = filled.memory_ids["maya"]
    before = rows(filled)
    with TestClient(create_app(Inspector(filled.config)), base_url=BASE) as reader:
        page = reader.get(f"{MAYA}/collection/items/{memory_id}").text
        assert '<form method="post"' not in page and CSRF_FIELD not in page
        assert "read-only" in page
        for path, _, _ in ACTIONS:
            concrete = path.format(namespace="users.maya", memory="collection", item=memory_id)
            answer = reader.post("/api" + concrete, json={"expected_version": 3})
            assert answer.status_code == 403 and "--allow-writes" in answer.json()["error"]
            form = reader.post(concrete, data={"expected_version": "3"})
            assert form.status_code == 403 and "Traceback" not in form.text
    assert rows(filled) == before


def test_with_a_token_an_action_needs_it(filled: Filled) -> None:
    writer = Inspector(filled.config, allow_writes=True)
    memory_id = filled.memory_ids["maya"]
    path = f"/api{MAYA}/collection/items/{memory_id}/edit"
    body = {"content": "maya drinks water", "expected_version": 3}
    with TestClient(create_app(writer, token="s3cret"), base_url=BASE) as client:
        assert client.post(path, json=body).status_code == 401
        assert store_of(filled)[2].get(memory_id).content == "maya drinks green tea"
        ok = client.post(path, json=body, headers={"authorization": "Bearer s3cret"})
        assert ok.status_code == 200 and ok.json()["version"] == 4


# -- erasing a user ------------------------------------------------------------------------


def test_the_erase_page_lists_what_would_go_and_writes_nothing(
    client: TestClient, filled: Filled
) -> None:
    before = rows(filled)
    plan = client.get("/api/namespaces/users.maya/erase").json()
    assert plan["dry_run"] is True and plan["namespace"] == "users.maya"
    assert plan["found"] > 0 and plan["removed"] == 0
    stores = {line["store"]: line["found"] for line in plan["stores"]}
    assert sum(sum(found.values()) for found in stores.values()) == plan["found"]
    page = client.get("/namespaces/users.maya/erase").text
    assert f"Erase {plan['found']} items of users.maya" in page and 'name="confirm"' in page
    assert rows(filled) == before
    with TestClient(create_app(Inspector(filled.config)), base_url=BASE) as reader:
        shown = reader.get("/namespaces/users.maya/erase").text  # read-only: the plan, no form
        assert 'name="confirm"' not in shown and "memories erase --config" in shown
    assert rows(filled) == before


@pytest.mark.parametrize("confirm", [None, "", "users.omar", "users.mayan", "USERS.MAYA"])
def test_an_erase_not_confirmed_with_the_namespace_erases_nothing(
    client: TestClient, filled: Filled, confirm: str | None
) -> None:
    before = rows(filled)
    answer = post(client, "/namespaces/users.maya/erase", {"confirm": confirm}, status=400)
    assert "type the namespace again" in answer["error"] and "Nothing was erased" in answer["error"]
    assert rows(filled) == before


def test_erasing_a_user_removes_everything_of_theirs_and_nothing_of_the_other(
    client: TestClient, filled: Filled
) -> None:
    omar_before = client.get("/api/namespaces/users.omar").json()
    omar_search = client.get("/api/search?namespace=users.omar&q=tea").json()
    done = post(client, "/namespaces/users.maya/erase", {"confirm": "users.maya"})
    assert done["dry_run"] is False and done["complete"] is True
    assert done["remaining"] == 0 and done["removed"] > 0
    assert done["files"] and all(file["complete"] for file in done["files"])
    assert client.get("/api/namespaces/users.maya").status_code == 404  # nothing of hers left
    fresh = Inspector(filled.config)
    with pytest.raises(Exception, match="No memory of this config holds anything"):
        fresh.namespace("users.maya")
    _, profile, collection, vector, instructions = store_of(filled, "maya")
    assert not profile.get() and collection.list() == []
    assert instructions.get() == {"main": "Be brief."}  # the config's prompts, not maya's version
    assert erase_user(filled.config, namespace="users.maya", dry_run=True).found == 0
    assert vector.search("maya tea coffee green") == []
    assert client.get("/api/namespaces/users.omar").json() == omar_before
    assert client.get("/api/search?namespace=users.omar&q=tea").json() == omar_search
    again = post(client, "/namespaces/users.maya/erase", {"confirm": "users.maya"}, status=404)
    assert "users.maya" in again["error"]


def test_the_erase_form_shows_the_report_of_what_went(client: TestClient, filled: Filled) -> None:
    token = csrf_of(client, "/namespaces/users.maya/erase")
    response = client.post(
        "/namespaces/users.maya/erase",
        data={CSRF_FIELD: token, "confirm": "users.maya"},
        headers={"origin": BASE},
        follow_redirects=False,
    )
    assert response.status_code == 200 and "Erased users.maya" in response.text
    assert "every store counted again holds none of this user" in response.text
    assert "every file they were in was compacted" in response.text
    assert "vacuumed (" in response.text and "WAL emptied" in response.text
    listed = Inspector(filled.config).namespaces()["namespaces"]
    assert [n["namespace"] for n in listed] == ["users.omar"]
