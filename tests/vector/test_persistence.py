"""The default persistent store: documents and queued turns survive a restart."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from memories import BackendUnavailableError, VectorMemory
from tests.probes import python

_SCRIPT = """
import json, sys
from memories import VectorMemory
memory = VectorMemory(path=sys.argv[1], namespace=("user-7", "chat"),
                      embeddings="tests.vector.conftest:WordEmbeddings")
if sys.argv[2] == "write":
    memory.save_context({"input": "my sister lives in Oslo"}, {"output": "noted"})
    memory.save_context({"input": "I play the cello"}, {"output": "lovely"})
else:
    found = memory.search(sys.argv[2], k=1)
    print(json.dumps([[r.text, r.metadata["turn"]] for r in found]))
"""


def _run(*args: str) -> str:
    root = Path(__file__).resolve().parents[2]
    return python("-c", _SCRIPT, *args, cwd=root).stdout


def test_documents_survive_a_restart(tmp_path: Path) -> None:
    _run(str(tmp_path), "write")
    assert json.loads(_run(str(tmp_path), "cello")) == [
        ["input: I play the cello\noutput: lovely", 1]
    ]
    # And this process, which never wrote, reads them too (its index is built from the store).
    memory = VectorMemory(
        path=str(tmp_path),
        namespace=("user-7", "chat"),
        embeddings="tests.vector.conftest:WordEmbeddings",
    )
    assert memory.search("Oslo", k=1)[0].metadata["turn"] == 0
    memory.save_context({"input": "next"}, {"output": "turn"})
    assert memory.search("next turn", k=1)[0].metadata["turn"] == 2


def test_a_failed_write_waits_in_the_outbox_file_and_is_flushed_later(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    options = {
        "path": str(tmp_path),
        "namespace": "outbox",
        "embeddings": "tests.vector.conftest:WordEmbeddings",
    }
    memory = VectorMemory(**options)  # type: ignore[arg-type]
    memory.save_context({"input": "first"}, {"output": "ok"})

    def broken(*args: object, **kwargs: object) -> None:
        raise BackendUnavailableError("disk gone")

    monkeypatch.setattr(memory.store, "upsert", broken)
    memory.save_context({"input": "second"}, {"output": "ok"})  # queued; the writer fails
    with pytest.raises(BackendUnavailableError, match="outbox"):
        memory.flush()
    assert (tmp_path / "memories-outbox.db").is_file()
    monkeypatch.undo()
    # A new memory (a restarted process) finds the turn in the outbox and writes it.
    again = VectorMemory(**options)  # type: ignore[arg-type]
    assert again.pending() == 1
    assert again.flush() is True and again.pending() == 0
    assert sorted(r.metadata["turn"] for r in again.search("ok", k=5)) == [0, 1]


def failing_embeddings(error: Exception) -> Any:
    """Word embeddings whose every document embedding raises ``error`` (queries still work)."""
    from tests.vector.conftest import WordEmbeddings

    class Failing(WordEmbeddings):
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            raise error

    return Failing()


def test_a_failed_embedding_loses_nothing(tmp_path: Path) -> None:
    from tests.vector.conftest import WordEmbeddings

    failing = failing_embeddings(RuntimeError("model crashed"))
    memory = VectorMemory(path=str(tmp_path), namespace="emb", embeddings=failing)
    with pytest.raises(RuntimeError, match="model crashed"):
        memory.save_context({"input": "keep me"}, {"output": "ok"})
    assert memory.pending() == 1
    assert memory.dead_letters() == []  # every document fails: nothing is set aside
    fixed = VectorMemory(path=str(tmp_path), namespace="emb", embeddings=WordEmbeddings())
    assert fixed.flush() is True and fixed.pending() == 0
    assert fixed.search("keep me", k=1)[0].text == "input: keep me\noutput: ok"


_STOPPED = """
import os, sys, threading
from memories import VectorMemory
memory = VectorMemory(path=sys.argv[1], namespace="stopped",
                      embeddings="tests.vector.conftest:WordEmbeddings")
memory.save_context({"input": "first"}, {"output": "written"})
memory.flush()
never = threading.Event()
memory.store.upsert = lambda *a, **k: never.wait()  # the writer never gets it into Chroma
memory.save_context({"input": "my sister lives in Oslo"}, {"output": "queued"})
os._exit(0)  # stops without flushing, as a killed process would
"""


def test_turns_a_stopped_process_left_queued_are_searchable_then_written(
    tmp_path: Path,
) -> None:
    root = Path(__file__).resolve().parents[2]
    python("-c", _STOPPED, str(tmp_path), cwd=root)
    memory = VectorMemory(
        path=str(tmp_path), namespace="stopped", embeddings="tests.vector.conftest:WordEmbeddings"
    )
    assert memory.pending() == 1
    found = memory.search("sister Oslo", k=1)[0]
    assert (found.text, found.metadata["turn"]) == (
        "input: my sister lives in Oslo\noutput: queued",
        1,
    )
    memory.flush()
    assert memory.pending() == 0 and memory.store.count("stopped") == 2


_OUTAGE = """
import sys
from memories import VectorMemory
from tests.vector.conftest import WordEmbeddings

