"""Many users in one process: dropped memories leave no per-namespace state behind (issue 37)."""

from __future__ import annotations

import gc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import chromadb
import pytest

from memories import VectorMemory
from memories.kernel import embeddings
from memories.stores.vector import outbox, recall_index, writes
from memories.stores.vector.writes import background_writer
from tests.vector.conftest import MakeVector, WordEmbeddings

USERS = 300
WORDS = WordEmbeddings()


def test_per_namespace_maps_stay_bounded_when_memories_are_dropped(
    make_vector: MakeVector, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The in-memory stores share the process's scratch outbox, and its recall index.
    monkeypatch.setattr(outbox.outbox_for("memory", "", None).recall._known, "limit", 40)
    monkeypatch.setattr(embeddings._query_vectors, "limit", 40)
    target = ""
    for user in range(USERS):
        memory = make_vector(namespace=("users", f"u{user}"), write="background")
        memory.save_context({"input": f"user {user} likes tea"}, {"output": "noted"})
        assert memory.search(f"user {user} tea", k=2)
        target = memory.store.target
        del memory
    background_writer().flush(timeout=30)
    gc.collect()
    mine = [key for key in writes._lanes if key[0] == target]  # a lane holds its pending ones
    assert mine == [], f"{len(mine)} namespaces' state kept for {USERS} dropped memories"
    assert len(embeddings._query_vectors) <= 40
    indexes = {id(i): i for i in gc.get_objects() if isinstance(i, recall_index.RecallIndex)}
    assert all(len(index._known) <= 40 for index in indexes.values())


def test_a_turn_queued_before_its_memory_is_dropped_still_lands(make_vector: MakeVector) -> None:
    memory = make_vector(namespace=("users", "dropped"), write="background")
    memory.save_context({"input": "first turn"}, {"output": "written at once"})
    memory.save_context({"input": "my cat is called Tom"}, {"output": "queued"})
    store, queued = memory.store, memory.pending()
    del memory
    gc.collect()
    assert background_writer().flush(timeout=30)
    assert store.count("users/dropped") == 2, f"{queued} queued turn(s) lost with their memory"


def test_a_dropped_memory_whose_turn_the_writer_wrote_leaves_no_state(
    make_vector: MakeVector,
) -> None:
    """The writer's thread held its last job (and so its memory) until the next job came."""
    memory = make_vector(namespace=("users", "written"), write="background")
    memory.save_context({"input": "first turn"}, {"output": "written at once"})
    memory.save_context({"input": "my cat is called Tom"}, {"output": "queued"})
    target = memory.store.target
    assert background_writer().flush(timeout=30) and memory.pending() == 0
    del memory
    gc.collect()
    assert [key for key in writes._lanes if key[0] == target] == []  # with its pending ones


def test_memories_of_one_folder_share_one_chroma_client(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[str] = []

    def counted(name: str, make: Callable[..., Any]) -> Callable[..., Any]:
        def making(*args: Any, **kwargs: Any) -> Any:
            made.append(name)
            return make(*args, **kwargs)

        return making

    monkeypatch.setattr(chromadb, "Settings", counted("settings", chromadb.Settings))
    monkeypatch.setattr(chromadb, "PersistentClient", counted("client", chromadb.PersistentClient))
    for user in range(5):
        memory = VectorMemory(path=str(tmp_path), namespace=("users", f"u{user}"), embeddings=WORDS)
        memory.save_context({"input": f"user {user} likes tea"}, {"output": "noted"})
        assert memory.search("tea", k=1)
        del memory
    # Settings read the environment (about 50 ms): twice per user before, the first user's now.
    assert made.count("client") == 1 and made.count("settings") <= 2, made
