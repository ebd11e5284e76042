"""Turns per write and freshness checks: what keeps a turn cheap without losing anything."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from memories.long_term.vector import VectorMemory
from memories.stores.vector import chroma_backend as backend_module
from tests.vector.conftest import MakeVector


class Calls:
    """Wraps a method and counts its calls."""

    def __init__(self, target: Any, name: str) -> None:
        self.count = 0
        self._inner = getattr(target, name)
        setattr(target, name, self)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.count += 1
        return self._inner(*args, **kwargs)


def persistent(make_vector: MakeVector, path: Path, **options: Any) -> VectorMemory:
    return make_vector(mode="persistent", path=str(path), **options)


def test_searches_count_the_namespace_only_after_a_write(
    make_vector: MakeVector, tmp_path: Path
) -> None:
    memory = persistent(make_vector, tmp_path, write="sync", recall={"mode": "bm25"})
    memory.save_context({"input": "first"}, {"output": "one"})
    memory.search("first")
    counts = Calls(memory.store, "count")
    for _ in range(5):
        assert memory.search("first")[0].text == "input: first\noutput: one"
    assert counts.count == 0
    memory.save_context({"input": "second"}, {"output": "two"})
    assert memory.search("second")[0].text == "input: second\noutput: two"
    assert counts.count == 1


def test_a_write_past_this_process_is_seen_by_the_next_search(
    make_vector: MakeVector, tmp_path: Path
) -> None:
    memory = persistent(make_vector, tmp_path, write="sync", recall={"mode": "bm25"})
    memory.save_context({"input": "first"}, {"output": "turn"})
    for _ in range(3):  # searches that skip the count
        memory.search("first")
    vector = memory.embedder.embed_documents(["zebra crossing"])
    metadata = [{"session": "other", "turn": 0}]
    memory.store.upsert(
        "default", ids=["ext"], texts=["zebra crossing"], embeddings=vector, metadatas=metadata
    )
    assert [r.id for r in memory.search("zebra")] == ["ext"]


def test_turns_saved_faster_than_the_write_interval_are_written_together(
    make_vector: MakeVector, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(backend_module, "_WRITE_INTERVAL", 3600.0)
    memory = persistent(make_vector, tmp_path, recall={"mode": "bm25"})
    writes = Calls(memory.store, "upsert")
    for i in range(5):
        memory.save_context({"input": f"question {i}"}, {"output": "answer"})
    assert len(memory.search("question", k=10)) == 5  # searchable while they wait
    assert memory.flush(timeout=60) is True
    # The first turn may be written at once; the rest wait for the interval, or flush().
    assert writes.count <= 2
    assert memory.store.count("default") == 5 and memory.pending() == 0


def test_a_query_searched_again_is_embedded_once_for_every_namespace(
    make_vector: MakeVector,
) -> None:
    first = make_vector(namespace="one", write="sync")
    embedder = first.embedder
    second = make_vector(namespace="two", write="sync", embeddings=embedder)
    for memory in (first, second):
        memory.save_context({"input": "my sister lives in Porto"}, {"output": "noted"})
    queries = Calls(embedder, "embed_query")
    found = [m.search("where does my sister live?")[0].text for m in (first, second, first)]
    assert found == ["input: my sister lives in Porto\noutput: noted"] * 3
    assert queries.count == 1
    first.search("something else")
    assert queries.count == 2
