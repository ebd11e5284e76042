"""The overview's model calls and tokens: recorded per call in each memory's own SQL database."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage

from memories import ProfileMemory
from memories.kernel.llm import ModelUsage
from memories.long_term.collection import CollectionMemory
from memories.stores.spending import SQLSpending
from memories.testing import ScriptedChatModel
from tests import needs
from tests.inspector.conftest import EMBEDDINGS

pytest.importorskip("httpx", reason=needs.extra("httpx"))
from starlette.testclient import TestClient

from memories.faces.server.app import create_app
from memories.faces.server.service import Inspector

SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}}
PATCH = '[{"op": "add", "path": "/name", "value": "Ada"}]'
FACTS = '{"memories": [{"content": "Ada likes tea"}]}'


class FlakyModel(ScriptedChatModel):
    """A scripted model whose every other call fails (before any token is spent)."""

    def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kw: Any) -> Any:
        if len(self.prompts) % 2 == 1:
            self.prompts.append(list(messages))
            raise RuntimeError("the provider is down")
        return super()._generate(messages, stop, run_manager, **kw)


def _reply(text: str, tokens_in: int, tokens_out: int) -> AIMessage:
    usage = {"input_tokens": tokens_in, "output_tokens": tokens_out}
    return AIMessage(text, usage_metadata={**usage, "total_tokens": tokens_in + tokens_out})


def _config(folder: Path) -> dict[str, Any]:
    db = folder / "memories.db"
    return {
        "type": "combined",
        "memories": [
            {
                "type": "profile",
                "schema": SCHEMA,
                "url": f"sqlite:///{db}",
                "namespace": ["users", "{user_id}"],
                "policy": "manual",
            },
            {
                "type": "collection",
                "url": f"sqlite:///{db}",
                "path": str(folder / "chroma"),
                "embeddings": EMBEDDINGS,
                "namespace": ["users", "{user_id}"],
                "write": "sync",
                "policy": "manual",
            },
        ],
    }


def _profile(url: str, llm: Any, **options: Any) -> ProfileMemory:
    """Ada's profile memory on ``url``, updated by ``llm``'s JSON patches."""
    options.setdefault("namespace", ("users", "ada"))
    return ProfileMemory(schema=SCHEMA, llm=llm, update_method="json", url=url, **options)


def _work(folder: Path, user: str, turns: int) -> dict[str, ModelUsage]:
    """``turns`` turns and updates of each memory for ``user``; what each one's ledger counted."""
    db = folder / "memories.db"
    namespace = ("users", user)
    profile = _profile(
        f"sqlite:///{db}",
        FlakyModel(responses=[_reply(PATCH, 40, 5)], echo=False),
        namespace=namespace,
    )
    collection = CollectionMemory(
        llm=FlakyModel(responses=[_reply(FACTS, 30, 7)], echo=False),
        url=f"sqlite:///{db}",
        path=str(folder / "chroma"),
        embeddings=EMBEDDINGS,
        namespace=namespace,
        write="sync",
    )
    for memory in (profile, collection):
        for i in range(turns):
            memory.save_context({"input": f"turn {i}: I'm Ada, I like tea"}, {"output": "Hi"})
    return {"profile": profile.model_usage(), "collection": collection.model_usage()}


def _numbers(usage: ModelUsage) -> dict[str, int]:
    return {
        "calls": usage.calls,
        "failures": usage.failures,
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
    }


