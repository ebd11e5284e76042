"""Search scores are calibrated: comparable across queries and namespaces, with a min_score."""

from __future__ import annotations

import asyncio

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.vectorstores import InMemoryVectorStore

from memories import InvalidInputError, VectorMemory, VectorStoreRetrieverMemory, create_memory
from tests.vector.conftest import MakeVector

CHAT = [
    ("My sister lives in Porto", "Noted, Porto."),
    ("I had pasta for dinner yesterday", "Sounds tasty."),
    ("Our dog is called Rex", "Hello Rex!"),
    ("We went hiking in the Alps in May", "Lovely trip."),
]


def test_an_unrelated_query_scores_far_below_a_matching_one(make_vector: MakeVector) -> None:
    memory = make_vector()
    for said, reply in CHAT:
        memory.save_context({"input": said}, {"output": reply})
    match = memory.search("where does my sister live?", k=4)
    stray = memory.search("quantum chromodynamics", k=4)
    assert "Porto" in match[0].text
    assert match[0].score > 0.05
    assert max(r.score for r in stray) < match[0].score / 20


def test_a_lone_document_scores_by_how_well_it_matches(make_vector: MakeVector) -> None:
    memory = make_vector()
    memory.save_context({"input": "My sister lives in Porto"}, {"output": "Noted."})
    (match,) = memory.search("where does my sister live?")
    (stray,) = memory.search("quantum chromodynamics")
    assert 0 < stray.score < match.score / 20 < match.score < 1


@pytest.mark.parametrize("mode", ["hybrid", "dense", "bm25"])
def test_the_best_match_scores_the_same_alone_or_among_other_documents(
    make_vector: MakeVector, mode: str
) -> None:
    """The top of a search's scale is the best match's calibrated score: the crowd sets no level."""
    sister = "input: My sister lives in Porto\noutput: Noted."
    metadata = {"session": "t", "turn": 0, "timestamp": 1_700_000_000.0}  # no neighbours
    alone = make_vector(namespace=("alone",), recall={"mode": mode})
    crowded = make_vector(namespace=("crowded",), recall={"mode": mode})
    alone.add([sister], metadatas=[metadata], ids=["sister"])
    others = [f"input: my sister {w} in town\noutput: ok" for w in ("works", "shops", "sings")]
    others += [f"input: {said}\noutput: {reply}" for said, reply in CHAT[1:]]  # not the sister
    crowded.add(
        [*others, sister],
        metadatas=[{} for _ in others] + [metadata],
        ids=[*(f"o{i}" for i in range(len(others))), "sister"],
    )
    for query in ["my sister lives in Porto", "Porto"]:
        (lone,) = alone.search(query, k=10)
        best = crowded.search(query, k=10)[0]
        assert best.id == "sister"
        assert best.score == pytest.approx(lone.score, abs=1e-6)


def test_min_score_drops_results_below_it_and_keeps_the_order(make_vector: MakeVector) -> None:
    memory = make_vector(k=4)
    for said, reply in CHAT:
        memory.save_context({"input": said}, {"output": reply})
    everything = memory.search("my sister and the dog Rex")
    floor = sorted(r.score for r in everything)[1]  # between the lowest two scores
    kept = memory.search("my sister and the dog Rex", min_score=floor)
    assert [r.id for r in kept] == [r.id for r in everything if r.score >= floor]
    assert 0 < len(kept) < len(everything)
    assert memory.search("quantum chromodynamics", min_score=0.01) == []


def test_the_memorys_min_score_applies_to_search_and_load(make_vector: MakeVector) -> None:
    memory = make_vector(min_score=0.01)
    memory.save_context({"input": "My sister lives in Porto"}, {"output": "Noted."})
    assert memory.search("quantum chromodynamics") == []
    assert memory.load_memory_variables({"input": "quantum chromodynamics"}) == {"history": ""}
    assert (
        "Porto" in memory.load_memory_variables({"input": "where does my sister live?"})["history"]
    )
    # A call's own min_score overrides the memory's.
    assert len(memory.search("quantum chromodynamics", min_score=0.0)) == 1
    shown = memory.load_memory_variables({"input": "quantum chromodynamics"}, min_score=0)
    assert "Porto" in shown["history"]


