"""An update that other writers keep beating: reported, recorded as failed, its turns kept."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from memories import CollectionMemory, EntityMemory, InstructionsMemory, ProfileMemory
from memories.testing import ScriptedChatModel
from tests.procedural.fakes import DigestModel

PATCH = '[{"op": "add", "path": "/city", "value": "Lisbon"}]'


def _profile(url: str) -> Any:
    schema = {"type": "object", "properties": {"city": {"type": "string"}}}
    model = ScriptedChatModel(responses=[PATCH] * 10, echo=False)
    return ProfileMemory(schema=schema, llm=model, update_method="json", url=url, policy="manual")


def _collection(url: str) -> Any:
    collection = f"c{uuid.uuid4().hex[:10]}"
    return CollectionMemory(url=url, mode="memory", collection=collection, policy="manual")


def _graph(url: str) -> Any:
    return EntityMemory(url=url, policy="manual")


def _instructions(url: str) -> Any:
    return InstructionsMemory(prompts="Be helpful.", llm=DigestModel(), url=url, policy="manual")


@pytest.mark.parametrize(
    "make", [_profile, _collection, _graph, _instructions], ids=lambda f: f.__name__[1:]
)
def test_a_refresh_beaten_every_time_fails_visibly_and_keeps_its_turns(
    tmp_path: Path, make: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    memory = make(f"sqlite:///{tmp_path / 'm.db'}")
    memory.save_context({"input": "I live in Lisbon."}, {"output": "Nice city!"})
    queued = memory.status().pending
    assert queued >= 1
    store = memory._store
    writes = {"commit": store.commit, "commit_many": store.commit_many}
    for name in writes:  # every compare-and-set write loses to another writer
        monkeypatch.setattr(store, name, lambda *args, **kwargs: None)

    result = memory.refresh()

    assert result.status == "failed" and "times" in str(result.error), result
    status = memory.status()
    assert (status.failures, status.pending) == (1, queued), status
    assert status.last_error == result.error
    for name, write in writes.items():
        monkeypatch.setattr(store, name, write)
    assert memory.refresh().status in ("updated", "unchanged", "revised")  # the kept turns fold in
    assert (memory.status().failures, memory.status().pending) == (0, 0)
