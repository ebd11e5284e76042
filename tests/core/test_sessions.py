"""One config for every session: with_session and memory_factory."""

from __future__ import annotations

from pathlib import Path

import pytest

from memories import BufferMemory, ConfigError, create_memory
from memories.core.config import memory_factory, with_session


def test_with_session_moves_every_nested_history(tmp_path: Path) -> None:
    sqlite = {"type": "sqlite", "path": str(tmp_path / "m.db"), "session_id": "old"}
    config = {
        "type": "combined",
        "memories": [
            {"type": "window", "k": 2, "memory_key": "recent", "history": sqlite},
            {"type": "read_only", "memory": {"type": "buffer", "chat_memory": {"type": "memory"}}},
            {"type": "simple", "memories": {"persona": "x"}},
        ],
    }
    moved = with_session(config, "u7")
    window, read_only, simple = moved["memories"]
    assert window["history"]["session_id"] == "u7"
    assert read_only["memory"]["chat_memory"]["session_id"] == "u7"
    assert simple == config["memories"][2]
    assert config["memories"][0]["history"]["session_id"] == "old"  # the input is not changed
    memory = create_memory(moved)
    assert memory.memories[0].chat_memory.session_id == "u7"


def test_with_session_rejects_an_empty_session() -> None:
    with pytest.raises(ConfigError, match="session_id"):
        with_session({"type": "buffer"}, "")


def test_memory_factory_gives_each_session_its_own_log(tmp_path: Path) -> None:
    make = memory_factory(
        {"type": "buffer", "history": {"type": "sqlite", "path": str(tmp_path / "m.db")}}
    )
    alice, bob = make("alice"), make("bob")
    assert isinstance(alice, BufferMemory)
    alice.save_context({"input": "a"}, {"output": "b"})
    assert bob.buffer_as_messages == []
    assert len(make("alice").buffer_as_messages) == 2


def test_memory_factory_checks_the_config_at_once() -> None:
    with pytest.raises(ConfigError, match="valid types"):
        memory_factory({"type": "bufer"})


def test_with_namespace_moves_every_memory_that_has_one(tmp_path: Path) -> None:
    from memories.core.config import with_namespace

    url = f"sqlite:///{tmp_path / 'p.db'}"
    config = {
        "type": "combined",
        "memories": [
            {"type": "window", "k": 2},
            {"type": "profile", "policy": "manual", "namespace": ["users", "old"], "url": url},
        ],
    }
    moved = with_namespace(config, "users.maya")
    assert moved["memories"][0] == {"type": "window", "k": 2}
    assert moved["memories"][1]["namespace"] == ("users", "maya")
    assert create_memory(moved).memories[1].namespace == ("users", "maya")
    assert with_namespace(config, ("a", "b"))["memories"][1]["namespace"] == ("a", "b")
    with pytest.raises(ConfigError, match="namespace"):
        with_namespace(config, "users..maya")


def test_with_session_sets_a_vector_memorys_own_session() -> None:
    config = {"type": "vector", "mode": "memory", "namespace": ["u"]}
    assert with_session(config, "s7")["session_id"] == "s7"
    assert "session_id" not in with_session({"type": "buffer"}, "s7")