class Down(WordEmbeddings):
    def embed_documents(self, texts):
        raise ConnectionError("embedding service down")

memory = VectorMemory(path=sys.argv[1], namespace="outage", embeddings=Down(), write="background")
memory.search("nothing yet")  # the namespace's index is loaded: saves are queued
for i in range(4):
    try:  # once the background write has failed, a save writes itself and raises
        memory.save_context({"input": f"queued turn {i}"}, {"output": "ok"})
    except ConnectionError:
        pass
    if i == 2:
        try:
            memory.flush()
        except ConnectionError:
            pass
print(memory.pending())
"""


def test_turn_numbers_stay_distinct_after_an_outage_and_a_restart(tmp_path: Path) -> None:
    """Issue 10, item 5: a turn queued unnumbered after an outage took a number already given."""
    root = Path(__file__).resolve().parents[2]
    done = python("-c", _OUTAGE, str(tmp_path), cwd=root)
    assert done.stdout.strip() == "4"
    memory = VectorMemory(
        path=str(tmp_path), namespace="outage", embeddings="tests.vector.conftest:WordEmbeddings"
    )
    assert memory.flush() is True
    turns = {r.text.split("\n")[0]: r.metadata["turn"] for r in memory.search("queued", k=10)}
    assert turns == {f"input: queued turn {i}": i for i in range(4)}


def _picky() -> Any:
    from tests.vector.conftest import WordEmbeddings

    class Picky(WordEmbeddings):
        """A hosted embedder's length limit, in miniature: it refuses one text, not all."""

        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            if any("POISON" in t for t in texts):
                raise ValueError("input too long for this model")
            return super().embed_documents(texts)

    return Picky()


@pytest.mark.parametrize("write", ["sync", "background"])
def test_a_document_the_embedder_refuses_is_set_aside_and_the_rest_flows(
    tmp_path: Path, write: str
) -> None:
    """Issue 10, item 4: one refused document blocked its namespace forever."""
    memory = VectorMemory(path=str(tmp_path), namespace="dl", embeddings=_picky(), write=write)
    memory.search("warm up")  # index loaded: background saves are queued
    memory.save_context({"input": "I live in Oslo"}, {"output": "ok"})
    if write == "sync":  # alone, it cannot be told from a broken embedder: raised, kept
        with pytest.raises(ValueError, match="too long"):
            memory.save_context({"input": "POISON pasted document"}, {"output": "ok"})
        assert memory.pending() == 1
    else:
        memory.save_context({"input": "POISON pasted document"}, {"output": "ok"})
    memory.save_context({"input": "my cat is Tom"}, {"output": "ok"})  # written with it: told
    assert memory.flush() is True
    assert memory.pending() == 0
    (letter,) = memory.dead_letters()
    assert letter.row.text.startswith("input: POISON") and "too long" in letter.error
    assert memory.status().dead_letters == 1 and memory.status().failures == 0
    texts = [r.text for r in memory.search("Oslo cat POISON", k=10)]
    assert len(texts) == 2 and not any("POISON" in t for t in texts)
    memory.save_context({"input": "later turn"}, {"output": "still flowing"})
    assert memory.flush() is True and memory.store.count("dl") == 3

    fixed = VectorMemory(
        path=str(tmp_path), namespace="dl", embeddings="tests.vector.conftest:WordEmbeddings"
    )
    assert fixed.dead_letters()[0].row.doc_id == letter.row.doc_id  # durable
    assert fixed.retry_dead_letters() == 1
    assert fixed.dead_letters() == [] and fixed.store.count("dl") == 4
    assert "POISON" in fixed.search("POISON pasted", k=1)[0].text


def test_an_outage_sets_nothing_aside(tmp_path: Path) -> None:
    down = failing_embeddings(ConnectionError("embedding service down"))
    memory = VectorMemory(path=str(tmp_path), namespace="down", embeddings=down, write="sync")
    with pytest.raises(ConnectionError):
        memory.save_context({"input": "keep me"}, {"output": "ok"})
    assert memory.pending() == 1 and memory.dead_letters() == []
