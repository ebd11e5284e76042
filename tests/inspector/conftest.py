"""A config whose stores the tests fill: two users' profiles, collections and vector memories,
a token buffer's sessions on SQLite, and memories whose text is markup."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from langchain_core.messages import HumanMessage

from memories.core.combined import leaves_of
from memories.core.config import create_memory, with_namespace, with_session
from tests import needs

pytest.importorskip("starlette", reason=needs.extra("starlette"))
pytest.importorskip("jinja2", reason=needs.extra("jinja2"))

EMBEDDINGS = "tests.vector.conftest:WordEmbeddings"
#: User text that would run as script if a page did not escape it.
SCRIPT = "<script>alert(1)</script>"
IMAGE = "<img src=x onerror=alert(1)>"


@dataclass
class Filled:
    """The config file and what the tests put in its stores."""

    config: Path
    memory_ids: dict[str, str]
    """user -> the id of a collection memory with three versions."""
    markup_id: str
    """The id of maya's collection memory whose text is markup."""


def config_for(folder: Path) -> dict[str, Any]:
    db = folder / "memories.db"
    chroma = folder / "chroma"
    namespace = ["users", "{user_id}"]
    return {
        "type": "combined",
        "memories": [
            {
                "type": "token_buffer",
                "max_token_limit": 200,
                "history": {"type": "sqlite", "path": str(db), "session_id": "default"},
            },
            {
                "type": "profile",
                "url": f"sqlite:///{db}",
                "namespace": namespace,
                "policy": "manual",
            },
            {
                "type": "collection",
                "url": f"sqlite:///{db}",
                "path": str(chroma),
                "embeddings": EMBEDDINGS,
                "namespace": namespace,
                "write": "sync",
                "policy": "manual",
            },
            {
                "type": "vector",
                "path": str(chroma),
                "embeddings": EMBEDDINGS,
                "namespace": namespace,
                "write": "sync",
                "memory_key": "recalled",
            },
        ],
    }


def _leaves(config: dict[str, Any], user: str, session: str) -> list[Any]:
    options = with_session(with_namespace(config, ("users", user)), session)
    return leaves_of(create_memory(options))


def fill(folder: Path) -> Filled:
    config = config_for(folder)
    path = folder / "memories.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    ids = {}
    markup_id = ""
    for user in ("maya", "omar"):
        buffer, profile, collection, vector = _leaves(config, user, f"{user}-chat")
        buffer.save_context({"input": f"hi, I am {user}"}, {"output": "hello"})
        buffer.save_context({"input": "I moved to Lisbon"}, {"output": "nice"})
        buffer.chat_memory.write([HumanMessage("typo", id="m-typo")])
        buffer.chat_memory.delete(["m-typo"])
        profile.put({"name": user})
        profile.update([{"op": "add", "path": "/city", "value": "Lisbon"}])
        profile.update([{"op": "replace", "path": "/city", "value": "Porto"}])
        store = profile.store
        store.add_pending(profile.namespace, profile.key, [HumanMessage("I like tea")])
        turns = store.pending(profile.namespace, profile.key)
        store.record_failure(
            profile.namespace,
            profile.key,
            error="the reply is not a JSON patch",
            raw=["sure! " + SCRIPT],
            turns=turns,
        )
        memory_id = collection.put(f"{user} drinks coffee")
        collection.update(memory_id, f"{user} drinks tea")
        collection.update(memory_id, f"{user} drinks green tea")
        collection.put(f"{user} lives in Porto")
        ids[user] = memory_id
        if user == "maya":
            markup_id = collection.put(SCRIPT + " " + IMAGE)
        vector.save_context({"input": f"{user} plays chess"}, {"output": "good"})
    return Filled(path, ids, markup_id)


@pytest.fixture(scope="module")
def filled(tmp_path_factory: pytest.TempPathFactory) -> Filled:
    return fill(tmp_path_factory.mktemp("inspector"))


def _with(folder: Path, memory: dict[str, Any]) -> dict[str, Any]:
    """The tests' config and one more memory per user, in the same database."""
    config = config_for(folder)
    stored = {"url": f"sqlite:///{folder / 'memories.db'}", "namespace": ["users", "{user_id}"]}
    config["memories"].append({**memory, **stored})
    return config


def with_instructions(folder: Path) -> dict[str, Any]:
    """The tests' config and an instructions memory, revised by hand only."""
    return _with(
        folder, {"type": "instructions", "policy": "manual", "prompts": {"main": "Be brief."}}
    )


def fill_for_writes(folder: Path) -> Filled:
    """:func:`fill`, plus maya's instructions at version 1 and a dead letter of her vectors."""
    from memories.long_term.vector.memory import VectorMemory
    from tests.vector.test_persistence import _picky

    found = fill(folder)
    config = with_instructions(folder)
    found.config.write_text(yaml.safe_dump(config), encoding="utf-8")
    *_, instructions = _leaves(config, "maya", "maya-chat")
    instructions.put({"main": "Be brief and kind."})
    picky = VectorMemory(
        path=str(folder / "chroma"),
        namespace=("users", "maya"),
        embeddings=_picky(),
        write="sync",
        memory_key="recalled",
    )
    with pytest.raises(ValueError, match="too long"):  # alone, it is kept pending
        picky.save_context({"input": "POISON pasted"}, {"output": "ok"})
    picky.save_context({"input": "maya likes rain"}, {"output": "ok"})  # with it: set aside
    assert len(picky.dead_letters()) == 1
    return found


@dataclass
class Demo:
    """What ``memories demo --db`` left: its config, and the command it printed to open it."""

    config: Path
    printed: str


@pytest.fixture(scope="session")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Demo:
    """``memories demo --db FOLDER/demo.db``, run once (offline: scripted replies)."""
    import contextlib
    import io

    from memories.faces.cli import main

    db = tmp_path_factory.mktemp("demo") / "demo.db"
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["demo", "--db", str(db)]) == 0
    return Demo(db.with_suffix(".yaml"), out.getvalue())


def with_entities(folder: Path) -> dict[str, Any]:
    """The tests' config and an entity memory (the rule-based extractor, every turn)."""
    return _with(folder, {"type": "entity"})


def fill_entities(folder: Path) -> Filled:
    """:func:`fill`, plus maya's entity graph: a move (one relation ended), a merge, and markup.

    Omar's graph holds one fact of his own, which maya's pages never show.
    """
    found = fill(folder)
    config = with_entities(folder)
    found.config.write_text(yaml.safe_dump(config), encoding="utf-8")
    *_, maya = _leaves(config, "maya", "maya-chat")
    for said in (
        "I live in Lisbon.",
        "My sister Melanie is kind.",
        "I moved to Porto.",
        "Mel called me today.",
    ):
        maya.save_context({"input": said}, {"output": "noted"})
    maya.apply(
        [{"op": "relate", "subject": "Melanie", "predicate": "likes", "value": f"{SCRIPT} {IMAGE}"}]
    )
    *_, omar = _leaves(config, "omar", "omar-chat")
    omar.save_context({"input": "I live in Oslo."}, {"output": "noted"})
    return found
