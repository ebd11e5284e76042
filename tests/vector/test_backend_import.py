"""A memory imports its backend's client library when it is made, not at its first search."""

from __future__ import annotations

import json

from tests.probes import python

_PROBE = """
import json, sys
sys.modules["chromadb"] = None  # as if the chroma extra were not installed
from langchain_core.vectorstores import InMemoryVectorStore
from memories.errors import MissingDependencyError
from memories.long_term.vector import VectorMemory, VectorStoreRetrieverMemory
from langchain_core.embeddings import DeterministicFakeEmbedding

found = {}
try:
    VectorMemory(mode="memory")
    found["chroma"] = "made"
except MissingDependencyError as exc:
    found["chroma"] = str(exc)
retriever = InMemoryVectorStore(DeterministicFakeEmbedding(size=8)).as_retriever()
VectorStoreRetrieverMemory(retriever=retriever)
found["retriever"] = "made"
VectorMemory(vectors="postgresql://nobody@127.0.0.1:1/none")
found["pgvector"] = "made"
print(json.dumps(found))
"""


def _probe() -> dict[str, str]:
    done = python("-c", _PROBE)
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def test_a_chroma_memory_without_the_chroma_extra_fails_when_made() -> None:
    found = _probe()
    assert "pip install 'chat-memories[chroma]'" in found["chroma"]
    # Memories that do not use Chroma never import it.
    assert found["retriever"] == "made"
    assert found["pgvector"] == "made"


def test_importing_memories_does_not_import_chroma_making_a_chroma_memory_does() -> None:
    probe = (
        "import sys, memories\nfrom memories import VectorMemory\n"
        "before = 'chromadb' in sys.modules\nVectorMemory(mode='memory')\n"
        "embedded = 'chromadb.api.rust' in sys.modules\nVectorMemory(mode='http')\n"
        "print(before, embedded, 'chromadb.api.fastapi' in sys.modules)"
    )
    done = python("-c", probe)
    # Chroma, and the module of each mode's client, before any client is made.
    assert done.stdout.split() == ["False", "True", "True"]
