"""A document deleted after it was set aside stays deleted: a retry drops its letter."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from memories import CollectionMemory, ExampleMemory, VectorMemory
from tests.vector.conftest import WordEmbeddings


class Picky(WordEmbeddings):
    """Refuses one text, not all: that document is set aside, the others are written."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        if any("POISON" in t for t in texts):
            raise ValueError("input too long for this model")
        return super().embed_documents(texts)


def _made(kind: str, path: Path, embeddings: Any) -> Any:
    where = {"path": str(path / "chroma"), "namespace": ("users", "ada")}
    if kind == "vector":
        return VectorMemory(**where, embeddings=embeddings)
    if kind == "examples":
        return ExampleMemory(**where, embeddings=embeddings, input_keys=["input"])
    return CollectionMemory(**where, embeddings=embeddings, url=f"sqlite:///{path / 'l.db'}")


def _add(memory: Any, texts: list[str]) -> list[str]:
    if isinstance(memory, CollectionMemory):
        return list(memory.put_many(texts))
    if isinstance(memory, ExampleMemory):
        return list(memory.add_examples([{"input": t, "output": "ok"} for t in texts]))
    return list(memory.add(texts))


def _delete(memory: Any, doc_id: str, call: str) -> None:
    if call == "sync":
        memory.delete(doc_id) if isinstance(memory, CollectionMemory) else memory.delete([doc_id])
    elif isinstance(memory, CollectionMemory):
        asyncio.run(memory.adelete(doc_id))
    else:
        asyncio.run(memory.adelete([doc_id]))


@pytest.mark.parametrize("call", ["sync", "async"])
@pytest.mark.parametrize("kind", ["vector", "examples", "collection"])
def test_a_dead_letter_of_a_deleted_document_is_dropped_not_replayed(
    tmp_path: Path, kind: str, call: str
) -> None:
    memory = _made(kind, tmp_path, Picky())
    kept, poisoned = _add(memory, ["Ada lives in Oslo", "POISON pasted document"])
    assert memory.flush() is True
    assert [letter.row.doc_id for letter in memory.dead_letters()] == [poisoned]

    _delete(memory, poisoned, call)

    assert memory.dead_letters() == []
    fixed = _made(kind, tmp_path, WordEmbeddings())  # an embedder that would take it now
    assert fixed.retry_dead_letters() == 0
    assert fixed.flush() is True
    assert [r.id for r in fixed.backend.get([kept, poisoned])] == [kept]
