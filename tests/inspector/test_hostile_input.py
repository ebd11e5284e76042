"""Input no page expects (odd digits, deep JSON, lone surrogates, off-site links): a 4xx, no 500.

Each refusal is a short answer naming what was wrong, with no traceback in the
log, and changes nothing stored; a fuzz of every route checks the same over
input Hypothesis makes up.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests import needs
from tests.inspector.conftest import Filled, fill_for_writes

pytest.importorskip("httpx", reason=needs.extra("httpx"))
from starlette.testclient import TestClient

from memories.faces.server.app import ACTIONS, CSRF_FIELD, ROUTES, create_app
from memories.faces.server.inputs import MAX_NESTING
from memories.faces.server.service import Inspector
from tests.inspector.test_api import BASE, rows

TOKEN = "s3cret"
MAYA = "/namespaces/users.maya/memories"
#: Digits ``str.isdigit`` takes that are not ASCII: superscript two, Arabic-Indic three,
#: extended Arabic-Indic five, fullwidth one.
ODD_DIGITS = ["\u00b2", "\u0663", "\u06f5", "\uff11"]


@pytest.fixture(scope="module")
def filled(tmp_path_factory: pytest.TempPathFactory) -> Filled:
    return fill_for_writes(tmp_path_factory.mktemp("hostile"))


@pytest.fixture(scope="module")
def client(filled: Filled) -> Iterator[TestClient]:
    app = create_app(Inspector(filled.config, allow_writes=True), token=TOKEN)
    headers = {"authorization": f"Bearer {TOKEN}"}
    with TestClient(app, base_url=BASE, headers=headers, raise_server_exceptions=False) as client:
        yield client


class ErrorsLogged:
    """The records logged at ERROR or above since the test began (a traceback is one)."""

    def __init__(self, caplog: pytest.LogCaptureFixture) -> None:
        self.caplog = caplog

    def __bool__(self) -> bool:
        return any(r.levelno >= logging.ERROR for r in self.caplog.records)

    def __repr__(self) -> str:
        return repr([r.getMessage() for r in self.caplog.records if r.levelno >= logging.ERROR][:5])


@pytest.fixture
def errors_logged(caplog: pytest.LogCaptureFixture) -> Iterator[ErrorsLogged]:
    caplog.clear()
    with caplog.at_level(logging.ERROR):
        yield ErrorsLogged(caplog)


def refused(response: Any, status: int = 400) -> str:
    assert response.status_code == status, (response.status_code, response.text[:300])
    assert "Traceback" not in response.text
    return str(response.text)


@pytest.mark.parametrize("digit", ODD_DIGITS)
@pytest.mark.parametrize(
    "path",
    [
        "/namespaces?page={}",
        "/sessions?page={}",
        MAYA + "/collection?page={}",
        "/search?namespace=users.maya&q=tea&k={}",
    ],
)
def test_a_number_in_other_digits_is_a_400_naming_it(
    client: TestClient, errors_logged: ErrorsLogged, path: str, digit: str
) -> None:
    for prefix in ("/api", ""):
        said = refused(client.get(prefix + path.format(quote(digit))))
        assert "digits 0-9" in said
    assert not errors_logged


@pytest.mark.parametrize("digit", ODD_DIGITS)
def test_a_version_in_other_digits_is_a_400_and_writes_nothing(
    client: TestClient, filled: Filled, errors_logged: ErrorsLogged, digit: str
) -> None:
    before = rows(filled)
    item = f"{MAYA}/collection/items/{filled.memory_ids['maya']}"
    body = {"content": "maya drinks water", "expected_version": digit}
    assert "digits 0-9" in refused(client.post(f"/api{item}/edit", json=body))
    page = client.get(item).text
    csrf = re.search(rf'name="{CSRF_FIELD}" value="([^"]+)"', page)
    assert csrf is not None
    form = {CSRF_FIELD: csrf.group(1), "content": "maya drinks water", "expected_version": digit}
    assert "digits 0-9" in refused(client.post(item + "/edit", data=form))
    assert rows(filled) == before and not errors_logged


def test_a_body_nested_30000_deep_under_64_kib_is_a_400(
    client: TestClient, filled: Filled, errors_logged: ErrorsLogged
) -> None:
    before = rows(filled)
    deep = "[" * 30_000 + "]" * 30_000
    shallow_enough = "[" * (MAX_NESTING - 1) + "]" * (MAX_NESTING - 1)  # in the body's {}
    for nested in (deep, "[" * MAX_NESTING + "]" * MAX_NESTING):
        body = f'{{"document": {nested}, "expected_version": 3}}'.encode()
        assert len(body) < 64 * 1024
        answer = client.post(
            f"/api{MAYA}/profile/edit", content=body, headers={"content-type": "application/json"}
        )
        assert f"nests deeper than {MAX_NESTING} levels" in refused(answer)
    # as deep as allowed, the body reads: the profile refuses a list as its document
    body = f'{{"document": {shallow_enough}, "expected_version": 3}}'.encode()
    answer = client.post(
        f"/api{MAYA}/profile/edit", content=body, headers={"content-type": "application/json"}
    )
    assert "nests deeper" not in refused(answer)
    assert rows(filled) == before and not errors_logged


def test_a_lone_surrogate_in_a_body_is_a_400_and_writes_nothing(
    client: TestClient, filled: Filled, errors_logged: ErrorsLogged
) -> None:
    before = rows(filled)
    item = f"/api{MAYA}/collection/items/{filled.memory_ids['maya']}"
    body = b'{"content": "maya drinks \\ud800 tea", "expected_version": 3}'
    answer = client.post(item + "/edit", content=body, headers={"content-type": "application/json"})
    assert "lone surrogate (U+D800)" in refused(answer)
    assert rows(filled) == before and not errors_logged


def test_a_token_link_never_redirects_to_another_site(filled: Filled) -> None:
    app = create_app(Inspector(filled.config), token=TOKEN)
    with TestClient(app, base_url=BASE) as client:
        for path in ("//evil.example/", "///evil.example/x", "/\\evil.example/"):
            answer = client.get(f"{BASE}{path}?token={TOKEN}&q=a", follow_redirects=False)
            assert answer.status_code == 303
            location = answer.headers["location"]
            assert location.startswith("/") and not location.startswith(("//", "/\\")), location
            assert location.endswith("?q=a")


@pytest.mark.parametrize("scheme", ["Bearer", "bearer", "BEARER", "bEaReR"])
def test_the_bearer_scheme_is_read_in_any_case(filled: Filled, scheme: str) -> None:
    app = create_app(Inspector(filled.config), token=TOKEN)
    with TestClient(app, base_url=BASE) as client:
        answer = client.get("/api/overview", headers={"authorization": f"{scheme} {TOKEN}"})
        assert answer.status_code == 200, answer.text
        wrong = client.get("/api/overview", headers={"authorization": f"{scheme} nope"})
        assert wrong.status_code == 401


# -- the fuzz ------------------------------------------------------------------------------

_odd_text = st.one_of(
    st.text(st.characters(categories=["Nd", "No"]), max_size=4),
    st.text(max_size=12),
    st.sampled_from(["", "0", "-1", "1e3", "99999999999999999999", "%ED%A0%80", "..", "%00"]),
)
_surrogate = st.integers(0xD800, 0xDFFF).map(lambda n: f'"\\u{n:04x}"')
_json_text = st.one_of(
    st.integers(1, 30_000).map(lambda d: "[" * d + "]" * d),
    _surrogate,
    st.from_regex(
        r'\{"(content|document|expected_version|version|ids|confirm|prompts)": ', fullmatch=True
    ).flatmap(
        lambda head: st.one_of(
            _surrogate,
            _odd_text.map(lambda t: '"' + t.replace('"', "") + '"'),
            st.just("[" * 500 + "]" * 500),
        ).map(lambda v: head + v + "}")
    ),
    st.text(max_size=40),
)


def _filled_in(template: str, value: str) -> str:
    return re.sub(r"\{[a-z:]+\}", lambda _: quote(value, safe="") or "x", template)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    route=st.sampled_from([path for path, _ in ROUTES]),
    action=st.sampled_from([path for path, _, _ in ACTIONS]),
    value=_odd_text,
    body=_json_text,
    api=st.booleans(),
)
def test_fuzzed_requests_get_4xx_answers_and_log_no_error(
    client: TestClient,
    errors_logged: ErrorsLogged,
    route: str,
    action: str,
    value: str,
    body: str,
    api: bool,
) -> None:
    prefix = "/api" if api else ""
    path, _, query = route.partition("?")
    path = _filled_in(path, value)
    query = "&".join(
        f"{part.split('=')[0]}={quote(value, safe='')}" for part in query.split("&") if part
    )
    read = client.get(
        prefix + (path if path != "/" or not api else "/overview") + (f"?{query}" if query else "")
    )
    assert read.status_code < 500, (read.status_code, read.text[:300])
    written = client.post(
        "/api" + _filled_in(action, value),
        content=body.encode("utf-8", "surrogatepass"),
        headers={"content-type": "application/json"},
    )
    assert written.status_code < 500, (written.status_code, written.text[:300])
    assert not errors_logged