def test_the_overview_shows_each_memorys_recorded_calls_and_tokens(tmp_path: Path) -> None:
    ada = _work(tmp_path, "ada", 3)
    bob = _work(tmp_path, "bob", 2)
    for used, scripted in ((ada["profile"], (40, 5)), (ada["collection"], (30, 7))):
        answered = used.calls - used.failures
        assert used.failures > 0 and answered > 0
        assert (used.input_tokens, used.output_tokens) == (
            scripted[0] * answered,
            scripted[1] * answered,
        )

    inspector = Inspector(_config(tmp_path))
    rows = {m["type"]: m["model_usage"] for m in inspector.overview()["memories"]}
    for kind in ("profile", "collection"):
        both = ada[kind].plus(bob[kind])
        assert rows[kind]["all"] == _numbers(both)
        assert rows[kind]["today"] == _numbers(both)

    per_user = {
        user: {
            m["type"]: m["model_usage"]["all"]
            for m in inspector.namespace(f"users.{user}")["memories"]
        }
        for user in ("ada", "bob")
    }
    for user, used in (("ada", ada), ("bob", bob)):
        assert per_user[user] == {k: _numbers(v) for k, v in used.items()}

    with TestClient(create_app(inspector), base_url="http://127.0.0.1") as client:
        assert client.get("/api/overview").json()["memories"][0]["model_usage"] == rows["profile"]
        page = client.get("/").text
        both = ada["profile"].plus(bob["profile"])
        assert f"{both.input_tokens} / {both.output_tokens}" in page


def test_a_memory_without_a_sql_database_shows_not_recorded(tmp_path: Path) -> None:
    config = {"type": "summary_buffer", "history": {"type": "memory"}}
    inspector = Inspector(config)
    assert inspector.overview()["memories"][0]["model_usage"] is None
    with TestClient(create_app(inspector), base_url="http://127.0.0.1") as client:
        assert "not recorded" in client.get("/").text


def test_a_call_that_cannot_be_recorded_is_logged_and_the_work_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def refuse(*args: Any) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(SQLSpending, "record_call", refuse)
    memory = _profile(
        f"sqlite:///{tmp_path / 'memories.db'}",
        ScriptedChatModel(responses=[_reply(PATCH, 40, 5)], echo=False),
    )
    memory.save_context({"input": "I'm Ada"}, {"output": "Hi"})
    assert memory.get() == {"name": "Ada"}
    assert memory.model_usage().calls == 1
    assert "Could not record a model call of profile" in caplog.text


def test_async_calls_are_recorded_too(tmp_path: Path) -> None:
    memory = _profile(
        f"sqlite:///{tmp_path / 'memories.db'}",
        ScriptedChatModel(responses=[_reply(PATCH, 40, 5)], echo=False),
    )
    asyncio.run(memory.asave_context({"input": "I'm Ada"}, {"output": "Hi"}))
    store = memory.usage_store
    assert store is not None
    recorded = store.usage_totals(memory.usage_namespace())["profile"]["all"]
    assert (recorded.calls, recorded.input_tokens, recorded.output_tokens) == (1, 40, 5)


def test_two_profiles_in_one_database_each_show_their_own_calls(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'memories.db'}"
    scripted = {"profile": (2, _reply(PATCH, 40, 5)), "work": (3, _reply(PATCH, 11, 2))}
    for key, (turns, reply) in scripted.items():
        memory = _profile(url, ScriptedChatModel(responses=[reply], echo=False), key=key)
        for i in range(turns):
            memory.save_context({"input": f"turn {i}: I'm Ada"}, {"output": "Hi"})
    with sqlite3.connect(tmp_path / "memories.db") as db:
        recorded = dict(db.execute("SELECT memory, calls FROM memories_model_usage").fetchall())
    # The default key keeps the type alone: rows recorded before keys were kept stay its own.
    assert recorded == {"profile": 2, "profile:work": 3}

    profile = {"type": "profile", "schema": SCHEMA, "url": url, "policy": "manual"}
    profile["namespace"] = "users.{user_id}"
    config = {
        "type": "combined",
        "memories": [profile, {**profile, "key": "work", "memory_key": "work"}],
    }
    inspector = Inspector(config)
    expected = {
        "profile": {"calls": 2, "failures": 0, "input_tokens": 80, "output_tokens": 10},
        "profile-2": {"calls": 3, "failures": 0, "input_tokens": 33, "output_tokens": 6},
    }
    overview = {m["id"]: m["model_usage"]["all"] for m in inspector.overview()["memories"]}
    assert overview == expected
    page = {m["id"]: m["model_usage"]["all"] for m in inspector.namespace("users.ada")["memories"]}
    assert page == expected
