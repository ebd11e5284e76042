"""Turns per write and freshness checks: what keeps a turn cheap without losing anything."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from memories.long_term.vector import VectorMemory
from memories.stores.vector import chroma_backend as backend_module
from tests.probes import python
from tests.vector.conftest import ChromaServer, MakeVector


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


def test_a_search_never_reads_or_counts_the_whole_namespace(
    make_vector: MakeVector, tmp_path: Path
) -> None:
    """The lexical index, positions and counts are in SQL: Chroma is asked for its top hits only."""
    memory = persistent(make_vector, tmp_path, write="sync")
    for i in range(6):
        memory.save_context({"input": f"question {i}"}, {"output": f"answer {i}"})
    counts, reads = Calls(memory.store, "count"), Calls(memory.store, "get")
    whole: list[Any] = []
    inner = reads._inner

    def read(*args: Any, **options: Any) -> Any:
        if options.get("ids") is None:
            whole.append(options)  # a read of the whole namespace (or of a filter)
        return inner(*args, **options)

    reads._inner = read
    for i in range(6):
        assert memory.search(f"question {i}")[0].text == f"input: question {i}\noutput: answer {i}"
        memory.save_context({"input": f"more {i}"}, {"output": "again"})
    assert counts.count == 0
    assert whole == []


_OTHER_PROCESS = """
import sys
from memories.long_term.vector import VectorMemory
memory = VectorMemory(mode="http", port=int(sys.argv[1]), outbox=sys.argv[2],
                      collection=sys.argv[3], write="sync",
                      embeddings="tests.vector.conftest:WordEmbeddings")
memory.save_context({"input": "a zebra crossing"}, {"output": "stripes"})
memory.close()
"""


def test_a_turn_saved_by_another_process_is_found_by_the_next_search(
    make_vector: MakeVector, chroma_server: ChromaServer, tmp_path: Path
) -> None:
    """Processes sharing a Chroma server and an outbox database share one recall index."""
    outbox = str(tmp_path / "outbox.db")
    memory = make_vector(mode="http", port=chroma_server.port, outbox=outbox, write="sync")
    memory.save_context({"input": "first"}, {"output": "turn"})
    memory.search("first")
    root = Path(__file__).resolve().parents[2]
    python("-c", _OTHER_PROCESS, str(chroma_server.port), outbox, memory.collection, cwd=root)
    found = memory.search("zebra", k=1)
    assert [r.text for r in found] == ["input: a zebra crossing\noutput: stripes"]
    assert found[0].metadata["turn"] == 1  # numbered after this process's turn 0
    assert memory.backend.count() == 2


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
