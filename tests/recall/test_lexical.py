"""BM25Index and Analyzer behaviour."""

from __future__ import annotations

import random

import pytest

from memories.errors import ConfigError
from memories.stores.recall import Analyzer, BM25Index

WORDS = [
    "apple",
    "banana",
    "cherry",
    "river",
    "mountain",
    "guitar",
    "painting",
    "camping",
    "dog",
    "cat",
    "pottery",
]


def _random_text(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 12)))


def test_analyzer_drops_question_words_and_stems() -> None:
    terms = Analyzer().terms("When did Caroline's friends go running?")
    assert terms == ["carolin", "friend", "go", "run"]


def test_analyzer_without_stemming_or_stopwords_keeps_words() -> None:
    assert Analyzer(stopwords="none", stem=False).terms("When did it rain?") == [
        "when",
        "did",
        "it",
        "rain",
    ]


def test_analyzer_splits_apostrophes_and_underscores_as_before() -> None:
    """Possessive 's goes (curly or straight), inner apostrophes stay, _ splits words."""
    text = "O'Neil\u2019s rock'n'roll's snake_case DON'T x's \u2019s Ann's café's it\u2019s"
    assert Analyzer(stopwords="none", stem=False).terms(text) == [
        "o'neil", "rock'n'roll", "snake", "case", "don't", "x", "s", "ann", "café", "it",
    ]  # fmt: skip
    assert Analyzer(stem=False, min_length=3).terms(text) == [
        "o'neil", "rock'n'roll", "snake", "case", "ann", "café",
    ]  # fmt: skip


def test_a_query_joins_adjacent_words_into_the_compound_they_may_spell() -> None:
    """A query's "video game" also asks for "videogame"; a pair with a stopword never joins."""
    terms = Analyzer(stem=False).query_terms("Nate's video game, the ice-cream")
    joined = ["natevideo", "videogame", "icecream"]
    assert terms == ["nate", "video", "game", "ice", "cream", *joined]
    assert Analyzer().terms("video game") == ["video", "game"]  # documents are not joined


def test_a_compound_asked_open_finds_the_turn_that_writes_it_closed() -> None:
    index = BM25Index()
    index.add("ns", "a", "I love your coconut milk icecream")
    index.add("ns", "b", "We walked along the river")
    assert [h.id for h in index.search("ns", "What ice cream does Nate make?")] == ["a"]


def test_unknown_stopword_list_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="nltk"):
        Analyzer(stopwords="french")  # type: ignore[arg-type]


def test_exact_term_match_ranks_first() -> None:
    index = BM25Index()
    index.add_many(
        "ns",
        [
            ("a", "We went camping by the lake last summer"),
            ("b", "My new pottery class starts on Monday"),
            ("c", "The kids loved the lake and the beach"),
        ],
    )
    hits = index.search("ns", "What class did she sign up for in pottery?")
    assert hits[0].id == "b"
    assert [h.id for h in hits] == ["b"]  # documents without a query term are left out


def test_search_returns_at_most_limit_best_first() -> None:
    index = BM25Index()
    index.add_many("ns", [(str(i), "dog " * (i + 1)) for i in range(20)])
    hits = index.search("ns", "dog", limit=5)
    assert len(hits) == 5
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_ties_are_broken_by_id() -> None:
    index = BM25Index()
    for doc_id in ["z", "b", "m", "a"]:
        index.add("ns", doc_id, "same words here")
    assert [h.id for h in index.search("ns", "words", limit=3)] == ["a", "b", "m"]


@pytest.mark.parametrize(("b", "deletes"), [(0.0, 0.3), (0.75, 0.3), (0.0, 0.0)])
def test_incremental_adds_and_deletes_rank_like_a_fresh_build(b: float, deletes: float) -> None:
    rng = random.Random(7)
    incremental = BM25Index(b=b)
    live: dict[str, str] = {}
    for step in range(400):
        doc_id = f"d{rng.randrange(120)}" if deletes else f"d{step}"
        if rng.random() < deletes:
            incremental.delete("ns", doc_id)
            live.pop(doc_id, None)
        else:
            text = _random_text(rng)
            incremental.add("ns", doc_id, text)  # may replace an existing id
            live[doc_id] = text
        if step % 3 == 0:  # queries in between fill the caches that later changes must reset
            incremental.search("ns", _random_text(rng), limit=5)
    fresh = BM25Index(b=b)
    fresh.add_many("ns", sorted(live.items(), reverse=True))
    assert incremental.count("ns") == fresh.count("ns") == len(live)
    for _ in range(30):
        query = _random_text(rng)
        assert incremental.search("ns", query, limit=15) == fresh.search("ns", query, limit=15)


def test_namespaces_are_isolated() -> None:
    index = BM25Index()
    index.add("alice", "1", "I adopted a puppy named Rex")
    index.add("alice", "2", "The weather was lovely")
    alone = index.search("alice", "puppy")
    index.add_many("bob", [("1", "puppy puppy puppy"), ("3", "puppy training classes")])
    # Bob's documents neither appear in nor change the statistics of Alice's search.
    assert index.search("alice", "puppy") == alone
    assert {h.id for h in index.search("bob", "puppy")} == {"1", "3"}
    assert index.delete("bob", "1")
    assert index.count("alice") == 2 and index.count("bob") == 1
    assert index.search("alice", "puppy") == alone


def test_delete_of_missing_document_reports_false() -> None:
    index = BM25Index()
    assert index.delete("ns", "nope") is False
    index.add("ns", "x", "hello world")
    assert index.delete("ns", "x") is True
    assert index.count("ns") == 0
    assert index.search("ns", "hello") == []


def test_bad_parameters_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="b must be between 0 and 1"):
        BM25Index(b=1.5)
    with pytest.raises(ConfigError, match="k1"):
        BM25Index(k1=-1)