def test_async_twins_apply_min_score_too(make_vector: MakeVector) -> None:
    memory = make_vector(min_score=0.01)
    memory.save_context({"input": "My sister lives in Porto"}, {"output": "Noted."})

    async def run() -> tuple[object, object, object]:
        return (
            await memory.asearch("quantum chromodynamics"),
            await memory.asearch("quantum chromodynamics", min_score=0.0),
            await memory.aload_memory_variables({"input": "quantum chromodynamics"}),
        )

    none, one, shown = asyncio.run(run())
    assert none == [] and len(one) == 1  # type: ignore[arg-type]
    assert shown == {"history": ""}


@pytest.mark.parametrize("bad", [-0.1, 1.5, "0.5", True])
def test_a_min_score_out_of_range_is_refused_naming_it(
    make_vector: MakeVector, bad: object
) -> None:
    memory = make_vector()
    with pytest.raises(InvalidInputError, match="min_score"):
        memory.search("x", min_score=bad)  # type: ignore[arg-type]


def test_a_memory_with_a_min_score_out_of_range_is_refused(make_vector: MakeVector) -> None:
    with pytest.raises(ValueError, match="min_score"):
        make_vector(min_score=2.0)


def test_min_score_on_a_langchain_store_says_scores_are_not_calibrated() -> None:
    store = InMemoryVectorStore(DeterministicFakeEmbedding(size=8))
    memory = VectorStoreRetrieverMemory(retriever=store.as_retriever())
    memory.save_context({"input": "hi"}, {"output": "hello"})
    assert len(memory.search("hi")) == 1  # no floor: fine
    with pytest.raises(NotImplementedError, match="VectorStoreBackend"):
        memory.search("hi", min_score=0.5)


def test_min_score_round_trips_through_the_config(make_vector: MakeVector) -> None:
    memory = make_vector(min_score=0.02)
    config = memory.to_config()
    assert config["min_score"] == 0.02
    rebuilt = create_memory(config)
    assert isinstance(rebuilt, VectorMemory) and rebuilt.min_score == 0.02


def test_a_result_outside_the_dense_candidates_scores_by_its_stored_embedding_in_one_read(
    make_vector: MakeVector, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its embedding comes with its text (no second read of the store), and gives the same score."""
    texts = [f"input: {said}\noutput: {reply}" for said, reply in CHAT]
    ids = [f"t{i}" for i in range(len(texts))]
    wide = make_vector(namespace=("wide",))  # every document is a dense candidate
    narrow = make_vector(namespace=("narrow",), recall={"candidates": 1})
    for memory in (wide, narrow):
        memory.add(texts, metadatas=[{"turn": i} for i in range(len(texts))], ids=ids)
        memory.flush()
    query = "my sister and the dog Rex"
    expected = {r.id: r.score for r in wide.search(query, k=4)}
    store = narrow.backend.store  # type: ignore[attr-defined]

    def refused(*args: object) -> None:
        raise AssertionError("the embeddings were read apart from the documents")

    monkeypatch.setattr(store, "vectors", refused)
    found = narrow.search(query, k=4)
    assert len(found) >= 2  # more than the one dense candidate
    for result in found:
        assert result.score == pytest.approx(expected[result.id], abs=1e-6)


STORY = [
    "We adopted a puppy and named him Rex",
    "He sleeps all day on the sofa",
    "Rex chewed my new shoes this morning",
    "The vet said he is healthy",
    "Rex already knows how to sit",
]


@pytest.mark.parametrize("mode", ["hybrid", "dense", "bm25"])
def test_results_come_in_the_order_of_their_scores_and_the_parts_add_up_to_them(
    make_vector: MakeVector, mode: str
) -> None:
    """Neighbours lend and rare words weigh in the order: the score reports that same order."""
    memory = make_vector(recall={"mode": mode})
    memory.add(
        STORY,
        metadatas=[{"session": "s", "turn": i, "speakers": ["Ann"]} for i in range(len(STORY))],
    )
    for query in ("Rex", "what did Rex chew", "puppy sofa", "is Rex healthy"):
        found = memory.search(query, k=5)
        scores = [r.score for r in found]
        assert scores == sorted(scores, reverse=True), (query, [(r.text, r.score) for r in found])
        for result in found:
            assert result.ranking is not None
            assert sum(result.ranking) == pytest.approx(result.score, abs=1e-9)
