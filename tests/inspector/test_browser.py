"""The inspector's pages in a real headless browser: Debian's chromium driven by Playwright.

The test starts the server on a free loopback port itself, clicks overview ->
namespace -> memory -> history, proves that a memory whose text is markup
renders inert; on a second server started with writes allowed it clicks
rollback, edit, delete and retry and checks each in the page and in the store.
Screenshots of the main pages (PNG) go to ``artifacts/inspector/`` at the
repository's root (gitignored; ``MEMORIES_ARTIFACTS`` moves it), for CI to
keep; ``docs/assets/inspector.png`` in the README is one of them.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import needs
from tests.inspector.conftest import IMAGE, SCRIPT, Demo, Filled, fill_for_writes

CHROMIUM = Path("/usr/bin/chromium")
if not CHROMIUM.is_file():
    pytest.skip(
        "Debian's chromium is not installed at /usr/bin/chromium (apt-get install chromium; "
        ".ci/run does it)",
        allow_module_level=True,
    )
sync_api = pytest.importorskip("playwright.sync_api", reason=needs.extra("playwright.sync_api"))
uvicorn = pytest.importorskip("uvicorn", reason=needs.extra("uvicorn"))

from memories.faces.server.app import create_app  # noqa: E402
from memories.faces.server.service import Inspector  # noqa: E402

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


ROOT = Path(__file__).resolve().parents[2]


@contextlib.contextmanager
def serving(inspector: Inspector) -> Iterator[str]:
    """The inspector on a free loopback port, in a thread; stopped at the end."""
    port = _free_port()
    config = uvicorn.Config(create_app(inspector), host="127.0.0.1", port=port, log_level="warning")
    running = uvicorn.Server(config)
    thread = threading.Thread(target=running.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not running.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the server did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    running.should_exit = True
    thread.join(timeout=10)
    assert not thread.is_alive()


@pytest.fixture(scope="module")
def server(filled: Filled) -> Iterator[str]:
    with serving(Inspector(filled.config)) as url:
        yield url


@pytest.fixture(scope="module")
def artifacts() -> Path:
    folder = Path(os.environ.get("MEMORIES_ARTIFACTS", ROOT / "artifacts")) / "inspector"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    profile = tmp_path_factory.mktemp("chromium-profile")  # a new, empty user-data-dir
    with sync_api.sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(profile),
            executable_path=str(CHROMIUM),
            headless=True,
            args=FLAGS,
            viewport={"width": 1200, "height": 800},
            timeout=30_000,
        )
        context.set_default_timeout(10_000)
        try:
            yield context
        finally:
            context.close()


def test_a_person_clicks_from_the_overview_to_a_memorys_history(
    server: str, browser: Any, artifacts: Path, filled: Filled
) -> None:
    page = browser.new_page()
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    page.goto(server + "/")
    assert page.title() == "Overview · memories inspector"
    assert page.get_by_text("read-only: nothing here changes your memories").is_visible()
    page.screenshot(path=str(artifacts / "overview.png"), full_page=True)

    page.get_by_role("link", name="Namespaces").first.click()
    page.get_by_role("link", name="users.maya").click()
    page.wait_for_url("**/namespaces/users.maya")
    assert page.locator("h1").inner_text() == "users.maya"
    page.screenshot(path=str(artifacts / "namespace.png"), full_page=True)

    page.get_by_role("link", name="collection", exact=True).click()
    page.wait_for_url("**/memories/collection")
    assert page.get_by_text("maya drinks green tea").is_visible()
    assert page.get_by_text("omar", exact=False).count() == 0  # another user's: never here
    page.screenshot(path=str(artifacts / "memory.png"), full_page=True)

    memory_id = filled.memory_ids["maya"]
    page.get_by_role("link", name=memory_id[:12]).click()
    page.wait_for_url(f"**/items/{memory_id}")
    versions = page.locator("table tr").all_inner_texts()[1:]
    assert [row.split("\t")[0].strip() for row in versions] == ["3", "2", "1"]
    assert "maya drinks coffee" in versions[-1]
    page.screenshot(path=str(artifacts / "history.png"), full_page=True)

    page.get_by_role("link", name="Search").first.click()
    page.get_by_role("link", name="users.maya").click()
    page.get_by_placeholder("what to look for").fill("green tea")
    page.get_by_role("button", name="Search").click()
    page.wait_for_url("**/search?namespace=users.maya&q=green+tea")
    assert page.get_by_role("columnheader", name="Lexical").first.is_visible()
    page.screenshot(path=str(artifacts / "search.png"), full_page=True)
    assert dialogs == []


def test_three_clicks_from_the_demos_overview_say_what_it_remembers_since_when_and_why(
    demo: Demo, browser: Any, artifacts: Path
) -> None:
    """Issue 27: `memories demo --db`'s config, opened: overview -> Namespaces -> the
    user's profile -> the profile, its versions with their times and causing turns."""
    from memories.faces.demo import SCRIPT as DEMO_SCRIPT

    page = browser.new_page()
    with serving(Inspector(demo.config)) as url:
        page.goto(url + "/")
        page.get_by_role("link", name="Namespaces").first.click()  # 1
        page.get_by_role("link", name="users.maya").click()  # 2
        page.get_by_role("link", name="profile", exact=True).click()  # 3
        page.wait_for_url("**/namespaces/users.maya/memories/profile")
        assert '"drink": "black coffee, no sugar"' in page.locator("pre").inner_text()
        rows = page.locator("table tr").all_inner_texts()[1:]
        assert [row.split("\t")[1] for row in rows] == [str(v) for v in range(8, 0, -1)]
        (drink,) = [row for row in rows if "/drink" in row and "black coffee, no sugar" in row]
        assert DEMO_SCRIPT[6][0] in drink  # the turn that changed it
        assert DEMO_SCRIPT[2][0] in rows[-3]  # and the one before: since when it was tea
        page.screenshot(path=str(artifacts / "demo-profile.png"), full_page=True)


