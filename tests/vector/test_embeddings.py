"""The default embeddings through the memory: similar texts rank first, scores are cosines."""

from __future__ import annotations

import uuid

import numpy as np
import pytest

from memories import VectorMemory
from tests import needs

pytest.importorskip("onnxruntime", reason=needs.extra("onnxruntime"))

DOCUMENTS = [
    "My dog loves chasing tennis balls in the park.",
    "The stock market fell sharply after the rate announcement.",
    "I baked a chocolate cake for my mother's birthday.",
    "Our flight to Tokyo was delayed by three hours.",
    "She is learning to play the violin at a music school.",
]
# Paraphrases that share (almost) no words with their document.
QUERIES = {
    "my puppy enjoys fetching at the playground": 0,
    "shares dropped after the central bank decision": 1,
    "made a dessert for mum's celebration": 2,
    "the plane to Japan left late": 3,
    "taking lessons on a string instrument": 4,
}


@pytest.fixture(scope="module")
def memory() -> VectorMemory:
    memory = VectorMemory(
        mode="memory",
        collection=f"emb{uuid.uuid4().hex[:8]}",
        recall={"mode": "dense", "neighbour_weight": 0.0},
    )
    memory.add(DOCUMENTS, ids=[str(i) for i in range(len(DOCUMENTS))])
    return memory


@pytest.mark.parametrize(("query", "expected"), QUERIES.items())
def test_a_paraphrase_finds_its_document_first(
    memory: VectorMemory, query: str, expected: int
) -> None:
    assert memory.search(query, k=1)[0].id == str(expected)


def test_dense_candidates_are_cosine_similarities(memory: VectorMemory) -> None:
    query = "the plane to Japan left late"
    vectors = np.array(memory.embedder.embed_documents(DOCUMENTS))
    expected = vectors @ np.array(memory.embedder.embed_query(query))
    hits = memory.store.nearest("default", memory.embedder.embed_query(query), n=5)
    for hit in hits:
        assert hit.score == pytest.approx(expected[int(hit.id)], abs=1e-4)
    assert [h.id for h in hits] == [str(i) for i in np.argsort(-expected)]
