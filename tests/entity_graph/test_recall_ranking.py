"""The entity graph's lexical ranking uses the same BM25 defaults as every memory's recall."""

from __future__ import annotations

from memories.long_term.entity_graph.recall import by_relevance
from memories.stores.recall import RecallConfig


def test_relations_rank_with_the_recall_defaults_not_a_length_normalised_bm25() -> None:
    """RecallConfig's BM25 (b=0: conversational text ranks best without length norms)."""
    from memories.stores.recall.lexical import BM25Index

    texts = {
        "short": "tea",
        "long": "tea and more tea with the garden, the house, the dog and the old car",
    }
    ours = RecallConfig().lexical_index()
    ours.add_many("t", texts.items())
    expected = [h.id for h in ours.search("t", "tea", limit=2)]
    normalised = BM25Index(b=0.75)
    normalised.add_many("t", texts.items())
    assert [h.id for h in normalised.search("t", "tea", limit=2)] != expected  # the test can fail

    class Said:
        def __init__(self, id: str) -> None:
            self.id = id

        def text(self) -> str:
            return texts[self.id]

    ranked = by_relevance([Said("short"), Said("long")], "tea")  # type: ignore[list-item]
    assert [r.id for r in ranked] == expected