def test_a_memory_whose_text_is_markup_renders_as_inert_text(
    server: str, browser: Any, artifacts: Path, filled: Filled
) -> None:
    page = browser.new_page()
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    for path in (
        "/namespaces/users.maya/memories/collection",
        f"/namespaces/users.maya/memories/collection/items/{filled.markup_id}",
        "/search?namespace=users.maya&q=script+alert",
    ):
        page.goto(server + path)
        page.wait_for_load_state("load")
        assert page.get_by_text(f"{SCRIPT} {IMAGE}").first.is_visible(), path
        assert page.locator("main script").count() == 0
        assert page.locator("img").count() == 0  # the <img onerror> is text, not an element
        assert page.evaluate("() => window.__proof === undefined")
    page.screenshot(path=str(artifacts / "markup.png"), full_page=True)
    page.goto(server + "/sessions/maya-chat")
    assert page.locator("tr.removed").count() == 1  # the removed message, struck through
    page.screenshot(path=str(artifacts / "session.png"), full_page=True)
    time.sleep(0.3)  # an onerror handler would have fired by now
    assert dialogs == [] and errors == []


def submit(page: Any, button: str) -> None:
    """Click a form's button and wait until the page it leads to has loaded."""
    with page.expect_navigation():
        page.get_by_role("button", name=button).click()


def test_a_person_rolls_back_edits_deletes_and_retries_in_the_browser(
    browser: Any, artifacts: Path, tmp_path: Path
) -> None:
    filled = fill_for_writes(tmp_path)
    memory_id = filled.memory_ids["maya"]

    def stored() -> Any:
        """maya's collection memory as the store holds it now (a fresh inspector's view)."""
        return Inspector(filled.config).item("users.maya", "collection", memory_id)

    with serving(Inspector(filled.config, allow_writes=True)) as url:
        page = browser.new_page()
        page.goto(url + "/")
        assert page.get_by_text("writes allowed").is_visible()
        page.get_by_role("link", name="Namespaces").first.click()
        page.get_by_role("link", name="users.maya").click()
        page.wait_for_url("**/namespaces/users.maya")
        assert page.get_by_text("Dead letters of vector").is_visible()
        page.screenshot(path=str(artifacts / "namespace-dead-letters.png"), full_page=True)
        page.get_by_role("link", name="collection", exact=True).click()
        page.get_by_role("link", name=memory_id[:12]).click()
        page.wait_for_url(f"**/items/{memory_id}")
        page.screenshot(path=str(artifacts / "history-actions.png"))

        submit(page, "Roll back to 1")  # rollback
        assert page.url.endswith(f"/items/{memory_id}")
        assert page.locator("p", has_text="Now:").inner_text().startswith("Now: maya drinks coffee")
        assert stored()["current"]["content"] == "maya drinks coffee"
        assert stored()["versions"][0]["kind"] == "rollback"

        stale = browser.new_page()  # a second tab, read at version 4
        stale.goto(page.url)
        page.get_by_role("textbox").fill("maya drinks oolong")  # edit
        submit(page, "Save as a new version")
        assert page.get_by_text("maya drinks oolong").first.is_visible()
        assert stored()["current"] == {**stored()["current"], "content": "maya drinks oolong"}
        assert stored()["version"] == 5

        stale.get_by_role("textbox").fill("maya drinks water")  # an edit from a stale page
        submit(stale, "Save as a new version")
        assert stale.locator("h1").inner_text() == "409"
        assert stale.get_by_text("someone changed it after you read it").is_visible()
        stale.screenshot(path=str(artifacts / "stale-edit.png"))
        assert stored()["current"]["content"] == "maya drinks oolong" and stored()["version"] == 5

        submit(page, "Delete this memory")  # delete
        assert page.get_by_text("Deleted: it is in no search any more").is_visible()
        assert stored()["current"] is None
        submit(page, "Roll back to 5")  # and back
        assert stored()["current"]["content"] == "maya drinks oolong"

        page.goto(url + "/namespaces/users.maya")  # retry the dead letter
        submit(page, "Retry all 1")
        assert page.url.endswith("/namespaces/users.maya")
        assert page.get_by_text("Dead letters of vector").count() == 0
        found = Inspector(filled.config).search("users.maya", "POISON pasted", memory_id="vector")
        assert "POISON" in found["memories"][0]["results"][0]["text"]

        page.goto(url + "/namespaces/users.maya/memories/profile")  # a profile's rollback
        submit(page, "Roll back to 1")
        assert Inspector(filled.config).items("users.maya", "profile")["document"] == {
            "name": "maya"
        }
        page.screenshot(path=str(artifacts / "profile-actions.png"), full_page=True)

        page.goto(url + "/namespaces/users.maya")  # erase the user, confirmed by name
        page.get_by_role("link", name="Erase this user…").click()
        page.wait_for_url("**/namespaces/users.maya/erase")
        assert page.get_by_text("What would go").is_visible()
        page.screenshot(path=str(artifacts / "erase.png"), full_page=True)
        page.get_by_label("the namespace to erase").fill("users.maya")
        submit(
            page,
            f"Erase {Inspector(filled.config).erasure('users.maya')['found']} items of users.maya",
        )
        assert page.locator("h1").inner_text() == "Erased users.maya"
        assert page.get_by_text("every store counted again holds none of this user").is_visible()
        listed = Inspector(filled.config).namespaces()["namespaces"]
        assert [n["namespace"] for n in listed] == ["users.omar"]
