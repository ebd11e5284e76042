"""A turn is embedded as its whole text and its input part, one batch call, on every path."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from langchain_core.messages import AIMessage, HumanMessage

from memories import BackendError, VectorMemory
from memories.long_term.vector import VectorStoreRetrieverMemory
from memories.stores.vector.embedded import OUTPUT_AT_KEY, embedded_texts
from tests.vector.conftest import MakeVector, WordEmbeddings

REPLY = "output: " + " ".join(["Dogs need walks, food and patience every day."] * 30)


class Recording(WordEmbeddings):
    """Word embeddings that keep every batch of document texts they were given."""

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[list[str]] = []

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.batches.append(list(texts))
        return super().embed_documents(texts)


def turn_vector(text: str, at: int) -> list[float]:
    """What a turn's stored embedding must be: the mean direction of its text and input part."""
    words = WordEmbeddings()
    mean = np.add(words._vector(text), words._vector(text[: at - 1]))
    return list(mean / np.linalg.norm(mean))


def stored(memory: VectorMemory) -> tuple[str, str, list[float]]:
    """The only document of ``memory``: its id, text and stored embedding."""
    [doc] = memory.export_documents()
    return doc.id, doc.text, memory.backend.vectors([doc.id])[doc.id]


@pytest.mark.parametrize("write", ["sync", "background"])
def test_a_turn_is_embedded_with_its_input_part_in_one_call(
    make_vector: MakeVector, write: str
) -> None:
    embedder = Recording()
    memory = make_vector(namespace=("u", write), embeddings=embedder, write=write)
    memory.save_context({"input": "my dog is called Rex"}, {"output": REPLY[8:]})
    if write == "background":  # the search embeds the queued turn; the writer reuses it
        assert memory.search("Rex", k=1)
    memory.flush()
    whole = f"input: my dog is called Rex\n{REPLY}"
    assert embedder.batches == [[whole, "input: my dog is called Rex"]]
    _, text, vector = stored(memory)
    assert text == whole
    assert vector == pytest.approx(turn_vector(whole, len("input: my dog is called Rex") + 1))


def test_pgvector_embeds_a_turn_with_its_input_part(make_pg_vector: MakeVector) -> None:
    memory = make_pg_vector(namespace=("turns",))
    memory.save_context({"input": "my dog is called Rex"}, {"output": REPLY[8:]})
    _, text, vector = stored(memory)
    assert vector == pytest.approx(turn_vector(text, len("input: my dog is called Rex") + 1))


async def test_pgvector_async_save_embeds_as_sync(make_pg_vector: MakeVector) -> None:
    memory = make_pg_vector(namespace=("async-turns",))
    await memory.asave_context({"input": "my dog is called Rex"}, {"output": REPLY[8:]})
    _, text, vector = stored(memory)
    assert vector == pytest.approx(turn_vector(text, len("input: my dog is called Rex") + 1))


def test_a_turn_the_embedder_failed_is_embedded_as_saved_when_replayed(tmp_path: Path) -> None:
    class Failing(WordEmbeddings):
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            raise RuntimeError("model crashed")

    options = {"path": str(tmp_path), "namespace": "replayed"}
    with pytest.raises(RuntimeError, match="model crashed"):
        VectorMemory(**options, embeddings=Failing()).save_context(  # type: ignore[arg-type]
            {"input": "my dog is called Rex"}, {"output": REPLY[8:]}
        )
    again = VectorMemory(**options, embeddings=WordEmbeddings())  # type: ignore[arg-type]
    assert again.pending() == 1 and again.flush() is True
    _, text, vector = stored(again)
    assert vector == pytest.approx(turn_vector(text, len("input: my dog is called Rex") + 1))


def test_an_imported_turn_is_embedded_as_it_was_saved(make_vector: MakeVector) -> None:
    source = make_vector(namespace="source", write="sync")
    source.save_context({"input": "my dog is called Rex"}, {"output": REPLY[8:]})
    [doc] = source.export_documents()
    target = make_vector(namespace="target", write="sync")
    exported = {k: v for k, v in doc.metadata.items() if k != "namespace"}  # as `memories export`
    target.import_documents([doc.id], [doc.text], [exported])
    assert stored(target)[2] == pytest.approx(stored(source)[2])


def test_an_edited_turn_is_embedded_with_its_new_input_part(make_vector: MakeVector) -> None:
    memory = make_vector(namespace="edits", write="sync")
    human = HumanMessage("my dog is called Rex", id="h1")
    memory.save_context({"input": human}, {"output": AIMessage(REPLY[8:], id="a1")})
    memory.edit_message("h1", HumanMessage("my cat is called Tom", id="h1"))
    _, text, vector = stored(memory)
    assert text.startswith("input: my cat is called Tom\n")
    assert vector == pytest.approx(turn_vector(text, len("input: my cat is called Tom") + 1))


def test_a_document_that_is_no_turn_is_embedded_whole(make_vector: MakeVector) -> None:
    embedder = Recording()
    memory = make_vector(namespace="docs", embeddings=embedder, write="sync")
    memory.add(["input: a note\noutput: that only looks like a turn"])
    assert embedder.batches == [["input: a note\noutput: that only looks like a turn"]]


def test_a_retriever_turn_without_an_input_part_is_embedded_whole() -> None:
    embedder = Recording()
    memory = VectorStoreRetrieverMemory(
        mode="memory", collection="embedded-retriever", embeddings=embedder, write="sync"
    )
    memory.save_context({"history": "ignored"}, {"output": "only the reply"})
    assert embedder.batches == [["output: only the reply"]]


@pytest.mark.parametrize(
    "vectors", [[[1.0, 0.0]], [[1.0, 0.0], [1.0]]], ids=["one for two texts", "two widths"]
)
def test_an_embedder_giving_wrong_vectors_stores_nothing(
    make_pg_vector: MakeVector, vectors: list[list[float]]
) -> None:
    class Wrong(WordEmbeddings):
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return vectors

    memory = make_pg_vector(namespace=("wrong",), embeddings=Wrong())
    with pytest.raises(BackendError, match=r"gave \d embeddings of widths .* for 2 texts"):
        memory.save_context({"input": "my dog is called Rex"}, {"output": "nice"})
    assert memory.export_documents() == []


@pytest.mark.parametrize(
    ("at", "split"),
    [(9, True), (None, False), ("9", False), (9.0, False), (True, False), (8, False), (99, False)],
)
def test_only_a_position_after_a_newline_splits_a_text(at: object, split: bool) -> None:
    # Caller metadata may hold anything under the key: it never cuts a text mid-line.
    text = "input: a\noutput: b"
    assert embedded_texts(text, {OUTPUT_AT_KEY: at}) == ((text, "input: a") if split else (text,))


def test_a_server_that_never_answers_the_connect_is_named_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import threading

    import chromadb
    from memories.integrations.chroma import ChromaStore

    from memories import BackendUnavailableError

    answer = threading.Event()
    monkeypatch.setattr(chromadb, "HttpClient", lambda **_: answer.wait(5))
    store = ChromaStore(mode="http", host="hung.invalid", port=1, timeout=0.05)
    try:
        with pytest.raises(BackendUnavailableError) as raised:
            store._get_client()
    finally:
        answer.set()
    assert str(raised.value).startswith(
        "Could not connect to the Chroma server at http://hung.invalid:1: no answer within 0.05 s."
    )
