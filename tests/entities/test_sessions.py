"""Whose entities: one config serves every user, and no user reads another's entities or graph."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from memories import ConfigError, memory_factory
from memories.stores.entities.summaries import SQLiteEntityStore
from tests.entities.fakes import RuleModel


def _config(tmp_path: Path, kind: str, store: Any) -> dict[str, Any]:
    field = "entity_store" if kind == "conversation_entity" else "kg"
    history = {"type": "sqlite", "path": str(tmp_path / "chat.db"), "session_id": "x"}
    return {"type": kind, "llm": RuleModel(), "history": history, field: store}


def _sql_store(tmp_path: Path, kind: str) -> dict[str, Any]:
    if kind == "conversation_entity":
        return {"type": "sqlite", "db_file": str(tmp_path / "entities.db"), "session_id": "x"}
    return {"type": "sql", "url": f"sqlite:///{tmp_path / 'graph.db'}", "session_id": "x"}


def _knowledge(memory: Any) -> Any:
    """What the memory knows about Jane, whichever kind it is."""
    shown = memory.load_memory_variables({"input": "Where does Jane live?"})
    return shown.get("entities", shown.get("history"))


@pytest.mark.parametrize("kind", ["conversation_entity", "conversation_kg"])
def test_two_users_of_one_factory_never_see_each_others_knowledge(
    tmp_path: Path, kind: str
) -> None:
    factory = memory_factory(_config(tmp_path, kind, _sql_store(tmp_path, kind)))
    alice, bob = factory("alice"), factory("bob")
    before = _knowledge(bob)
    alice.load_memory_variables({"input": "Jane lives in Oslo"})
    alice.save_context({"input": "Jane lives in Oslo"}, {"output": "Noted."})
    assert "Oslo" in str(_knowledge(factory("alice")))  # kept, for alice, in the database
    assert _knowledge(bob) == before and "Oslo" not in str(_knowledge(factory("bob")))


@pytest.mark.parametrize("kind", ["conversation_entity", "conversation_kg"])
def test_an_in_process_store_is_one_per_session_already(tmp_path: Path, kind: str) -> None:
    factory = memory_factory(_config(tmp_path, kind, {"type": "memory"}))
    alice, bob = factory("alice"), factory("bob")
    alice.load_memory_variables({"input": "Jane lives in Oslo"})
    alice.save_context({"input": "Jane lives in Oslo"}, {"output": "Noted."})
    assert "Oslo" not in str(_knowledge(bob))


def test_a_store_object_in_a_factory_config_is_refused_naming_the_field(tmp_path: Path) -> None:
    store = SQLiteEntityStore(db_file=tmp_path / "shared.db")
    with pytest.raises(ConfigError, match=r"entity_store is a store object .* every session"):
        memory_factory(_config(tmp_path, "conversation_entity", store))
