"""``mode="memory"``: each memory object's in-memory Chroma is its own, as ``sqlite://`` is."""

from __future__ import annotations

import gc
import os
import time

from memories import VectorMemory
from memories.kernel.namespaces import in_namespace

EMBEDDINGS = "tests.vector.conftest:WordEmbeddings"


def _made() -> VectorMemory:
    return VectorMemory(mode="memory", namespace="users.ada", embeddings=EMBEDDINGS, write="sync")


def test_two_in_memory_memories_never_see_each_others_documents() -> None:
    first, second = _made(), _made()  # the same collection prefix, the same namespace
    first.add(["Ada likes green tea"], ids=["tea"])
    assert second.search("green tea") == [] and second.backend.get(["tea"]) == []
    second.add(["Ada likes coffee"], ids=["tea"])
    assert [r.text for r in first.search("green tea")] == ["Ada likes green tea"]
    twin = in_namespace(first, ("users", "bob"))  # a twin of one memory shares its store
    assert [r.text for r in in_namespace(twin, ("users", "ada")).search("tea")] == [
        "Ada likes green tea"
    ]


def test_an_in_memory_store_is_cheap_and_goes_with_its_memory() -> None:
    _made().add(["warm up"])  # Chroma's process-wide system, started once
    files = len(os.listdir("/proc/self/fd"))
    start = time.perf_counter()
    for i in range(20):
        memory = _made()
        memory.add([f"note {i}"])
        del memory
    gc.collect()
    each = (time.perf_counter() - start) / 20
    assert each < 0.5, f"{each * 1000:.0f} ms a memory"
    assert len(os.listdir("/proc/self/fd")) <= files + 2
